"""Reads of the allocation ledger: quota usage, a consumer's allocations, host usage.

Quota usage is counted from the ledger (never from instance rows): only top-level allocations count, so an
instance launched inside a lease does not count twice (the lease already holds the GPU).
"""
from __future__ import annotations

import datetime as dt
import uuid

from django.db.models import Q, QuerySet, Sum

from apps.core import clock

from .models import GPU_SLICES, Allocation, ResourceClass


def _current(at: dt.datetime | None) -> Q:
    return Q(period__contains=at or clock.now())


def gpu_usage_for_project(project, model: str | None = None, *, at: dt.datetime | None = None) -> int:
    """Whole GPUs the project holds at `at` (default now): top-level ``gpu`` allocations (leases, on-demand,
    spot), optionally only GPUs of catalog `model`."""
    qs = Allocation.objects.filter(_current(at), project=project, resource_class=ResourceClass.GPU,
                                   parent__isnull=True)
    if model:
        qs = qs.filter(gpu__model=model)
    return qs.count()


def _scope(*, organization=None, project=None) -> Q:
    return Q(project=project) if project is not None else Q(project__organization=organization)


def quota_usage(resource: str, *, organization=None, project=None, qualifier: str | None = None,
                at: dt.datetime | None = None) -> int:
    """Usage counter for `apps.tenancy.quotas`: ``gpus`` (whole GPUs, qualifier = catalog model),
    ``mig_slices`` (MIG GPU instances, qualifier = profile name), ``vgpus`` (vGPUs, qualifier = vGPU type).
    Counts top-level allocations live at `at` (default now) of the project, or of every project of the
    organization when `project` is None."""
    rc = {"gpus": ResourceClass.GPU, "mig_slices": ResourceClass.MIG, "vgpus": ResourceClass.VGPU}[resource]
    qs = Allocation.objects.filter(_current(at), _scope(organization=organization, project=project),
                                   resource_class=rc, parent__isnull=True)
    if qualifier:
        qs = qs.filter(gpu__model=qualifier) if rc == ResourceClass.GPU else qs.filter(profile=qualifier)
    if rc == ResourceClass.VGPU:
        return int(qs.aggregate(s=Sum("amount"))["s"] or 0)
    return qs.count()


def gpu_slice_usage_for_project(project, model: str | None = None, *, at: dt.datetime | None = None) -> float:
    """GPU equivalents held at `at`: whole GPUs + MIG slices / 8 + shares / 1000 (top-level rows)."""
    qs = Allocation.objects.filter(_current(at), project=project, parent__isnull=True)
    if model:
        qs = qs.filter(gpu__model=model)
    whole = qs.filter(resource_class=ResourceClass.GPU).count()
    mig = sum(a.slices.upper - a.slices.lower for a in qs.filter(resource_class=ResourceClass.MIG).only("slices"))
    share = qs.filter(resource_class=ResourceClass.SHARE).aggregate(s=Sum("amount"))["s"] or 0
    return whole + mig / GPU_SLICES + share / 1000


def vcpu_usage_for_project(project, *, at: dt.datetime | None = None) -> int:
    qs = Allocation.objects.filter(_current(at), project=project, parent__isnull=True,
                                   resource_class=ResourceClass.VCPU)
    return int(qs.aggregate(s=Sum("amount"))["s"] or 0)


def allocation_list_for_consumer(consumer_id: uuid.UUID, *, live_only: bool = True) -> QuerySet[Allocation]:
    """The consumer's allocations (live ones: end open or in the future), ordered by host then GPU."""
    qs = Allocation.objects.filter(consumer_id=consumer_id).select_related("gpu")
    if live_only:
        now = clock.now()
        qs = qs.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now))
    return qs.order_by("host_id", "gpu__index", "resource_class")


def allocation_list_live(*, host_id: uuid.UUID | None = None) -> QuerySet[Allocation]:
    """Staff read: live allocations (end open or in the future), optionally of one host."""
    now = clock.now()
    qs = Allocation.objects.filter(Q(period__upper_inf=True) | Q(period__endswith__gt=now))
    if host_id:
        qs = qs.filter(host_id=host_id)
    return qs


def allocation_list_at(*, host_id: uuid.UUID, gpu_id: uuid.UUID | None = None,
                       at: dt.datetime) -> QuerySet[Allocation]:
    """Staff read: allocations on the host (or one of its GPUs) whose period contains `at` (fault impact)."""
    qs = Allocation.objects.filter(host_id=host_id, period__contains=at)
    return qs.filter(gpu_id=gpu_id) if gpu_id is not None else qs
