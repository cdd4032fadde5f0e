"""Instance workflows on the Operation step runner (`apps.operations.runner`).

create:  place_and_claim → attach_networks → prepare_volumes (storage's create hooks) → prepare_devices → wait_devices → define → start → wait_running
stop:    stop → wait_stopped            start: prepare_devices → wait_devices → start → wait_running
reboot:  reboot                         resize: redefine
delete:  destroy_domain → release_devices (queues the GPU scrub) → wait_devices_released (no-op) →
         release_volumes (storage's delete hook) → release_allocations
recreate: claim_new → release_old → attach_networks → prepare_volumes (its attached volumes on the new
         host) → prepare_devices → wait_devices → define → start → wait_running (a VM off a failed GPU or host,
         `services.instances.instance_recreate`)
cluster.create (services/clusters.py): claim_members → start_members

Every step runs in the transaction that holds the Operation's row lock and is idempotent: driver calls are
keyed by the instance UUID (= domain UUID and name) and mdev UUIDs derived from it; agent commands are
recorded in `instance.devices` before they are waited on; the ledger claim commits with the step that made it.
Steps that wait (`wait_*`) only read, because a `StepWait` rolls the step's writes back.
"""
from __future__ import annotations

import datetime as dt
import json

from django.db import transaction

from apps.core.clock import now
from apps.core.drivers import DriverError, DriverTransientError
from apps.core.transitions import transition
from apps.operations import workflows as wf
from apps.operations.workflows import AGAIN, StepWait

from . import conf
from .drivers.base import CloudInitSeed, DiskSpec, DomainSpec, MdevHostdev, NumaCell, PciHostdev, PowerState
from .models import Instance
from .services import clusters as _clusters  # noqa: F401  (registers cluster.create)
from .services import devices as devsvc
from .services import networks as netsvc
from .services import volumes as volsvc
from .services.hypervisor import driver_for_host
from .services.instances import CREATE, DELETE, REBOOT, RECREATE, RESIZE, START, STOP, require_gpu_capacity
from .services.placement import (
    CapacityTaken,
    instance_allocations_release,
    instance_claim_replacement,
    instance_place_and_claim,
    instance_readmit,
    instance_replacement_adopt,
    instance_replacement_release,
)
from .states import INSTANCE_TRANSITIONS, InstanceStatus


def _instance(op) -> Instance:
    return Instance.objects.select_for_update(of=("self",)).select_related("flavor", "image", "host").get(
        pk=op.target_id)


def _call(op, fn, *args, **kwargs):
    """Run a driver call; after `COMPUTE_TRANSIENT_RETRIES` transient failures in one step, give up (terminal,
    same code) so the create fails over instead of retrying an unreachable host until the deadline."""
    try:
        return fn(*args, **kwargs)
    except DriverTransientError as exc:
        if op.kind in (CREATE, RECREATE) and op.attempts + 1 >= conf.transient_retries():
            raise DriverError(str(exc), code=exc.code) from exc
        raise


def _observe(inst: Instance, state: PowerState) -> None:
    Instance.objects.filter(pk=inst.pk).update(observed_state=str(state), observed_at=now())
    inst.observed_state = str(state)


# ---- create ------------------------------------------------------------------------------------------------
def place_and_claim(op):
    """Claim the instance's capacity. A claim that finds the capacity gone (a concurrent request took it after
    the create was admitted) asks the placement rule again (`instance_readmit`): when the capacity is still there
    elsewhere the step places again after `COMPUTE_CAPACITY_POLL_S`; when the fleet cannot hold it now the create
    fails at once with 409 `capacity_unavailable` and ``earliest_start`` (never `unplaceable` after it was
    admitted, unless the fleet shrank), or, if the client asked `queue: true`, the instance joins the on-demand
    queue (this step commits the entry and runs again, then waits there with its position)."""
    inst = _instance(op)
    if inst.status == InstanceStatus.PENDING:
        transition(inst, "provision", INSTANCE_TRANSITIONS)
    if inst.host_id is None:
        try:
            with transaction.atomic():
                instance_place_and_claim(actor=op.actor, instance=inst, operation=op)
        except CapacityTaken as exc:
            op.state["waiting_for_capacity"] = exc.detail[:500]
            if instance_readmit(actor=op.actor, instance=inst, operation=op, queue=bool(op.state.get("queue"))):
                return AGAIN
            raise StepWait(conf.capacity_poll_s(), f"waiting for capacity: {exc.detail[:200]}") from exc
    return None


def attach_networks(op) -> None:
    """The tenant's port and InfiniBand partition memberships (`services.networks`), keyed by the instance id."""
    inst = _instance(op)
    if inst.network:
        netsvc.instance_networks_attach(actor=op.actor, instance=inst)


