"""Tenant-scoped reads of compute objects. Every API queryset starts here (tenant scope: CONTRIBUTING.md)."""
from __future__ import annotations

from django.db.models import Q, QuerySet, Sum

from apps.tenancy.selectors import is_staff, organization_ids_visible_to, project_list_visible_to

from .models import Cluster, Flavor, Image, Instance, SshKey
from .states import GpuForm, InstanceStatus, Visibility


def _authenticated(user) -> bool:
    return user is not None and getattr(user, "is_authenticated", False)


def flavor_list_visible_to(user) -> QuerySet[Flavor]:
    """Active flavors that are public or offered to one of the user's organizations (staff: all)."""
    qs = Flavor.objects.all()
    if not _authenticated(user):
        return qs.none()
    if is_staff(user):
        return qs
    return qs.filter(Q(visibility=Visibility.PUBLIC) | Q(organizations__in=organization_ids_visible_to(user)),
                     is_active=True).distinct()


def flavor_offered_to_project(flavor: Flavor, project) -> bool:
    """True when `flavor` is active and public or offered to the project's organization."""
    if not flavor.is_active:
        return False
    return flavor.visibility == Visibility.PUBLIC or flavor.organizations.filter(pk=project.organization_id).exists()


def image_list_visible_to(user) -> QuerySet[Image]:
    """Active images (staff: all). Images are provider-wide."""
    if not _authenticated(user):
        return Image.objects.none()
    return Image.objects.all() if is_staff(user) else Image.objects.filter(is_active=True)


def ssh_key_list_visible_to(user) -> QuerySet[SshKey]:
    return SshKey.objects.filter(project__in=project_list_visible_to(user)).select_related("project")


def instance_list_visible_to(user) -> QuerySet[Instance]:
    return (Instance.objects.filter(project__in=project_list_visible_to(user))
            .select_related("project", "flavor", "image").prefetch_related("ssh_keys"))


def cluster_list_visible_to(user) -> QuerySet[Cluster]:
    return Cluster.objects.filter(project__in=project_list_visible_to(user)).select_related("flavor", "image")


def _live(*, organization=None, project=None) -> QuerySet[Instance]:
    qs = Instance.objects.exclude(status=InstanceStatus.DELETED)
    return qs.filter(project=project) if project is not None else qs.filter(project__organization=organization)


def quota_usage(resource: str, *, organization=None, project=None, qualifier=None) -> int:
    """Usage counter for `apps.tenancy.quotas`: `instances` (live instances), `vcpus` and `memory_mib`
    (the sum over live instances' flavors). Deleted instances hold nothing, and neither does an instance whose
    create failed (`error` without ever having run: refused for quota or capacity, its claim released): it keeps
    its row, and so counts as an instance, until deleted, but holds no vCPUs or memory."""
    qs = _live(organization=organization, project=project)
    if resource == "instances":
        return qs.count()
    qs = qs.exclude(status=InstanceStatus.ERROR, launched_at__isnull=True)
    field = {"vcpus": "flavor__vcpus", "memory_mib": "flavor__memory_mib"}[resource]
    return int(qs.aggregate(s=Sum(field))["s"] or 0)


def gpu_quota_pending(resource: str, *, organization=None, project=None, qualifier=None) -> int:
    """GPU quota held by instances not placed yet: live `pending` / `provisioning` instances without a host
    that hold GPU quota (`holds_gpu_quota`; not inside a lease). ``gpus`` sums the flavors' `gpu_count`
    (qualifier = GPU model), ``mig_slices`` counts MIG instances (qualifier = profile), ``vgpus`` counts vGPU
    instances (qualifier = vGPU type). Placement claims the ledger rows and sets the host in one transaction,
    so an instance moves from this count to the ledger's without a gap or an overlap."""
    qs = _live(organization=organization, project=project).filter(
        host__isnull=True, holds_gpu_quota=True, status__in=(InstanceStatus.PENDING, InstanceStatus.PROVISIONING))
    form, field = {"gpus": (GpuForm.GPU, "flavor__gpu_model"), "mig_slices": (GpuForm.MIG, "flavor__mig_profile"),
                   "vgpus": (GpuForm.VGPU, "flavor__vgpu_type")}[resource]
    qs = qs.filter(flavor__gpu_form=form, **({field: qualifier} if qualifier else {}))
    if resource == "gpus":
        return int(qs.aggregate(s=Sum("flavor__gpu_count"))["s"] or 0)
    return qs.count()


def gpu_quota_usage(resource: str, *, organization=None, project=None, qualifier=None) -> int:
    """Usage counter for the GPU quotas (`apps.tenancy.quotas`): what the allocation ledger holds
    (`apps.scheduling.selectors.quota_usage`: leases, placed instances, spot) plus what unplaced instances hold
    (`gpu_quota_pending`). So the create request's own transaction checks and holds the GPUs, as it does the
    instance count, and 30 parallel creates against a quota of 8 accept 8."""
    from apps.scheduling.selectors import quota_usage as ledger_usage

    return ledger_usage(resource, organization=organization, project=project, qualifier=qualifier) + \
        gpu_quota_pending(resource, organization=organization, project=project, qualifier=qualifier)


def image_file_path(image: Image) -> str:
    """The image's file on the hypervisors (``<COMPUTE_IMAGE_DIR>/<name>.<disk_format>``, the file an instance's
    disk is a copy-on-write child of); '' when no image directory is configured."""
    from .conf import image_dir

    return f"{image_dir()}/{image.name}.{image.disk_format}" if image_dir() else ""


def instance_for_update(instance_id) -> Instance:
    """One instance with its host, locked (`SELECT ... FOR UPDATE`) until the caller's transaction ends: another
    app's write that depends on the instance's status and host (a volume attach) holds it still meanwhile."""
    return Instance.objects.select_for_update(of=("self",)).select_related("host").get(pk=instance_id)


#: Providers of other apps (apps.health): ``fn(instance_ids) -> {instance id: dict}``, the planned maintenance of
#: each instance (a move off a failed GPU or host: remediation id, status, deadline, reason), shown in the
#: instance's API object as `maintenance` so tooling in the guest that holds a token can poll it.
_MAINTENANCE_PROVIDERS: list = []


def register_maintenance_provider(fn) -> None:
    if fn not in _MAINTENANCE_PROVIDERS:
        _MAINTENANCE_PROVIDERS.append(fn)


def maintenance_by_instance(instance_ids) -> dict:
    """``{instance id: maintenance dict}`` for the instances that have one (see `register_maintenance_provider`);
    one query per provider for the whole page."""
    ids = list(instance_ids)
    out: dict = {}
    for fn in _MAINTENANCE_PROVIDERS:
        out.update(fn(ids))
    return out
