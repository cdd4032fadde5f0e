"""Entry point `terraform-provider-gpucloud` (what Terraform executes): `tf`'s runner with our servicer."""
from __future__ import annotations


def main() -> None:
    import tf.provider
    from tf.runner import run_provider

    from .framework import Servicer
    from .provider import GpuCloudProvider

    tf.provider.ProviderServicer = Servicer   # the runner builds `tf.provider.ProviderServicer(provider)`
    run_provider(GpuCloudProvider())


if __name__ == "__main__":
    main()
