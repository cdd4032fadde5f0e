"""`Operation`: the durable record of every long-running action (the row is the truth; queues are hints)."""
from django.conf import settings
from django.db import models

from apps.core.models import TimestampedModel


class OperationStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL = {OperationStatus.SUCCEEDED, OperationStatus.FAILED, OperationStatus.CANCELLED}


class Operation(TimestampedModel):
    """One long action on one target, run as a list of idempotent steps (see `apps.operations.runner`).

    `step` is the name of the next step to run; `steps_done` lists the committed ones in order.
    `state` is the workflow's scratch space (JSON), written in the same transaction as the step.
    `project` is null for staff operations on the fleet.
    """

    kind = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.UUIDField()
    project = models.ForeignKey("tenancy.Project", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="+")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    status = models.CharField(max_length=16, choices=OperationStatus.choices, default=OperationStatus.PENDING)
    step = models.CharField(max_length=64, blank=True)
    steps_done = models.JSONField(default=list, blank=True)
    state = models.JSONField(default=dict, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True)
    error_code = models.CharField(max_length=64, blank=True)
    error_detail = models.TextField(blank=True)
    #: The extension members of the error a step failed with (e.g. ``earliest_start`` and ``constraint`` of a
    #: `capacity_unavailable`), as the same error would carry them in an API problem body.
    error_extra = models.JSONField(default=dict, blank=True)
    request_id = models.CharField(max_length=128, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status", "updated_at"]), models.Index(fields=["target_type", "target_id"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.target_type}:{self.target_id} [{self.status}/{self.step}]"
