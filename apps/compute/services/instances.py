"""Instance writes: create, stop, start, reboot, delete. Each validates, applies a transition and starts an
Operation (the workflows in `apps.compute.workflows` do the work); every write is audited in its transaction.

Errors: 400 `validation_error` "Not found." naming `flavor` (also a flavor not offered to the project), `image`
or `ssh_keys` (also another project's key; ADR 0010); 400 `validation_error` (name), `user_data_too_large`;
422 `quota_exceeded`; 409 `invalid_state` (with `allowed_states`), `name_taken`.
"""
from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence

from celery.exceptions import TimeoutError as CeleryTimeoutError
from django.db import transaction
from redis.exceptions import RedisError

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.drivers import DriverError, DriverNotFound
from apps.core.errors import Conflict, NotFound, ServiceUnavailable, ValidationFailed
from apps.core.references import reference_not_found
from apps.core.tasks import BROKER_UNAVAILABLE
from apps.core.transitions import transition
from apps.operations.models import Operation
from apps.operations.runner import operation_deadline_set, operation_start, operations_cancel_unfinished
from apps.operations.selectors import operation_latest_for
from apps.tenancy.authz import authorize_project
from apps.tenancy.models import ProjectRole
from apps.tenancy.quotas import quota_check, quota_check_all

from .. import conf
from ..drivers.base import USER_DATA_MAX_BYTES
from ..errors import Code
from ..models import Flavor, Image, Instance, InstanceFlavorChange, SshKey
from ..selectors import flavor_offered_to_project
from ..states import INSTANCE_TRANSITIONS, GpuForm, InstanceStatus, ProvisioningKind
from ._common import validate_name
from .devices import devices_numa_shortfall
from .networks import network_request_resolve
from .placement import instance_queue, placement_admit_for
from .volumes import instance_volumes_check, instance_volumes_reserve

WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
TARGET = "compute.instance"
CREATE, STOP, START, REBOOT, DELETE, RESIZE = ("instance.create", "instance.stop", "instance.start",
                                               "instance.reboot", "instance.delete", "instance.resize")
REBUILD = "instance.rebuild"
RECREATE = "instance.recreate"

#: flavor kind -> {compute operation kind -> the operation kind that runs it for that kind}. Another app registers
#: its own workflows here (`apps.baremetal` for kind `baremetal`: deploy through Ironic instead of libvirt); a
#: kind missing from the map is not supported for that flavor kind (409 `not_supported_for_flavor_kind`).
_PROVISIONERS: dict[str, dict[str, str]] = {}
_VM_KINDS = (CREATE, STOP, START, REBOOT, DELETE, RESIZE, RECREATE)


_READY: dict[str, Callable[[], None]] = {}
_RELEASED: dict[str, Callable[..., None]] = {}


def register_provisioner(flavor_kind: str, kinds: dict[str, str], ready: Callable[[], None] | None = None,
                         capacity_released: Callable[..., None] | None = None) -> None:
    """`kinds`: compute kind → the operation kind that runs it for `flavor_kind`'s instances. `ready()`, when
    given, raises a `DomainError` (e.g. 503) while that provisioner cannot take a new instance.
    `capacity_released(instance, *, reason)`, when given, replaces the VM's GPU hold/scrub when someone else
    released the instance's capacity (its lease ended) while the instance stays (`devices_capacity_released`);
    it runs in that transaction."""
    _PROVISIONERS[flavor_kind] = dict(kinds)
    if ready is not None:
        _READY[flavor_kind] = ready
    if capacity_released is not None:
        _RELEASED[flavor_kind] = capacity_released


def provisioner_capacity_released(instance: Instance, *, reason: str) -> bool:
    """Run the flavor kind's `capacity_released` hook (see `register_provisioner`); False when it has none."""
    fn = _RELEASED.get(instance.flavor.kind)
    if fn is None:
        return False
    fn(instance, reason=reason)
    return True


def provisioner_ready(flavor: Flavor) -> None:
    """Raise what the flavor kind's provisioner says when it cannot take a new instance now (nothing for VMs)."""
    check = _READY.get(flavor.kind)
    if check is not None:
        check()