def prepare_volumes(op) -> None:
    """Make the volumes the create asked for on the chosen host and attach them to what `define` defines; on a
    re-create, make the volumes already attached reachable from the new host (storage's create hooks,
    `services.volumes`; a no-op without volumes). Idempotent: keyed by the volume ids."""
    volsvc.instance_volumes_prepare(instance=_instance(op))


def prepare_devices(op) -> None:
    inst = _instance(op)
    devsvc.devices_prepare(instance=inst, driver=driver_for_host(inst.host),
                           call=lambda f, *a, **k: _call(op, f, *a, **k),
                           start_op_id=str(op.pk) if op.kind == START else None)


def wait_devices(op) -> None:
    inst = _instance(op)
    pending = devsvc.agent_commands_pending(inst, phase="prepare")
    if pending:
        raise StepWait(0.5, f"waiting for agent commands {pending}")


def _network_config(nics) -> str:
    """cloud-init network config version 2 (docs.cloud-init.io, "Networking config Version 2"): each NIC matched
    by MAC, addressed by DHCP, which OVN answers with the port's fixed IP (docs/networking.md). JSON is YAML."""
    if not nics:
        return ""
    eths = {f"nic{i}": {"match": {"macaddress": n.mac_address}, "set-name": f"eth{i}", "dhcp4": True}
            for i, n in enumerate(nics)}
    return json.dumps({"version": 2, "ethernets": eths}, sort_keys=True)


def _spec(inst: Instance) -> DomainSpec:
    d = inst.devices or {}
    node = devsvc.devices_guest_nodes(inst)  # each device under its guest NUMA node's PCIe expander bus
    hostdevs: list = [PciHostdev(a, guest_node=node.get(a)) for a in d.get("pci", []) + d.get("hca", [])]
    hostdevs += [PciHostdev(v["address"], vgpu_type=v.get("vgpu_type", ""), is_vf=True, guest_node=node.get(v["address"]))
                 for v in d.get("vfs", [])]
    hostdevs += [PciHostdev(v["address"], is_vf=True, guest_node=node.get(v["address"]))  # RDMA: HCA VFs, by rail
                 for v in d.get("hca_vfs", [])]
    hostdevs += [MdevHostdev(m["uuid"], m["mdev_type"], m["parent"], m.get("gpu_instance_start"),
                             guest_node=node.get(m["uuid"])) for m in d.get("mdevs", [])]
    image = inst.image
    disk = None
    volumes = volsvc.instance_volume_disks(inst)
    if conf.image_dir() and not any(v.boot for v in volumes):  # boot from volume: the volume is the boot disk
        disk = DiskSpec(max(inst.flavor.disk_gib, image.min_disk_gib),
                        f"{conf.image_dir()}/{image.name}.{image.disk_format}", image.disk_format)
    nics = netsvc.interfaces_for(inst.pk, bridge=conf.ovs_bridge())
    seed = None
    if image.cloud_init:
        seed = CloudInitSeed(instance_id=str(inst.pk), hostname=inst.name,
                             ssh_authorized_keys=tuple(k.public_key for k in inst.ssh_keys.order_by("name")),
                             user_data=inst.user_data, network_config=_network_config(nics))
    flavor = inst.flavor
    numa = d.get("numa") or {}
    cells = tuple(NumaCell(c["host_node"], tuple(range(c["vcpus"][0], c["vcpus"][1] + 1)), tuple(c["cpus"]),
                           c["memory_mib"]) for c in numa.get("cells", []))
    return DomainSpec(uuid=inst.pk, vcpus=flavor.vcpus, memory_mib=flavor.memory_mib, project_id=str(inst.project_id),
                      numa_node=d.get("numa_node"), cpuset=tuple(d.get("cpuset", ())), hugepages=flavor.hugepages,
                      numa_cells=cells, emulator_cpuset=tuple(numa.get("emulator_cpus", ())),
                      uefi=conf.uefi(), secure_boot=image.secure_boot, machine=conf.machine(),
                      virt_type=conf.virt_type(), hostdevs=tuple(hostdevs), interfaces=nics, disk=disk,
                      volumes=volumes, seed=seed, labels=(("flavor", flavor.name), ("image", image.name)))


def define(op) -> None:
    inst = _instance(op)
    drv = driver_for_host(inst.host)
    devsvc.mdevs_create(instance=inst, driver=drv, call=lambda f, *a, **k: _call(op, f, *a, **k))
    info = _call(op, drv.domain_define, _spec(inst))
    _observe(inst, info.power_state)


