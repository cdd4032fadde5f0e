"""Structured JSON logs through structlog; stdlib records are rendered by the same JSON formatter.

Where they go: standard error, or with `LOG_FILE` set the file of that name (one JSON object a line, appended;
reopened when it is rotated away). `make run` sets `LOG_FILE=var/log/app.log` for the web server, so the
application's log (with each line's `request_id`, the one a problem body quotes) is there, not on the terminal.
Every line logged during a request carries its `request_id`; so does Django's own `django.request` line for a
4xx/5xx (`RequestIdFilter`), which is written after the request's context is cleared.
"""
import logging

import structlog


class RequestIdFilter(logging.Filter):
    """Gives a record that carries the request (`django.request`'s) that request's id when it has none."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        if not getattr(record, "request_id", "") and getattr(request, "request_id", ""):
            record.request_id = request.request_id
        return True


def log_handlers(log_file: str = "") -> dict:
    """The `handlers` of Django's LOGGING: one named "main", to `log_file` when given, else to standard error."""
    common = {"formatter": "json", "filters": ["request_id"]}
    if log_file:
        return {"main": {"class": "logging.handlers.WatchedFileHandler", "filename": log_file, **common}}
    return {"main": {"class": "logging.StreamHandler", **common}}


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