def operation_kind(flavor: Flavor, kind: str) -> str:
    """The operation kind that runs `kind` (a compute kind such as ``instance.create``) for `flavor`'s kind."""
    if flavor.kind == ProvisioningKind.VM:
        if kind not in _VM_KINDS:
            raise Conflict("This action is not supported for virtual machines.", code=Code.NOT_SUPPORTED_FOR_KIND)
        return kind
    mapped = _PROVISIONERS.get(flavor.kind, {}).get(kind)
    if mapped is None:
        raise Conflict(f"This action is not supported for {flavor.kind} instances.",
                       code=Code.NOT_SUPPORTED_FOR_KIND)
    return mapped
GPU_FIELDS = ("gpu_form", "gpu_model", "gpu_count", "mig_profile", "vgpu_type", "share_milli")


def gpu_quota_keys(flavor: Flavor) -> list[tuple[str, int]]:
    """The tenancy quota resources a flavor's GPU spec consumes: (key, amount)."""
    if flavor.gpu_form == GpuForm.GPU:
        return [(f"gpus:{flavor.gpu_model}" if flavor.gpu_model else "gpus", flavor.gpu_count)]
    if flavor.gpu_form == GpuForm.MIG:
        return [(f"mig_slices:{flavor.mig_profile}", 1)]
    if flavor.gpu_form == GpuForm.VGPU:
        return [(f"vgpus:{flavor.vgpu_type}", 1)]
    return []


def quota_keys(flavor: Flavor, count: int = 1) -> list[tuple[str, int]]:
    return [("instances", count), ("vcpus", flavor.vcpus * count), ("memory_mib", flavor.memory_mib * count)] + [
        (k, n * count) for k, n in gpu_quota_keys(flavor)]


def _resolve(project, flavor_id, image_id, ssh_key_ids: Sequence, *,
             image_optional: bool = False) -> tuple[Flavor, Image | None, list[SshKey]]:
    """The create's references (instances and clusters): 400 "Not found." naming `flavor`, `image` or `ssh_keys`;
    400 `share_not_supported_for_vm` for a fractional-GPU (`share`) flavor, which no VM can be given
    (docs/compute.md, GPU forms): refused here, before quota and placement, not as a placement failure.
    `image_optional` (a check without an image): a None `image_id` gives a None image."""
    flavor = Flavor.objects.filter(pk=flavor_id).first() if _is_uuid(flavor_id) else None
    if flavor is None or not flavor_offered_to_project(flavor, project):
        raise reference_not_found("flavor")
    if flavor.gpu_form == GpuForm.SHARE:
        raise ValidationFailed("Fractional GPU (share) flavors are not offered to VMs.",
                               code=Code.SHARE_NOT_SUPPORTED_FOR_VM,
                               errors={"flavor": ["a share flavor cannot back a VM"]})
    image = Image.objects.filter(pk=image_id, is_active=True).first() if _is_uuid(image_id) else None
    if image is None and not (image_optional and image_id is None):
        raise reference_not_found("image")
    ids = {str(k) for k in ssh_key_ids}
    keys = list(SshKey.objects.filter(project=project, pk__in=[k for k in ids if _is_uuid(k)]))
    if len(keys) != len(ids):
        raise reference_not_found("ssh_keys")
    return flavor, image, keys


def _is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
        return True
    except ValueError:
        return False


_NETWORK_FIELDS = {"subnet": "subnet_id", "security_groups": "security_group_ids", "ib_partition": "ib_partition_id"}