def start(op) -> None:
    inst = _instance(op)
    if op.kind == START:  # its lease may have ended since the start was asked (the service checked then)
        require_gpu_capacity(inst)
    info = _call(op, driver_for_host(inst.host).domain_start, inst.pk)
    _observe(inst, info.power_state)


def _wait_running(op, action: str) -> None:
    inst = _instance(op)
    info = _call(op, driver_for_host(inst.host).domain_get, inst.pk)
    if info.power_state != PowerState.RUNNING:
        raise StepWait(0.5, f"domain is {info.power_state}")
    _observe(inst, info.power_state)
    extra = {"launched_at": inst.launched_at or now(), "error_code": "", "error_reason": ""}
    transition(inst, action, INSTANCE_TRANSITIONS, extra=extra)


def _cluster_member_settled(inst) -> None:
    """A cluster member's create ended: the cluster's status follows its members (`cluster_member_settled`)."""
    if inst.cluster_id is not None:
        from .models import Cluster
        from .services.clusters import cluster_member_settled

        cluster_member_settled(Cluster.objects.select_for_update().get(pk=inst.cluster_id))


def wait_running(op) -> None:
    _wait_running(op, "provisioned")
    _cluster_member_settled(_instance(op))


def create_failed(op, code: str, detail: str) -> None:
    """on_error of create: the instance goes to `error` with the code and reason, its domain and mdevs are
    removed, the scrub of its GPUs is queued (they are `dirty` until the agent reports it) and its allocations
    are ended; an unreachable host is cordoned until a health check clears it."""
    inst = _instance(op)
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED):
        return  # a delete superseded this create; it cleans up
    transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})
    _cluster_member_settled(inst)
    if inst.host_id is not None:
        try:
            drv = driver_for_host(inst.host)
            drv.domain_delete(inst.pk)
            devsvc.mdevs_delete(instance=inst, driver=drv)
        except DriverError:
            pass  # the reconciler finds leftovers; the allocation must not wait for an unreachable host
        devsvc.devices_scrub(inst, reason=f"create failed ({code[:64]})")
        if code == "host_unreachable":
            devsvc.host_cordon_unreachable(inst.host, detail)
    netsvc.instance_networks_detach(actor=None, instance_id=inst.pk)
    volsvc.instance_volumes_abandon(instance=inst)  # after the domain (and its disks) went
    instance_allocations_release(instance=inst)


# ---- recreate (a VM off a failed GPU or host) ---------------------------------------------------------------
def claim_new(op):
    """Claim the capacity the VM moves to while it still runs on the old host and holds the old allocation
    (`instance_claim_replacement`): a claim that finds no capacity fails the operation with the VM untouched
    where it runs (`recreate_failed` puts it back to `active`), never hostless. A claim that lost a race to a
    concurrent one places again when the fleet still holds the flavor elsewhere (as `place_and_claim`)."""
    inst = _instance(op)
    if op.state.get("new_allocations") or op.state.get("old_released"):
        return None
    try:
        with transaction.atomic():
            instance_claim_replacement(actor=op.actor, instance=inst, operation=op)
    except CapacityTaken as exc:
        op.state["waiting_for_capacity"] = exc.detail[:500]
        instance_readmit(actor=op.actor, instance=inst, operation=op, queue=False)  # raises when it cannot fit
        return AGAIN
    return None


def release_old(op) -> None:
    """Leave the old host in one transaction, once the new capacity is claimed: remove the domain and mdevs
    there (a host that stays unreachable for `COMPUTE_TRANSIENT_RETRIES` tries is left as it is and cordoned: the
    reconciler reports the leftover domain when it answers again), queue the old GPUs' scrub (`devices_scrub`),
    leave the InfiniBand partition (its GUIDs are the old host's), end every allocation but the new claim and
    record the new host and placement (`instance_replacement_adopt`). The ports stay. A crash before the commit
    leaves all of it undone; after it, ``old_released`` is set and the step is a no-op."""
    inst = _instance(op)
    if op.state.get("old_released"):
        return
    if inst.host_id is not None and str(inst.host_id) == op.state.get("from_host_id"):
        drv = driver_for_host(inst.host)
        try:
            drv.domain_delete(inst.pk)
            devsvc.mdevs_delete(instance=inst, driver=drv)
        except DriverTransientError as exc:
            if op.attempts + 1 < conf.transient_retries():
                raise
            op.state["old_host_unreachable"] = str(exc)[:500]
            devsvc.host_cordon_unreachable(inst.host, str(exc))
        except DriverError as exc:
            op.state["old_domain_error"] = f"{exc.code or 'driver_error'}: {exc}"[:500]
        devsvc.devices_scrub(inst, reason="re-created on other capacity (health remediation)")
    from apps.networking.services import ib_partition_members_leave_instance

    ib_partition_members_leave_instance(actor=None, instance_id=inst.pk)
    op.state["old_placement"] = (inst.devices or {}).get("placement", {})
    instance_replacement_adopt(instance=inst, operation=op)
    op.state["old_released"] = True


