"""GPU backends: `nvml` (nvidia-ml-py, real hardware) and `fake` (documented HGX hosts, for CI)."""
from .base import BackendError, GpuBackend


def get_backend(name: str, **kwargs) -> GpuBackend:
    if name == "fake":
        from .fake import FakeBackend

        return FakeBackend(**kwargs)
    if name == "nvml":
        from .nvml import NvmlBackend

        return NvmlBackend(**kwargs)
    raise ValueError(f"unknown backend {name!r} (nvml | fake)")


__all__ = ["BackendError", "GpuBackend", "get_backend"]