def _instance_prepare(*, actor, project, name: str, flavor_id, image_id, ssh_key_ids: Sequence, user_data: str,
                      subnet_id, security_group_ids: Sequence, ib_partition_id, partial: bool = False):
    """The create's checks of the request itself (authorization, name, user data, references, networks): raises
    what `instance_create` raises (403, 400). Returns (flavor, image, keys, network). Writes nothing.
    `partial` (a check of a flavor alone): an empty `name` and a None `image_id` are not checked."""
    authorize_project(actor, project, WRITERS)
    if name or not partial:
        validate_name(name)
    if len((user_data or "").encode()) > USER_DATA_MAX_BYTES:
        raise ValidationFailed(f"user_data is over {USER_DATA_MAX_BYTES} bytes.", code=Code.USER_DATA_TOO_LARGE,
                               errors={"user_data": [f"at most {USER_DATA_MAX_BYTES} bytes (UTF-8)"]})
    flavor, image, keys = _resolve(project, flavor_id, image_id, ssh_key_ids, image_optional=partial)
    network = network_request_resolve(project=project, subnet_id=subnet_id, security_group_ids=security_group_ids,
                                      ib_partition_id=ib_partition_id)
    unsupported = [k for k in network if k == "security_groups"] if flavor.kind == ProvisioningKind.BAREMETAL else []
    if unsupported:
        # a bare-metal host joins a partition with its HCA GUIDs and a subnet with its NIC through a localnet port
        # (ADR 1212); OVN's ACLs never see a physical server's traffic, so a security group would promise nothing
        raise ValidationFailed("Security groups do not apply to bare-metal instances.",
                               code=Code.BAREMETAL_NETWORK_UNSUPPORTED,
                               errors={_NETWORK_FIELDS[k]: ["not for a bare-metal flavor"] for k in unsupported})
    return flavor, image, keys, network


def instance_admit(*, project, flavor: Flavor, name: str, gpu_quota: bool = True, admit: bool = True,
                   cluster=None, queue: bool = False, pins: dict | None = None, network: dict | None = None,
                   placement_policy: str = ""):
    """The create's decisions that depend on the tenant's quota and the fleet, in the create's transaction and
    order: quotas (422 `quota_exceeded`), the name (409 `name_taken`), the placement rule (422 `unplaceable`, 409
    `capacity_unavailable`). Returns the `Admission` (None when `admit` is off or inside a cluster). Writes
    nothing; `instance_create` and `instance_check` both call it, so a check never disagrees with a create.
    `pins`: the host / zone the instance's volumes bind it to (`services.volumes.VolumePlan`); `network`: the
    networks it joins (`network_request_resolve`; an InfiniBand partition: only hosts that can give it a GUID
    there, else 422 `unplaceable` / 409 `capacity_unavailable` with reason ``ib_partition``)."""
    gpu_keys = {k for k, _ in gpu_quota_keys(flavor)} if not gpu_quota else set()
    quota_check_all(scope=project, requests=[(key, amount) for key, amount in quota_keys(flavor)
                                             if key not in gpu_keys], window=(now(), None))
    if Instance.objects.filter(project=project, name=name).exclude(status=InstanceStatus.DELETED).exists():
        raise Conflict(f"An instance named {name!r} exists in this project.", code=Code.NAME_TAKEN)
    return (placement_admit_for(flavor, project.pk, queue=queue, pins=pins, network=network,
                                policy=placement_policy)
            if admit and cluster is None
            else None)


def volume_pins(plan) -> dict:
    """The placement pins of a `VolumePlan` (``host_id``, ``zone``; only those it sets)."""
    return {k: v for k, v in (("host_id", plan.host_id), ("zone", plan.zone)) if v}