def recreate_failed(op, code: str, detail: str) -> None:
    """on_error of recreate. Before the old host was left (the claim failed): the new claim, if any, is ended
    and the instance is `active` again where it runs. After: the instance goes to `error`; a new domain, devices
    and allocation it got are removed (ports kept for the tenant's delete)."""
    inst = _instance(op)
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED):
        return
    if not op.state.get("old_released"):
        instance_replacement_release(instance=inst, operation=op)
        if inst.status == InstanceStatus.PROVISIONING:
            transition(inst, "recreate_undone", INSTANCE_TRANSITIONS)
        return
    transition(inst, "fail", INSTANCE_TRANSITIONS,
               extra={"error_code": code[:64], "error_reason": f"re-create failed: {detail}"[:1000]})
    if inst.host_id is None:
        return
    try:
        drv = driver_for_host(inst.host)
        drv.domain_delete(inst.pk)
        devsvc.mdevs_delete(instance=inst, driver=drv)
    except DriverError:
        pass
    devsvc.devices_scrub(inst, reason=f"re-create failed ({code[:64]})")
    from apps.networking.services import ib_partition_members_leave_instance

    ib_partition_members_leave_instance(actor=None, instance_id=inst.pk)
    instance_allocations_release(instance=inst)


# ---- stop / start / reboot --------------------------------------------------------------------------------
def stop(op) -> None:
    inst = _instance(op)
    info = _call(op, driver_for_host(inst.host).domain_stop, inst.pk, hard=op.state.get("hard", False))
    op.state["stop_requested_at"] = now().isoformat()
    _observe(inst, info.power_state)


def wait_stopped(op) -> None:
    inst = _instance(op)
    drv = driver_for_host(inst.host)
    info = _call(op, drv.domain_get, inst.pk)
    if info.power_state != PowerState.SHUTOFF:
        asked = dt.datetime.fromisoformat(op.state["stop_requested_at"])
        if (now() - asked).total_seconds() < conf.stop_grace_seconds():
            raise StepWait(1.0, "waiting for the guest to shut down")
        info = _call(op, drv.domain_stop, inst.pk, hard=True)
        if info.power_state != PowerState.SHUTOFF:
            raise StepWait(1.0, "waiting for power-off")
    _observe(inst, info.power_state)
    devsvc.partition_deactivate(inst)
    devsvc.devices_scrub_if_released(inst)
    transition(inst, "stopped", INSTANCE_TRANSITIONS)


def wait_running_after_start(op) -> None:
    _wait_running(op, "started")


def reboot(op) -> None:
    inst = _instance(op)
    info = _call(op, driver_for_host(inst.host).domain_reboot, inst.pk, hard=op.state.get("hard", False))
    _observe(inst, info.power_state)
    transition(inst, "rebooted", INSTANCE_TRANSITIONS)


def redefine(op) -> None:
    """Resize: define the stopped domain again with the new flavor's vCPUs and memory (and its guest NUMA layout
    worked out again for them)."""
    inst = _instance(op)
    devsvc.devices_numa_refresh(inst)
    info = _call(op, driver_for_host(inst.host).domain_define, _spec(inst))
    _observe(inst, info.power_state)
    transition(inst, "resized", INSTANCE_TRANSITIONS)


def action_failed(op, code: str, detail: str) -> None:
    """on_error of stop, start, reboot, resize: the instance goes to `error`; a start that failed after its
    capacity was released (a lease ended meanwhile: its GPUs are held dirty) queues the scrub of its GPUs."""
    inst = _instance(op)
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED):
        return
    transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})
    if op.kind == START:
        devsvc.devices_scrub_if_released(inst)


