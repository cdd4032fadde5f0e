"""Reads of operations: tenant-scoped lists, and the lookups other apps make about their own targets."""
from django.db.models import QuerySet

from .models import TERMINAL, Operation


def operation_list_visible_to(user) -> QuerySet[Operation]:
    """Staff see every operation; a tenant sees those of projects it can see (others do not exist: 404)."""
    if getattr(user, "staff_role", ""):
        return Operation.objects.all()
    from apps.tenancy.selectors import project_list_visible_to

    return Operation.objects.filter(project__in=project_list_visible_to(user).values("id"))


def operation_latest_for(*, target_type: str, target_id, kind: str | None = None) -> Operation | None:
    """The newest operation of one target (of one `kind` when given), or None."""
    qs = Operation.objects.filter(target_type=target_type, target_id=target_id)
    if kind is not None:
        qs = qs.filter(kind=kind)
    return qs.order_by("-created_at").first()


def targets_with_unfinished_operations(*, target_type: str, target_ids) -> set:
    """The ids among `target_ids` that have an operation not yet finished (a step may still change them)."""
    return set(Operation.objects.filter(target_type=target_type, target_id__in=target_ids)
               .exclude(status__in=TERMINAL).values_list("target_id", flat=True))