@atomic_with_retry
def instance_create(*, actor, project, name: str, flavor_id, image_id, ssh_key_ids: Sequence = (),
                    user_data: str = "", request_id: str = "", cluster=None, gpu_quota: bool = True,
                    subnet_id=None, security_group_ids: Sequence = (), ib_partition_id=None, queue: bool = False,
                    admit: bool = True, sla_tier: str | None = None,
                    volumes: Sequence[dict] = (), placement_policy: str = "") -> tuple[Instance, Operation]:
    """Create an instance (`pending`) and start its `instance.create` operation. Returns (instance, operation).
    A retried request is answered by the API's `Idempotency-Key` layer (`apps.core.idempotency`), not here.
    The GPU quotas are checked and held here, in the request's transaction (the unplaced instance counts,
    `selectors.gpu_quota_pending`), so no 202 is given for GPUs the quota cannot hold. `gpu_quota=False` skips
    the GPU quota keys (an instance inside a lease: the lease already holds the GPUs).
    `subnet_id`, `security_group_ids`, `ib_partition_id`: tenant networks to attach (`services.networks`;
    400 "Not found." naming `subnet_id`, `security_group_ids` or `ib_partition_id`, 400 `invalid_security_group`).

    Placement rule (`admit`, docs/adr/0404-placement-admission.md), checked before anything is written: 422
    `unplaceable` when no capacity of the fleet could ever hold the flavor; 409 `capacity_unavailable` with
    ``earliest_start`` when it cannot now, unless `queue`: then the instance joins the on-demand queue
    (`register_queue_hook`; without one its create waits at the placement step) and starts when capacity
    frees. `admit=False` for instances placed by other rules (inside a lease, spot). Everything it refuses is
    decided by `_instance_prepare` and `instance_admit`, which `launch.instance_check` runs without writing.
    `sla_tier`: the SLA tier code it is bought at (default: the cluster's, else the organization's default tier;
    `apps.billing.selectors.sla_tier_resolve`, 400 `unknown_sla_tier`); its usage is priced and credited at it.
    `placement_policy`: the tenant's hint, `pack` | `spread` ('' = the zone's or the default; a member: the
    cluster's), kept on the instance and given to the placement engine's weigher on every placement of it.

    `volumes`: the volumes to attach, new (``size_gib``, ``volume_type``, ``name``, ``delete_on_termination``,
    ``boot``) or existing (``id``, ``delete_on_termination``, ``boot``), checked by storage before anything is
    written (`services.volumes.instance_volumes_check`: 400, 409 `volume_in_use` / `invalid_state`, 422
    `quota_exceeded`) and reserved in this transaction; an existing host-local volume pins the placement to its
    host (`admit` then asks the rule for that host), a zoned one to its zone. The create's step
    `prepare_volumes` makes and attaches them; a failed create releases them (`create_failed`).
    A flavor whose provisioner cannot take an instance now answers what it raises (`provisioner_ready`: bare
    metal's 503 `baremetal_unavailable` while Ironic does not answer), nothing written."""
    from apps.billing.selectors import sla_tier_resolve


    flavor, image, keys, network = _instance_prepare(
        actor=actor, project=project, name=name, flavor_id=flavor_id, image_id=image_id, ssh_key_ids=ssh_key_ids,
        user_data=user_data, subnet_id=subnet_id, security_group_ids=security_group_ids,
        ib_partition_id=ib_partition_id)
    provisioner_ready(flavor)
    tier = sla_tier_resolve(organization=project.organization,
                            code=sla_tier or (cluster.sla_tier if cluster is not None else None))
    fields = {"network": network} if network else {}
    with transaction.atomic():
        plan = instance_volumes_check(actor=actor, project=project, image=image, flavor=flavor, requests=volumes,
                                      name=name)
        admission = instance_admit(project=project, flavor=flavor, name=name, gpu_quota=gpu_quota, admit=admit,
                                   cluster=cluster, queue=queue, pins=volume_pins(plan), network=network,
                                   placement_policy=placement_policy)
        with unique_conflict(f"An instance named {name!r} exists in this project.", code=Code.NAME_TAKEN):
            inst = Instance.objects.create(project=project, name=name, flavor=flavor, image=image,
                                           user_data=user_data, cluster=cluster, network=network,
                                           holds_gpu_quota=gpu_quota, sla_tier=tier,
                                           placement_policy=placement_policy or (
                                               cluster.placement_policy if cluster is not None else ""))
        inst.ssh_keys.set(keys)
        op = operation_start(kind=operation_kind(flavor, CREATE), target_type=TARGET, target_id=inst.pk,
                             project=project, actor=actor,
                             request_id=request_id, state={"queue": True} if queue else None)
        instance_volumes_reserve(actor=actor, instance=inst, plan=plan, operation=op)
        audit_record(actor=actor, action="compute.instance.create", target=inst, after={
            "name": name, "flavor": flavor.name, "image": image.name, "ssh_keys": [k.fingerprint for k in keys],
            "operation": str(op.pk), **fields, **({"queued": admission.reason} if admission and admission.queued
                                                 else {})})
        if admission is not None and admission.queued and not instance_queue(
                actor=actor, instance=inst, operation=op, reason=admission.reason):
            operation_deadline_set(operation=op, deadline_at=now() + dt.timedelta(seconds=conf.queue_timeout_s()))
    return inst, op


