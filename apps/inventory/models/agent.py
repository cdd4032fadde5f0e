"""Node-agent enrollment and the command queue (control plane side).

Secrets are stored as SHA-256 hex digests; the clear secret is returned once, when issued.
"""
from django.conf import settings
from django.db import models

from apps.core.models import TimestampedModel

from ..states import CommandKind, CommandStatus


class EnrollmentToken(TimestampedModel):
    """A one-time token that lets the agent on `host` enroll. Valid until `expires_at`; spent at `used_at`."""

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="enrollment_tokens")
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    class Meta:
        ordering = ["-created_at"]


class AgentCredential(TimestampedModel):
    """The long-lived credential an enrolled agent presents (`Authorization: Agent <prefix>.<secret>`)."""

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="agent_credentials")
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["host"], condition=models.Q(revoked_at__isnull=True),
                                               name="inventory_agentcred_one_active_per_host")]


class AgentCommand(TimestampedModel):
    """A command for the agent on `host`. The id is the idempotency key the agent executes at most once."""

    host = models.ForeignKey("inventory.Host", on_delete=models.CASCADE, related_name="agent_commands")
    gpu = models.ForeignKey("inventory.Gpu", on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    kind = models.CharField(max_length=32, choices=CommandKind.choices)
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=CommandStatus.choices, default=CommandStatus.QUEUED,
                              db_index=True)
    result = models.JSONField(default=dict, blank=True)
    error = models.CharField(max_length=500, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    class Meta:
        ordering = ["created_at"]
