"""Per-request context kept in structlog's contextvars, so logs, problem bodies and audit events share it.

Bound per request by `RequestIdMiddleware` (`request_id`, `source_ip`, cleared at the end of the request) and by
`BearerTokenAuthentication` (`token_prefix` and `token_user_id`: the API token in use and its user's id).
"""
import structlog


def get_request_id() -> str:
    return structlog.contextvars.get_contextvars().get("request_id", "")


def get_source_ip() -> str:
    return structlog.contextvars.get_contextvars().get("source_ip", "")


def bind_api_token(*, prefix: str, user_id) -> None:
    """Record that this request is authenticated by the API token `prefix` of user `user_id`."""
    structlog.contextvars.bind_contextvars(token_prefix=prefix, token_user_id=str(user_id))


def get_token_prefix(user_id=None) -> str:
    """The prefix of the API token authenticating this request ('' for a session, a task or no request).

    With `user_id`, only when the token belongs to that user (a system write during a request is not the token's).
    """
    ctx = structlog.contextvars.get_contextvars()
    prefix = ctx.get("token_prefix", "")
    if not prefix or (user_id is not None and ctx.get("token_user_id") != str(user_id)):
        return ""
    return prefix
