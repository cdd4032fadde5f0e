"""Abstract bases every domain model builds on."""
from django.db import models

from .clock import now
from .ids import uuid7


class UUIDModel(models.Model):
    """Primary key is a UUIDv7 (time ordered)."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)

    class Meta:
        abstract = True


class TimestampedModel(UUIDModel):
    """UUIDv7 id plus `created_at` / `updated_at` (UTC, set from `apps.core.clock.now`)."""

    created_at = models.DateTimeField(default=now, editable=False, db_index=True)
    updated_at = models.DateTimeField(default=now)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        self.updated_at = now()
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "updated_at" not in update_fields:
            kwargs["update_fields"] = [*update_fields, "updated_at"]
        super().save(*args, **kwargs)


class ProjectOwned(TimestampedModel):
    """A tenant-owned row: `project` is never null. Query it only through a `*_visible_to` selector."""

    project = models.ForeignKey("tenancy.Project", on_delete=models.PROTECT, related_name="+")

    class Meta:
        abstract = True


class IdempotencyKey(models.Model):
    """The saved answer to a create sent with an `Idempotency-Key` header (see `apps.core.idempotency`).

    Unique per (`caller`, `endpoint`, `key`): `caller` is the credential (`token:<id>` for an API
    token, the user's id for a console session), `endpoint` the method and
    path (`POST /api/v1/instances`). Written in the same transaction as what the request created, so the row
    exists exactly when the create committed. Kept `IDEMPOTENCY_KEY_TTL_HOURS` (24 h); after that the key is new.
    """

    caller = models.CharField(max_length=64)
    endpoint = models.CharField(max_length=300)
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField(null=True, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["caller", "endpoint", "key"], name="core_idempotency_unique")]


class BeatLastRun(models.Model):
    """When the beat that held the lock last sent a periodic task: one row per beat schedule entry (`name`).

    Written by the leading beat each time it sends an entry (`gpucloud.beat.SingletonScheduler.reserve`); a standby
    that takes the lock over starts every entry from these times instead of its own, so a task is not sent again
    within its period because the beat holding the lock died (ADR 1100).
    """

    name = models.CharField(max_length=200, primary_key=True)
    last_run_at = models.DateTimeField()

    class Meta:
        db_table = "core_beat_last_run"