def _act(actor, instance: Instance, action: str, kind: str, state: dict | None = None,
         guard: Callable[[Instance], None] | None = None) -> Operation:
    authorize_project(actor, instance.project, WRITERS)
    with transaction.atomic():
        if guard is not None:
            guard(instance)
        before = transition(instance, action, INSTANCE_TRANSITIONS)
        op = operation_start(kind=operation_kind(instance.flavor, kind), target_type=TARGET,
                             target_id=instance.pk, project=instance.project, actor=actor, state=state or {})
        audit_record(actor=actor, action=f"compute.instance.{action}", target=instance,
                     before={"status": before},
                     after={"status": instance.status, "operation": str(op.pk), **(state or {})})
    return op


def instance_stop(*, actor, instance: Instance, hard: bool = False) -> Operation:
    """active → stopping; the guest gets an ACPI shutdown, then a power-off after the grace period (or at once
    with `hard`). The GPU stays allocated while stopped."""
    return _act(actor, instance, "stop", STOP, {"hard": bool(hard)})


def require_gpu_capacity(instance: Instance) -> None:
    """A GPU instance starts only while it holds a GPU allocation: once its lease ended or was cancelled, its
    GPUs were released and scrubbed and may be another tenant's (start does not place again)."""
    from apps.scheduling.selectors import allocation_list_for_consumer

    if instance.flavor.gpu_form == GpuForm.NONE:
        return
    if not allocation_list_for_consumer(instance.pk).filter(gpu__isnull=False).exists():
        raise Conflict("This instance's GPU capacity was released (its lease ended or was cancelled) and its GPUs "
                       "may belong to another tenant now; delete it and create a new one.",
                       code=Code.CAPACITY_RELEASED)


def instance_start(*, actor, instance: Instance) -> Operation:
    """stopped → starting. 409 `capacity_released` for a GPU instance that holds no GPU allocation any more
    (docs/compute.md, "Scrub")."""
    return _act(actor, instance, "start", START, guard=require_gpu_capacity)


def instance_reboot(*, actor, instance: Instance, hard: bool = False) -> Operation:
    """Soft: ACPI reboot request; hard: reset."""
    return _act(actor, instance, "reboot", REBOOT, {"hard": bool(hard)})


def instance_delete(*, actor, instance: Instance) -> Operation:
    """Delete (idempotent): cancels the instance's unfinished operations and starts `instance.delete`, which
    removes the domain and its devices and releases every allocation. A second delete returns the same
    operation."""
    authorize_project(actor, instance.project, WRITERS)
    with transaction.atomic():
        # Lock order as in the step runner: operation rows first (waits for a running step), then the instance.
        earlier = operation_latest_for(target_type=TARGET, target_id=instance.pk,
                                       kind=operation_kind(instance.flavor, DELETE))
        if earlier is None:
            operations_cancel_unfinished(target_type=TARGET, target_id=instance.pk, code="superseded_by_delete")
        inst = Instance.objects.select_for_update().get(pk=instance.pk)
        if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED) and earlier is not None:
            instance.status = inst.status
            return earlier
        before = transition(inst, "delete", INSTANCE_TRANSITIONS)
        op = operation_start(kind=operation_kind(inst.flavor, DELETE), target_type=TARGET, target_id=inst.pk,
                             project=inst.project, actor=actor)
        audit_record(actor=actor, action="compute.instance.delete", target=inst, before={"status": before},
                     after={"status": inst.status, "operation": str(op.pk)})
    instance.status = inst.status
    return op