# ---- delete -------------------------------------------------------------------------------------------------
def destroy_domain(op) -> None:
    """Remove the domain. When the host stays unreachable for `COMPUTE_TRANSIENT_RETRIES` tries, delete locally
    (real-world case RW-022): cordon the host, skip the libvirt cleanup, and release the allocations anyway; the
    GPUs' scrub is still queued (they stay `dirty`, and `mark-available` refuses the host, until the agent
    reports it), and the reconciler reports the leftover domain."""
    inst = _instance(op)
    if inst.host_id is None:
        return
    try:
        driver_for_host(inst.host).domain_delete(inst.pk)
    except DriverTransientError as exc:
        if op.attempts + 1 < conf.transient_retries():
            raise
        devices = {**(inst.devices or {}), "local_delete": f"host unreachable: {exc}"[:500]}
        Instance.objects.filter(pk=inst.pk).update(devices=devices)
        devsvc.host_cordon_unreachable(inst.host, str(exc))
        return
    _observe(inst, PowerState.MISSING)


def release_devices(op) -> None:
    """Remove the mdevs and queue the GPUs' scrub (`devices_scrub`): from this step on the GPUs are `dirty`, so
    the allocations can be released without waiting for the agent."""
    inst = _instance(op)
    if inst.host_id is None:
        return
    if "local_delete" in (inst.devices or {}):
        devsvc.devices_scrub(inst, reason="deleted (local delete: host unreachable)")
    else:
        devsvc.devices_release(instance=inst, driver=driver_for_host(inst.host), reason="deleted")


def wait_devices_released(op) -> None:
    """Nothing to wait for: the scrub's outcome is the GPUs' `scrub_state`, not the delete's (a failed reset
    leaves the GPU `scrub_failed` for staff; the tenant's delete completes). Kept so operations that reached
    this step finish."""
    return None


def release_volumes(op) -> None:
    """The attached volumes' attachments go (their disks went with the domain) and `delete_on_termination`
    volumes start their delete, through storage's delete hook (`services.volumes`); so do the volumes a create
    superseded by this delete had reserved."""
    inst = _instance(op)
    volsvc.instance_volumes_abandon(instance=inst)
    volsvc.instance_volumes_release(instance=inst)


def release_allocations(op) -> None:
    """Remove the instance's ports and partition memberships (as the system: a delete must not fail because
    the deleting user lost the project), release its allocations and mark it deleted."""
    inst = _instance(op)
    netsvc.instance_networks_detach(actor=None, instance_id=inst.pk)
    instance_allocations_release(instance=inst)
    transition(inst, "deleted", INSTANCE_TRANSITIONS, extra={"deleted_at": now()})
    if inst.cluster_id is not None:
        from .models import Cluster
        from .services.clusters import cluster_finish_if_empty

        cluster_finish_if_empty(Cluster.objects.select_for_update().get(pk=inst.cluster_id))


def delete_failed(op, code: str, detail: str) -> None:
    inst = _instance(op)
    if inst.status == InstanceStatus.DELETING:
        transition(inst, "fail", INSTANCE_TRANSITIONS,
                   extra={"error_code": code[:64], "error_reason": f"delete failed: {detail}"[:1000]})


wf.register(wf.Workflow(kind=CREATE, steps=(
    ("place_and_claim", place_and_claim), ("attach_networks", attach_networks),
    ("prepare_volumes", prepare_volumes), ("prepare_devices", prepare_devices), ("wait_devices", wait_devices),
    ("define", define), ("start", start), ("wait_running", wait_running)),
    on_error=create_failed, deadline_seconds=900.0, max_backoff_seconds=10.0))
wf.register(wf.Workflow(kind=RECREATE, steps=(
    ("claim_new", claim_new), ("release_old", release_old), ("attach_networks", attach_networks),
    ("prepare_volumes", prepare_volumes), ("prepare_devices", prepare_devices), ("wait_devices", wait_devices),
    ("define", define), ("start", start), ("wait_running", wait_running)),
    on_error=recreate_failed, deadline_seconds=1800.0, max_backoff_seconds=10.0))
wf.register(wf.Workflow(kind=STOP, steps=(("stop", stop), ("wait_stopped", wait_stopped)),
                        on_error=action_failed, deadline_seconds=600.0))
wf.register(wf.Workflow(kind=START, steps=(
    ("prepare_devices", prepare_devices), ("wait_devices", wait_devices), ("start", start),
    ("wait_running", wait_running_after_start)),
                        on_error=action_failed, deadline_seconds=600.0))
wf.register(wf.Workflow(kind=RESIZE, steps=(("redefine", redefine),), on_error=action_failed,
                        deadline_seconds=600.0))
wf.register(wf.Workflow(kind=REBOOT, steps=(("reboot", reboot),), on_error=action_failed, deadline_seconds=300.0))
wf.register(wf.Workflow(kind=DELETE, steps=(
    ("destroy_domain", destroy_domain), ("release_devices", release_devices),
    ("wait_devices_released", wait_devices_released), ("release_volumes", release_volumes),
    ("release_allocations", release_allocations)),
    on_error=delete_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))
