"""Structured JSON logs through structlog; stdlib records are rendered by the same JSON formatter."""
import logging

import structlog


def configure_logging(django_logging: dict) -> dict:
    """Configure structlog for JSON output and return Django's LOGGING dict (with processors resolved)."""
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info,
                    structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = django_logging["formatters"]["json"]
    formatter["processors"] = [
        _add_record_extras,
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.format_exc_info,
        structlog.processors.JSONRenderer(default=str),
    ]
    formatter.pop("processor", None)
    formatter["foreign_pre_chain"] = shared
    return django_logging


_STD_ATTRS = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


def _add_record_extras(logger, method_name, event_dict):
    record = event_dict.get("_record")
    if record is not None:
        for key, value in record.__dict__.items():
            if key not in _STD_ATTRS and not key.startswith("_") and key not in event_dict:
                event_dict[key] = value
    return event_dict