def instance_rebuild(*, actor, instance: Instance, image_id=None) -> Operation:
    """Write the image again (the same one, or `image_id`) with a new config drive, on the same host: `active` or
    `stopped` → `rebuilding` → `active`. Bare-metal instances only (409 `not_supported_for_flavor_kind` for a VM);
    400 "Not found." naming `image`; 409 `invalid_state` (allowed_states)."""
    authorize_project(actor, instance.project, WRITERS)
    operation_kind(instance.flavor, REBUILD)
    image = instance.image
    if image_id is not None:
        image = Image.objects.filter(pk=image_id, is_active=True).first() if _is_uuid(image_id) else None
        if image is None:
            raise reference_not_found("image")
    with transaction.atomic():
        if image.pk != instance.image_id:
            Instance.objects.filter(pk=instance.pk).update(image=image)
            instance.image = image
        return _act(actor, instance, "rebuild", REBUILD, {"image": image.name})


def instance_recreate(*, actor, instance: Instance, reason: str) -> Operation:
    """Re-create an `active` VM on healthy capacity (its GPU or host failed; apps.health's remediation starts it):
    `active` → `provisioning` → `active`, one `instance.recreate` operation (workflows: claim_new →
    release_old → attach_networks → prepare_volumes → prepare_devices → wait_devices → define → start →
    wait_running).

    The instance keeps its id, name, flavor, image, SSH keys, user data, ports (MAC, fixed IPs, security groups:
    they are keyed by the instance, not the host), its InfiniBand partition (joined again with the new host's
    GUIDs) and its shared-tier volumes (placed in their zone, their pools ensured on the new host, the same disks
    in the new domain: `services.volumes`); it claims a new allocation first, then the old one is released in the
    step that queues the old GPUs' scrub (a claim that fails leaves it `active` where it runs). 409 `invalid_state` unless `active`; 409 `not_supported_for_flavor_kind` for a
    bare-metal instance. `actor` None: the system."""
    with transaction.atomic():
        inst = Instance.objects.select_for_update().select_related("flavor").get(pk=instance.pk)
        from_host = inst.host_id
        before = transition(inst, "recreate", INSTANCE_TRANSITIONS)
        op = operation_start(kind=operation_kind(inst.flavor, RECREATE), target_type=TARGET, target_id=inst.pk, project=inst.project, actor=actor,
                             state={"from_host_id": str(from_host), "reason": reason[:500]})
        audit_record(actor=actor, action="compute.instance.recreate", target=inst, before={"status": before},
                     after={"status": inst.status, "operation": str(op.pk), "from_host_id": str(from_host),
                            "reason": reason[:500]})
    instance.status = inst.status
    return op


def current_operation(instance: Instance) -> Operation | None:
    return operation_latest_for(target_type=TARGET, target_id=instance.pk)


_BEFORE_DOMAIN = (InstanceStatus.PENDING, InstanceStatus.PROVISIONING)


