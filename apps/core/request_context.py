"""Per-request context (request id) kept in structlog's contextvars, so logs and problem bodies share it."""
import structlog


def get_request_id() -> str:
    return structlog.contextvars.get_contextvars().get("request_id", "")


def get_source_ip() -> str:
    return structlog.contextvars.get_contextvars().get("source_ip", "")
