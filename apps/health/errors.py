"""Health error codes (stable, in problem+json `code`)."""

from enum import StrEnum


class Code(StrEnum):
    GPU_UNKNOWN = "health_gpu_unknown"
    HCA_PORT_UNKNOWN = "health_hca_port_unknown"
    HOST_UNKNOWN = "health_host_unknown"
    INVALID_EVENT = "health_invalid_event"