def instance_console_log(*, actor, instance: Instance, max_bytes: int = 65536) -> str:
    """The last `max_bytes` of the serial console log (project members and admins with a write-scoped token; the
    log may hold secrets).

    The web process never opens the hypervisor itself (libvirt's `test:///default` and `qemu:///embed` live in
    the worker's process, and the log file belongs to the hypervisor host's users): a worker reads it
    (`compute.console_log_read_task` on the `provisioning` queue, `console_log_read`) and this waits up to
    `COMPUTE_CONSOLE_LOG_TIMEOUT_S`. Errors: 409 `domain_not_defined` while the instance has no domain yet (no
    host, or its create has not defined it); 404 `domain_not_found` when its domain is gone (deleted instance,
    failed create, domain removed on the host); 503 `console_log_unavailable` when the hypervisor cannot serve
    it (a remote host, an unreadable log), 503 `service_unavailable` when no worker or hypervisor answers."""
    from ..tasks import console_log_read_task

    authorize_project(actor, instance.project, WRITERS)
    if instance.status == InstanceStatus.DELETED:
        raise NotFound("The instance is deleted; its domain and console log are gone.", code=Code.DOMAIN_NOT_FOUND)
    if instance.host_id is None:
        raise Conflict("The instance has no domain yet; try again once it is provisioned.",
                       code=Code.DOMAIN_NOT_DEFINED)
    try:
        answer = console_log_read_task.apply_async(args=[str(instance.pk), max_bytes], queue="provisioning").get(
            timeout=conf.console_log_timeout_s())
    except (*BROKER_UNAVAILABLE, CeleryTimeoutError, RedisError):
        raise ServiceUnavailable("No worker answered for the console log; try again later.")
    if "log" in answer:
        return answer["log"]
    code = answer.get("error", "")
    if code == Code.DOMAIN_NOT_FOUND:
        if instance.status in _BEFORE_DOMAIN:
            raise Conflict("The instance has no domain yet; try again once it is provisioned.",
                           code=Code.DOMAIN_NOT_DEFINED)
        raise NotFound("The hypervisor has no domain for this instance; it has no console log.",
                       code=Code.DOMAIN_NOT_FOUND)
    if code == Code.CONSOLE_LOG_UNAVAILABLE:
        raise ServiceUnavailable("The hypervisor of this instance cannot serve its console log.",
                                 code=Code.CONSOLE_LOG_UNAVAILABLE)
    raise ServiceUnavailable("The hypervisor of this instance cannot be reached; try again later.")


def console_log_read(*, instance_id, max_bytes: int = 65536) -> dict:
    """Worker side of `instance_console_log`: read the log through the host's driver (this process's cached
    connection). Returns ``{"log": str}`` or ``{"error": code, "detail": str}`` with code `domain_not_found`,
    `console_log_unavailable` (remote host, or the log file cannot be read: `OSError`) or the driver's code
    (`host_unreachable`, ...). Reads only; safe to run any number of times."""
    from .hypervisor import driver_for_host

    inst = Instance.objects.select_related("host").filter(pk=instance_id).first()
    if inst is None or inst.host is None:
        return {"error": Code.DOMAIN_NOT_FOUND.value, "detail": "no instance with a host"}
    try:
        return {"log": driver_for_host(inst.host).console_log(inst.pk, max_bytes=max_bytes)}
    except DriverNotFound as exc:
        return {"error": Code.DOMAIN_NOT_FOUND.value, "detail": str(exc)[:500]}
    except DriverError as exc:
        return {"error": exc.code or "driver_error", "detail": str(exc)[:500]}
    except OSError as exc:
        return {"error": Code.CONSOLE_LOG_UNAVAILABLE.value, "detail": f"cannot read the serial log: {exc}"[:500]}


def _resize_specs(instance: Instance, flavor: Flavor) -> list:
    from apps.scheduling.ledger import AllocationSpec

    specs = [AllocationSpec(instance.host_id, r["resource_class"], gpu_id=r["gpu_id"] and uuid.UUID(r["gpu_id"]),
                            slices=tuple(r["slices"]) if r["slices"] else None, amount=r["amount"],
                            profile=r["profile"])
             for r in (instance.devices or {}).get("placement", {}).get("resources", [])
             if r["resource_class"] not in ("vcpu", "memory_mib")]
    return specs + [AllocationSpec(instance.host_id, "vcpu", amount=flavor.vcpus),
                    AllocationSpec(instance.host_id, "memory_mib", amount=flavor.memory_mib)]


_RESOURCE_WORDS = {"vcpu": "vCPUs", "memory_mib": "memory"}


def _resize_refusal(exc: Exception) -> str:
    """The tenant's words for a resize the ledger refused (its CapacityUnavailable): what is short (vCPUs or
    memory) and where (the instance's host, or the lease it runs in), without the host's identity or the
    ledger's internals."""
    what = _RESOURCE_WORDS.get(exc.extra.get("resource_class", ""), "capacity")
    if exc.extra.get("bound_by") == "lease":
        return f"The lease the instance runs in has not enough free {what} for the new flavor."
    return f"The instance's host has not enough free {what} for the new flavor; choose a smaller flavor."


