"""Tenant-scoped reads of operations."""
from django.db.models import QuerySet

from .models import Operation


def operation_list_visible_to(user) -> QuerySet[Operation]:
    """Staff see every operation; a tenant sees those of projects it can see (others do not exist: 404)."""
    if getattr(user, "staff_role", ""):
        return Operation.objects.all()
    from apps.tenancy.selectors import project_list_visible_to

    return Operation.objects.filter(project__in=project_list_visible_to(user).values("id"))
