"""Celery beat: expired `Idempotency-Key` answers are deleted every `IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS`
(3600 s by default)."""
from django.conf import settings

BEAT_SCHEDULE = {
    "core-idempotency-keys-purge": {"task": "core.idempotency_keys_purge_task",
                                    "schedule": float(settings.IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS),
                                    "options": {"queue": "default"}},
}
