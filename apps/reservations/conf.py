"""Reservation settings (all optional; defaults in brackets)::

    RESERVATIONS_SPOT_GRACE_S      [120]  spot instances are told this long before a lease needs their GPUs
    RESERVATIONS_QUEUE_POLL_S      [15]   how often a queued instance's create operation re-checks its request
    RESERVATIONS_QUEUE_MAX_TIMEOUT_S [604800] longest queue timeout a user may choose (7 days)
    RESERVATIONS_WEBHOOK_MAX_ATTEMPTS [8]  deliveries tried before a notification is marked failed
    RESERVATIONS_WEBHOOK_CONNECT_TIMEOUT_S [3] TCP connect timeout of one webhook POST
    RESERVATIONS_WEBHOOK_TIMEOUT_S [5]    read timeout of one webhook POST (wait for the receiver's answer)
    RESERVATIONS_MAX_LEASE_DAYS    [1096] longest lease window (3 years); longer is 400 `lease_too_long`
"""
from django.conf import settings


def _get(name: str, default):
    return getattr(settings, name, default)


def spot_grace_s() -> int:
    return int(_get("RESERVATIONS_SPOT_GRACE_S", 120))


def queue_poll_s() -> float:
    return float(_get("RESERVATIONS_QUEUE_POLL_S", 15))


def queue_max_timeout_s() -> int:
    return int(_get("RESERVATIONS_QUEUE_MAX_TIMEOUT_S", 7 * 86400))


def webhook_max_attempts() -> int:
    return int(_get("RESERVATIONS_WEBHOOK_MAX_ATTEMPTS", 8))


def webhook_timeout_s() -> float:
    return float(_get("RESERVATIONS_WEBHOOK_TIMEOUT_S", 5))


def webhook_connect_timeout_s() -> float:
    return float(_get("RESERVATIONS_WEBHOOK_CONNECT_TIMEOUT_S", 3))


def max_lease_days() -> int:
    return int(_get("RESERVATIONS_MAX_LEASE_DAYS", 1096))
