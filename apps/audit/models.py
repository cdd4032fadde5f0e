"""Append-only audit events. A PostgreSQL trigger (migration 0002) rejects UPDATE and DELETE."""
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
