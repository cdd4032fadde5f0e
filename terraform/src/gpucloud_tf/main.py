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
    exit_with_parent()
    run_provider(GpuCloudProvider())


def exit_with_parent(interval: float = 1.0, grace: float = 5.0) -> None:
    """End the plugin when Terraform (its parent) is gone, e.g. SIGKILLed alone: nothing would ever call go-plugin's
    Shutdown, and the process would stay behind, orphaned. Every `interval` s a daemon thread compares the parent
    pid with the one at start (an orphan is re-parented); then waits end (as on StopProvider), the gRPC server
    stops so the runner returns and removes its socket directory, and after `grace` s the process exits anyway."""
    import os
    import threading
    import time

    from .framework import STOP

    parent = os.getppid()
    if parent <= 1:   # started by init itself: nothing to watch
        return

    def watch():
        while os.getppid() == parent:
            time.sleep(interval)
        STOP.set()
        for s in _Shutdown.instances:
            s.stopped = True
            if s.server:
                s.server.stop(grace=0)
        time.sleep(grace)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


class _Shutdown:
    """`tf`'s shutdown interceptor stops the gRPC server on StopProvider, killing the applies in flight (Terraform
    then reports "Plugin did not respond" and records nothing). Here only go-plugin's Shutdown ends the server;
    StopProvider is the servicer's (its waits end and the applies answer)."""

    instances: list = []

    def __init__(self):
        self.stopped = False
        self.server = None
        _Shutdown.instances.append(self)

    def intercept_service(self, continuation, handler_call_details):
        result = continuation(handler_call_details)
        if handler_call_details.method == "/plugin.GRPCController/Shutdown":
            self.stopped = True
            if self.server:
                self.server.stop(grace=0)
        return result


if __name__ == "__main__":
    main()
