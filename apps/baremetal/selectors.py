"""Bare-metal reads: nodes (staff) and exit receipts (tenant-scoped, as every tenant-owned read)."""
from __future__ import annotations

from django.db.models import QuerySet

from apps.tenancy.selectors import is_staff, project_list_visible_to

from .models import BaremetalNode, ExitReceipt


def node_list_visible_to(actor) -> QuerySet[BaremetalNode]:
    """Every node for staff; none for anyone else (tenants never see hosts)."""
    if not is_staff(actor):
        return BaremetalNode.objects.none()
    return BaremetalNode.objects.select_related("host")


def receipt_list_visible_to(actor) -> QuerySet[ExitReceipt]:
    """The exit receipts of the projects `actor` may read (another tenant's receipt is a 404)."""
    return ExitReceipt.objects.filter(project__in=project_list_visible_to(actor))
