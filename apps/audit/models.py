"""Append-only audit events with a tamper-evident hash chain (ADR 0111).

PostgreSQL triggers (migrations 0003, 0004) reject UPDATE, DELETE and TRUNCATE of both tables; a deferred
trigger links every event into the chain when its transaction commits."""
from django.conf import settings
from django.db import models

from apps.core.clock import now
from apps.core.models import UUIDModel


class AuditEvent(UUIDModel):
    """Who did what to which object, when, from where. Written by services in the same transaction.

    `organization`/`project` scope the event for tenant listing (null for fleet-wide staff actions).
    `before`/`after` hold the changed fields (never secrets).
    """

    created_at = models.DateTimeField(default=now, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_email = models.CharField(max_length=254, blank=True)
    actor_is_staff = models.BooleanField(default=False)
    token_prefix = models.CharField(max_length=32, blank=True)
    organization = models.ForeignKey("tenancy.Organization", null=True, blank=True, on_delete=models.DO_NOTHING,
                                     related_name="+", db_constraint=False)
    project = models.ForeignKey("tenancy.Project", null=True, blank=True, on_delete=models.DO_NOTHING,
                                related_name="+", db_constraint=False)
    action = models.CharField(max_length=100, db_index=True)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    source_ip = models.GenericIPAddressField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["organization", "created_at"]), models.Index(fields=["target_type", "target_id"])]
        ordering = ["-created_at"]


class AuditChainLink(models.Model):
    """The event's place in the hash chain: `seq` counts events in commit order from 1 without gaps, `prev_hash`
    is the previous link's `hash` (64 zeros for the first) and `hash` = SHA-256 hex of `prev_hash` followed by
    the event's canonical text (SQL function `audit_event_canonical`, ADR 0111).

    Written only by the deferred triggers `audit_event_chain` when the event's transaction commits, under a
    transaction-level advisory lock taken after every other deferred check of that transaction (migration
    0005), so links follow commit order; never by Python code."""

    event = models.OneToOneField(AuditEvent, primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False,
                                 related_name="chain")
    seq = models.BigIntegerField(unique=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
