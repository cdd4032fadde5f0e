"""Bare-metal error codes (stable, snake_case)."""
import enum


class Code(enum.StrEnum):
    HOST_NOT_BAREMETAL = "host_not_baremetal"
    NODE_EXISTS = "node_exists"
    NODE_NOT_AVAILABLE = "baremetal_node_not_available"
    INSPECTION_MISMATCH = "inspection_mismatch"
    CLEAN_FAILED = "baremetal_clean_failed"
