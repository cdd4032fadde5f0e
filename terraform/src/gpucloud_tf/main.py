"""Entry point `terraform-provider-gpucloud` (what Terraform executes): `tf`'s runner with our servicer."""
from __future__ import annotations


def main() -> None:
    import signal

    import tf.provider
    import tf.runner
    from tf.runner import run_provider

    from .framework import Servicer
    from .provider import GpuCloudProvider

    # Ctrl-C reaches the plugin's process group too; Terraform cancels through the StopProvider RPC and waits for
    # the answers, so the plugin ignores SIGINT (as Go plugins do) instead of dying mid-apply.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tf.provider.ProviderServicer = Servicer   # the runner builds `tf.provider.ProviderServicer(provider)`
    tf.runner._ShutdownInterceptor = _Shutdown
    run_provider(GpuCloudProvider())


class _Shutdown:
    """`tf`'s shutdown interceptor stops the gRPC server on StopProvider, killing the applies in flight (Terraform
    then reports "Plugin did not respond" and records nothing). Here only go-plugin's Shutdown ends the server;
    StopProvider is the servicer's (its waits end and the applies answer)."""

    def __init__(self):
        self.stopped = False
        self.server = None

    def intercept_service(self, continuation, handler_call_details):
        result = continuation(handler_call_details)
        if handler_call_details.method == "/plugin.GRPCController/Shutdown":
            self.stopped = True
            if self.server:
                self.server.stop(grace=0)
        return result


if __name__ == "__main__":
    main()