def instance_resize(*, actor, instance: Instance, flavor_id) -> Operation:
    """Cold resize on the same host to a flavor with the same GPU spec: `stopped` → `resizing` → `stopped`.

    The new vCPU and memory allocation replaces the old one in one ledger transaction (`replace=True`), so the
    instance never holds both. The new rows keep the terms the instance draws its capacity on, as the placement
    hooks give them (`placement.instance_placement_request`): inside a lease they nest under the lease's rows up
    to its end (the lease's GPUs, billed with the lease), a spot instance's stay spot. 409 `invalid_state` unless
    stopped; 409 `flavor_does_not_fit` when the GPU spec differs, the host (or the lease) lacks room, or the new
    vCPUs or memory do not fit the host NUMA nodes of the instance's GPUs (`devices_numa_shortfall`; nothing
    changes); 409 `lease_not_usable` when its lease is not active any more; 409 `capacity_unavailable` while spot
    instances still give the lease's GPUs back; 409 `not_supported_for_flavor_kind` for a bare-metal instance;
    400 "Not found." naming `flavor`; 422 `quota_exceeded` on growth."""
    from apps.operations.workflows import StepWait
    from apps.scheduling.errors import CapacityUnavailable
    from apps.scheduling.ledger import ConsumerRef, allocations_claim

    from .placement import instance_placement_request

    authorize_project(actor, instance.project, WRITERS)
    operation_kind(instance.flavor, RESIZE)
    flavor = Flavor.objects.filter(pk=flavor_id).first() if _is_uuid(flavor_id) else None
    if flavor is None or not flavor_offered_to_project(flavor, instance.project):
        raise reference_not_found("flavor")
    old = instance.flavor
    if any(getattr(old, f) != getattr(flavor, f) for f in GPU_FIELDS):
        raise Conflict("A resize keeps the instance's GPUs: the new flavor must have the same GPU spec.",
                       code=Code.FLAVOR_DOES_NOT_FIT)
    short = devices_numa_shortfall(instance, flavor)
    if short:  # the guest NUMA nodes stay bound to the GPUs' host nodes (docs/adr/0505, 0510)
        raise Conflict(f"The new flavor does not fit the NUMA nodes of the instance's GPUs on its host ({short}); "
                       "choose a smaller flavor.", code=Code.FLAVOR_DOES_NOT_FIT)
    with transaction.atomic():
        before = transition(instance, "resize", INSTANCE_TRANSITIONS)
        for key, delta in (("vcpus", flavor.vcpus - old.vcpus), ("memory_mib", flavor.memory_mib - old.memory_mib)):
            if delta > 0:
                quota_check(scope=instance.project, resource=key, requested=delta)
        try:
            terms = instance_placement_request(instance, flavor)
        except StepWait as exc:
            raise CapacityUnavailable(f"Not now: {exc.reason or exc}") from exc
        try:
            rows = allocations_claim(consumer=ConsumerRef(id=instance.pk, consumer_type="instance",
                                                          project_id=instance.project_id),
                                     specs=_resize_specs(instance, flavor), replace=True, end=terms.end,
                                     spot=terms.spot, parent_consumer_id=terms.lease_id)
        except CapacityUnavailable as exc:
            raise Conflict(_resize_refusal(exc), code=Code.FLAVOR_DOES_NOT_FIT) from exc
        Instance.objects.filter(pk=instance.pk).update(flavor=flavor)
        # billing rates each ledger period at the flavor it had (apps.compute.billing)
        InstanceFlavorChange.objects.create(instance=instance, from_flavor=old, to_flavor=flavor,
                                            at=min((r.period.lower for r in rows), default=now()))
        instance.flavor = flavor
        op = operation_start(kind=RESIZE, target_type=TARGET, target_id=instance.pk, project=instance.project,
                             actor=actor, state={"from_flavor": old.name, "to_flavor": flavor.name})
        audit_record(actor=actor, action="compute.instance.resize", target=instance,
                     before={"status": before, "flavor": old.name},
                     after={"status": instance.status, "flavor": flavor.name, "operation": str(op.pk)})
    return op
