"""Bare-metal workflows on the Operation step runner (`apps.operations.runner`).

Nodes (staff):
  baremetal.node.enroll:   enroll → manage → inspect (compared with the host's catalog) → provide
  baremetal.node.recover:  recover (Ironic's way out of the failed state) → provide → return_to_service
Instances of `baremetal` flavors (registered with compute, `integrations`; the same /instances and /clusters API
and states; a cluster member's create starts after its cluster's gang claim, so its placement step finds its host):
  create:  place_and_claim → attach_networks (IB partition: the host's HCA GUIDs) → deploy (image + config
           drive) → wait_active
  delete:  undeploy → detach_networks (GUIDs leave the partitions) → verify_fabric (the subnet manager applied
           it) → clean_start (hands the host's own work to `baremetal.node.clean`) → release_allocations (the
           instance is `deleted`: the tenant's delete is done once the server is undeployed and its access gone)
  baremetal.node.clean (the host's work after a delete, target the node, deadline sized for cleaning:
           `BAREMETAL_CLEAN_TIMEOUT_S`; docs/adr/1215): wait_cleaned (Ironic's automated cleaning) →
           erase_read_back (sample blocks of the disk read back) → gpu_checks (GPU reset and validation by the node
           agent) → return_to_service → sign_receipt
  (A delete started by an earlier version, which ran those steps itself, still finds them in the delete.)
  reboot:  reboot     stop: power_off     start: power_on     rebuild: rebuild → wait_rebuilt

Every step is idempotent: the node is keyed by our instance id (Ironic's `instance_uuid`), so a deploy or an
undeploy that already happened is seen and not asked again; a step that waits only reads. A BMC or Ironic that
does not answer is a `DriverTransientError`: the runner retries the step with backoff until the operation's
deadline (an hour for a delete; `BAREMETAL_CLEAN_TIMEOUT_S` plus the GPU check's time for the host's cleaning), so a
delete is never lost; a failed provision state is terminal for that
operation and its `on_error` takes the documented way back (docs/bare-metal.md).
"""
from __future__ import annotations

from django.db import transaction

from apps.compute.models import Instance
from apps.compute.services.instances import CREATE, DELETE, REBOOT, REBUILD, START, STOP, operation_kind
from apps.compute.services.placement import (
    CapacityTaken,
    instance_allocations_release,
    instance_place_and_claim,
    instance_readmit,
)
from apps.compute.services.reconcile import instance_observe
from apps.compute.states import INSTANCE_TRANSITIONS, InstanceStatus
from apps.core.clock import now
from apps.core.errors import Conflict
from apps.core.transitions import transition
from apps.operations import workflows as wf
from apps.operations.selectors import operation_latest_for
from apps.operations.workflows import AGAIN, StepWait

from . import conf
from .drivers.base import (
    ConfigDrive,
    DeployRequest,
    DriverError,
    DriverTransientError,
    NodeFailed,
    PowerAction,
    PowerState,
    ProvisionState,
)
from .errors import Code
from .models import BaremetalNode
from .services import nodes as nodesvc
from .services import receipts
from .services.driver import baremetal_driver, baremetal_service_require

P = ProvisionState
KIND = "baremetal"
KINDS = {k: f"baremetal.{k}" for k in (CREATE, DELETE, REBOOT, REBUILD, START, STOP)}
CLEAN = "baremetal.node.clean"


# ---- nodes ---------------------------------------------------------------------------------------------------
def _node(op) -> BaremetalNode:
    return BaremetalNode.objects.select_for_update().select_related("host").get(pk=op.target_id)


def node_enroll_step(op) -> None:
    node = _node(op)
    nodesvc.node_observe(node, baremetal_driver().enroll(nodesvc.enroll_request(node)))


def node_manage_step(op) -> None:
    node = _node(op)
    nodesvc.node_observe(node, baremetal_driver().manage(node.ironic_id))


def node_inspect_step(op) -> None:
    """Inspect and compare with the host's record; a difference fails the operation with
    `inspection_mismatch` (its on_error holds the node with the difference named)."""
    node = _node(op)
    drv = baremetal_driver()
    found = drv.inspect(node.ironic_id)
    nodesvc.node_observe(node, drv.get(node.ironic_id))
    BaremetalNode.objects.filter(pk=node.pk).update(inspection={
        "cpus": found.cpus, "memory_mb": found.memory_mb, "local_gb": found.local_gb, "cpu_arch": found.cpu_arch,
        "macs": list(found.macs), "inspected_at": now().isoformat()})
    diff = nodesvc.inspection_differences(node.host, found)
    if diff:
        raise Conflict("Inspection differs from the host's catalog: " + "; ".join(diff),
                       code=Code.INSPECTION_MISMATCH, differences=diff)


def node_provide_step(op) -> None:
    node = _node(op)
    nodesvc.node_observe(node, baremetal_driver().provide(node.ironic_id))


def node_return_step(op) -> None:
    node = _node(op)
    BaremetalNode.objects.filter(pk=node.pk).update(held_reason="")
    nodesvc.node_return_to_service(node=node, reason="bare-metal node available")


def node_failed(op, code: str, detail: str) -> None:
    """on_error of enroll and recover: the node is held with the reason (Ironic maintenance on where the node
    exists there, so Ironic does nothing on its own); the host stays out of placement."""
    node = _node(op)
    nodesvc.node_hold(node=node, reason=f"{code}: {detail}")
    if node.ironic_id:
        try:
            drv = baremetal_driver()
            drv.set_maintenance(node.ironic_id, True, f"{code}: {detail}"[:255])
            nodesvc.node_observe(node, drv.get(node.ironic_id))
        except Exception:  # noqa: BLE001 - the hold is ours; Ironic's flag follows at the next recovery
            pass


def node_recover_step(op) -> None:
    """Ironic's way out of a failed state (`driver.recover`: clean/inspect failed → manageable, deploy failed /
    error → available), after clearing maintenance (ours or Ironic's)."""
    node = _node(op)
    drv = baremetal_driver()
    seen = drv.get(node.ironic_id)
    if seen.state.maintenance:
        seen = drv.set_maintenance(node.ironic_id, False)
    if seen.state.failed:
        seen = drv.recover(node.ironic_id)
    if seen.state.provision == P.ENROLL:
        seen = drv.manage(node.ironic_id)
    nodesvc.node_observe(node, seen)


def node_provide_if_manageable_step(op) -> None:
    node = _node(op)
    drv = baremetal_driver()
    seen = drv.get(node.ironic_id)
    if seen.state.provision == P.MANAGEABLE:
        seen = drv.provide(node.ironic_id)
    nodesvc.node_observe(node, seen)
    if seen.state.provision != P.AVAILABLE:
        raise Conflict(f"The node is {seen.state.provision}, not available.", code=Code.NODE_NOT_AVAILABLE)


wf.register(wf.Workflow(kind=nodesvc.ENROLL, steps=(
    ("enroll", node_enroll_step), ("manage", node_manage_step), ("inspect", node_inspect_step),
    ("provide", node_provide_step), ("return_to_service", node_return_step)),
    on_error=node_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))
wf.register(wf.Workflow(kind=nodesvc.RECOVER, steps=(
    ("recover", node_recover_step), ("provide", node_provide_if_manageable_step),
    ("return_to_service", node_return_step)),
    on_error=node_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))


# ---- instances -------------------------------------------------------------------------------------------------
def _instance(op) -> Instance:
    """The operation's instance: its target, or for the host's cleaning (`baremetal.node.clean`, target the node)
    the deleted instance it follows (`op.state["instance_id"]`)."""
    return Instance.objects.select_for_update(of=("self",)).select_related("flavor", "image", "host").get(
        pk=op.state.get("instance_id") or op.target_id)


def _instance_node(inst: Instance) -> BaremetalNode | None:
    if inst.host_id is None:
        return None
    return BaremetalNode.objects.select_related("host").filter(host_id=inst.host_id).first()


def _cleaning_runs(node: BaremetalNode) -> bool:
    """The host's cleaning after a delete (`baremetal.node.clean`) has not finished."""
    last = operation_latest_for(target_type=nodesvc.TARGET, target_id=node.pk, kind=CLEAN)
    return last is not None and last.finished_at is None


def place_and_claim(op):
    """Claim the whole host (every GPU, the flavor's vCPUs and memory; the host dedicated to the project) as the
    VM create does (`apps.compute.services.placement`), then check that its node is ready for a tenant: not
    held, not in maintenance, and no earlier instance of the host still being deleted nor the host's cleaning after
    one still running (`baremetal.node.clean`; a host staff marked `available` by hand during the previous tenant's
    cleaning or checks); else 409 `baremetal_node_not_available`."""
    inst = _instance(op)
    if inst.status == InstanceStatus.PENDING:
        transition(inst, "provision", INSTANCE_TRANSITIONS)
    if inst.host_id is None:
        try:
            with transaction.atomic():
                instance_place_and_claim(actor=op.actor, instance=inst, operation=op)
        except CapacityTaken as exc:
            if instance_readmit(actor=op.actor, instance=inst, operation=op, queue=bool(op.state.get("queue"))):
                return AGAIN
            raise StepWait(conf.deploy_poll_s(), f"waiting for capacity: {exc.detail[:200]}") from exc
    node = _instance_node(inst)
    if node is None or node.held_reason or node.maintenance or not node.ironic_id:
        raise Conflict("The placed host has no bare-metal node ready for a tenant.", code=Code.NODE_NOT_AVAILABLE)
    if Instance.objects.filter(host_id=inst.host_id, status=InstanceStatus.DELETING).exclude(pk=inst.pk).exists() \
            or _cleaning_runs(node):
        # the previous tenant's delete (cleaning, erase read-back, GPU checks) has not returned the host yet:
        # staff marked it available by hand; nothing is asked of Ironic and the node is not touched
        raise Conflict("The placed host is still being cleaned after its previous instance.",
                       code=Code.NODE_NOT_AVAILABLE)
    op.state["node"] = node.ironic_id
    return None


def attach_networks(op) -> None:
    """The tenant networks the instance asked for, once the host is known (compute's
    `instance_networks_attach`, idempotent): an InfiniBand partition is joined by every physical HCA port GUID of
    the host on the partition's fabric (a bare-metal instance takes the whole host), as full members; the
    fabric's reconcile applies it to the subnet manager (scheduled on commit)."""
    from apps.compute.services.networks import instance_networks_attach

    inst = _instance(op)
    if inst.network:
        instance_networks_attach(actor=None, instance=inst)


def config_drive(inst: Instance, node: BaremetalNode) -> ConfigDrive:
    """cloud-init's ConfigDrive (OpenStack format): meta_data with the instance's UUID, hostname and the
    project's SSH keys it was created with; the tenant's user_data; network_data with one DHCP link per NIC of
    the host, matched by MAC (OpenStack network_data.json)."""
    keys = {k.name: k.public_key for k in inst.ssh_keys.order_by("name")}
    macs = sorted(node.host.nics.values_list("mac_address", flat=True))
    network = {"links": [{"id": f"nic{i}", "type": "phy", "ethernet_mac_address": m} for i, m in enumerate(macs)],
               "networks": [{"id": f"net{i}", "link": f"nic{i}", "type": "ipv4_dhcp"} for i in range(len(macs))],
               "services": []}
    return ConfigDrive(meta_data={"uuid": str(inst.pk), "hostname": inst.name, "name": inst.name,
                                  "public_keys": keys, "launch_index": 0},
                       user_data=inst.user_data, network_data=network if macs else {})


def _deploy_request(inst: Instance, node: BaremetalNode) -> DeployRequest:
    return DeployRequest(instance_id=str(inst.pk), image_source=inst.image.source_url,
                         image_checksum=inst.image.checksum, root_gb=inst.flavor.disk_gib or None,
                         config_drive=config_drive(inst, node))


def _observe_instance(inst: Instance, power: str) -> None:
    instance_observe(inst, power)


def deploy(op) -> None:
    """Ask Ironic to deploy (once: a node already carrying this instance is deploying or deployed)."""
    inst = _instance(op)
    node = _instance_node(inst)
    drv = baremetal_driver()
    seen = drv.get(node.ironic_id)
    if seen.instance_id != str(inst.pk):
        seen = drv.deploy(node.ironic_id, _deploy_request(inst, node), wait=False)
    nodesvc.node_observe(node, seen)


def _wait_active(op, action: str) -> None:
    inst = _instance(op)
    node = _instance_node(inst)
    seen = baremetal_driver().get(node.ironic_id)
    nodesvc.node_observe(node, seen)
    if seen.state.failed:
        raise NodeFailed(seen)
    if seen.state.provision != P.ACTIVE or seen.state.target_provision is not None:
        raise StepWait(conf.deploy_poll_s(), f"node is {seen.state.provision}")
    if seen.state.power != PowerState.ON:
        # `active` means the server runs: a deploy that left it off or its power unknown (fake-hardware, a
        # deploy interface that does not boot the instance; a rebuild of a stopped one) is powered on here
        seen = baremetal_driver().set_power(node.ironic_id, PowerAction.ON)
        nodesvc.node_observe(node, seen)
    _observe_instance(inst, str(seen.state.power))
    transition(inst, action, INSTANCE_TRANSITIONS,
               extra={"launched_at": inst.launched_at or now(), "error_code": "", "error_reason": ""})


def _cluster_locked(inst: Instance):
    from apps.compute.models import Cluster

    return Cluster.objects.select_for_update().get(pk=inst.cluster_id)


def wait_active(op) -> None:
    """The node is `active`: the instance too; a cluster member settles its cluster (`active` once all are)."""
    from apps.compute.services.clusters import cluster_member_settled

    _wait_active(op, "provisioned")
    inst = _instance(op)
    if inst.cluster_id is not None:
        cluster_member_settled(_cluster_locked(inst))


def _cluster_take_down(inst: Instance) -> None:
    """A member of a bare-metal cluster failed: the cluster cannot be whole, so its other members are deleted
    (undeploy, cleaning, an exit receipt each; their creates still running are cancelled) and the cluster is left
    in `error` with the member's reason (docs/adr/1214-bare-metal-in-leases-and-clusters.md). Nothing of the
    cluster then holds a host or a partition member; the tenant deletes the cluster to remove it."""
    from apps.compute.services.clusters import cluster_member_settled
    from apps.compute.services.instances import instance_delete

    siblings = Instance.objects.filter(cluster_id=inst.cluster_id).exclude(pk=inst.pk).exclude(
        status__in=(InstanceStatus.DELETING, InstanceStatus.DELETED)).order_by("name")
    for sibling in siblings:  # before the cluster's lock: a sibling's step takes it after its own rows
        instance_delete(actor=None, instance=sibling)
    cluster_member_settled(_cluster_locked(inst))


def create_failed(op, code: str, detail: str) -> None:
    """on_error of create: the instance goes to `error`, its allocation ends at once (nothing of the host is
    held for it), and when a node was touched its host leaves placement and `baremetal.node.recover` takes the
    node back to `available` (deploy failed → undeploy → cleaning → available), then returns the host."""
    inst = _instance(op)
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED):
        return
    transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})
    node = _instance_node(inst)
    instance_allocations_release(instance=inst)
    _networks_detach(op, inst)
    if node is not None and op.state.get("node"):
        nodesvc.node_hold(node=node, reason=f"recovering after a failed deploy ({code})")
        nodesvc.node_recover_start(node=node, reason=f"deploy of instance {inst.pk} failed: {code}")
    if inst.cluster_id is not None:
        _cluster_take_down(inst)


def reboot(op) -> None:
    inst = _instance(op)
    node = _instance_node(inst)
    seen = baremetal_driver().set_power(node.ironic_id, PowerAction.REBOOT)
    nodesvc.node_observe(node, seen)
    _observe_instance(inst, str(seen.state.power))
    transition(inst, "rebooted", INSTANCE_TRANSITIONS)


def power_off(op) -> None:
    inst = _instance(op)
    node = _instance_node(inst)
    seen = baremetal_driver().set_power(node.ironic_id, PowerAction.OFF)
    nodesvc.node_observe(node, seen)
    _observe_instance(inst, str(seen.state.power))
    transition(inst, "stopped", INSTANCE_TRANSITIONS)


def power_on(op) -> None:
    inst = _instance(op)
    node = _instance_node(inst)
    seen = baremetal_driver().set_power(node.ironic_id, PowerAction.ON)
    nodesvc.node_observe(node, seen)
    _observe_instance(inst, str(seen.state.power))
    transition(inst, "started", INSTANCE_TRANSITIONS)


def rebuild(op) -> None:
    """Ask Ironic to redeploy with a new config drive (once: `rebuild_requested` in the operation's state)."""
    inst = _instance(op)
    node = _instance_node(inst)
    if not op.state.get("rebuild_requested"):
        seen = baremetal_driver().rebuild(node.ironic_id, _deploy_request(inst, node), wait=False)
        nodesvc.node_observe(node, seen)
        op.state["rebuild_requested"] = now().isoformat()


def wait_rebuilt(op) -> None:
    _wait_active(op, "rebuilt")


def action_failed(op, code: str, detail: str) -> None:
    inst = _instance(op)
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DELETED):
        return
    transition(inst, "fail", INSTANCE_TRANSITIONS, extra={"error_code": code[:64], "error_reason": detail[:1000]})


def _history(drv, ironic_id: str):
    """The node's history from the provisioning service; None when it keeps none (a transient error raises)."""
    try:
        return drv.history(ironic_id)
    except DriverTransientError:
        raise
    except DriverError:
        return None


def _cleaning(op, node: BaremetalNode, seen) -> dict:
    """What Ironic did about cleaning after this undeploy, read back from its node history (receipts)."""
    return receipts.cleaning_evidence(node=node, seen=seen, events=_history(baremetal_driver(), node.ironic_id),
                                      mark=op.state.get("history_mark"))


def undeploy(op):
    """Tear the instance down, in two commits so a worker killed in between loses nothing: first the intent
    (`undeploy_started_at`, where the node's history stood: `history_mark`), the end of the instance's allocation (the tenant stops paying: cleaning is not
    billed) and the host to `maintenance` (nobody is placed on it before cleaning finished); then the request to
    Ironic, sent only while the node still carries the instance (a retry after it was sent finds it cleaning).
    A node still `deploying` (a delete right after the create) is waited for: Ironic refuses an undeploy there."""
    inst = _instance(op)
    node = _instance_node(inst)
    if node is None:
        return None
    drv = baremetal_driver()
    seen = drv.get(node.ironic_id)
    carries = seen.instance_id == str(inst.pk) and seen.state.provision in (
        P.ACTIVE, P.DEPLOY_FAILED, P.ERROR, P.DEPLOYING, P.DEPLOY_WAIT)
    if "undeploy_started_at" not in op.state:
        if not carries:  # nothing of this instance on the node (a create that failed and was recovered, or that
            # never deployed): a host taken out for it at its lease's end (`capacity_released`) comes back
            nodesvc.node_observe(node, seen)
            if seen.state.provision == P.AVAILABLE and not seen.instance_id and not node.held_reason \
                    and not seen.state.maintenance:
                nodesvc.node_return_to_service(node=node, reason="bare-metal node available")
            return None
        op.state["undeploy_started_at"] = now().isoformat()
        op.state["undeploy_from"] = str(seen.state.provision)
        op.state["history_mark"] = receipts.history_mark(_history(drv, node.ironic_id))
        instance_allocations_release(instance=inst)
        nodesvc.node_cleaning(node=node, reason=f"bare-metal cleaning after instance {inst.pk}")
        return AGAIN
    if carries and seen.state.provision == P.DEPLOYING:
        # Ironic refuses an undeploy while a deploy step runs (it takes one from `wait call-back`, `active` or a
        # failed deploy): wait for the step to end rather than fail the tenant's delete
        raise StepWait(conf.deploy_poll_s(), "node is deploying; undeploy once the deploy step ends")
    if carries:
        seen = drv.undeploy(node.ironic_id, wait=False)
    nodesvc.node_observe(node, seen)
    return None


def wait_cleaned(op) -> None:
    """Wait for `available` (undeploy → cleaning → available). What cleaning did is read back from Ironic (its
    node history after `history_mark`) for the receipt, never inferred from `available`. A `clean failed` node is
    held for staff (never handed to the next tenant) and the receipt says cleaning failed; the tenant's delete
    completes. The host returns to service only after the erase read-back and the GPU checks
    (`return_to_service`)."""
    inst = _instance(op)
    node = _instance_node(inst)
    if node is None or "undeploy_started_at" not in op.state:
        return
    seen = baremetal_driver().get(node.ironic_id)
    if seen.state.provision == P.CLEAN_FAILED:
        nodesvc.node_observe(node, seen)
        op.state["cleaning"] = _cleaning(op, node, seen)
        nodesvc.node_hold(node=node, reason=f"cleaning failed: {seen.state.last_error}"[:1000])
        return
    if seen.state.provision != P.AVAILABLE or seen.state.target_provision is not None or seen.instance_id:
        if _cleaning_overdue(op):
            _cleaning_given_up(op, node, seen)
            return
        raise StepWait(conf.deploy_poll_s(), f"node is {seen.state.provision}")
    nodesvc.node_observe(node, seen)
    op.state["cleaning"] = _cleaning(op, node, seen)


def _cleaning_overdue(op) -> bool:
    import datetime as dt

    started = dt.datetime.fromisoformat(op.state["undeploy_started_at"])
    return (now() - started).total_seconds() > conf.clean_timeout_s()


def _cleaning_given_up(op, node: BaremetalNode, seen) -> None:
    """Cleaning still runs `BAREMETAL_CLEAN_TIMEOUT_S` after the undeploy: the node is held with the reason (its
    host stays in maintenance, never placed; staff see `held_reason` and take the documented recovery once Ironic
    settles), the disk is not read back nor the GPUs checked under a running clean, and the receipt says so."""
    nodesvc.node_observe(node, seen)
    limit = f"{conf.clean_timeout_s():.0f} s"
    op.state["cleaning"] = {
        "result": "unknown", "how": f"unverified: cleaning had not finished {limit} after the undeploy",
        "started_at": op.state["undeploy_started_at"], "finished_at": None, "observed_at": now().isoformat(),
        "detail": f"Ironic: {seen.state.provision}" + (f", {seen.state.last_error}" if seen.state.last_error else "")}
    reason = f"cleaning did not finish within {limit}"
    op.state["erase_read_back"] = _skipped(reason)
    op.state["gpu_reset"] = op.state["gpu_validation"] = _skipped(reason)
    nodesvc.node_hold(node=node, reason=f"bare-metal: {reason} (Ironic: {seen.state.provision})"[:1000])


def _skipped(reason: str) -> dict:
    return {"result": "not_run", "how": f"skipped: {reason}", "started_at": None, "finished_at": None, "detail": ""}


def erase_read_back(op) -> None:
    """Read sample blocks of the node's disk back after cleaning (`services.erase`): all zeros → `succeeded`;
    data left (an erase that reported success but did not erase, or cleaning that wiped only metadata) → `failed`
    and the node is held. The disk is read where this deployment can reach it: the disk image of a VM-backed node
    (`BAREMETAL_DISK_IMAGES`, a QEMU VM behind a Redfish emulator); otherwise the step is recorded as skipped with
    the reason, never as done. Result in `op.state["erase_read_back"]` (once)."""
    from .drivers.disk import QemuImageDisk
    from .services import erase

    inst = _instance(op)
    node = _instance_node(inst)
    if node is None or "undeploy_started_at" not in op.state or "erase_read_back" in op.state:
        return
    image = conf.disk_images().get(node.host.name)
    if image:
        check = erase.erase_read_back(QemuImageDisk(image), where=f"the disk of {node.host.name}")
    elif node.driver == receipts.FAKE:
        check = _skipped("fake-hardware has no disks")
    else:
        check = _skipped("this deployment has no way to read the node's disks back (BAREMETAL_DISK_IMAGES names "
                         "the disk images of VM-backed nodes; real servers' disks are not read back in this version)")
    op.state["erase_read_back"] = check
    if check["result"] == "failed":
        nodesvc.node_hold(node=node, reason=f"bare-metal: erase read-back failed: {check['detail']}"[:1000])


def gpu_checks(op):
    """GPU reset and GPU validation on the host after cleaning, by its node agent, with the mechanisms VM hosts
    use: the GPU scrub (`gpus_scrub`: `reset_gpu` and its health check per GPU, ADR 0501) and the return-to-service
    check (`run_diagnostics`, passed by health's `check_passed`: the tool said pass and logged no error, ADR 0213).
    Queued once (`op.state["gpu_commands"]`, committed before the wait), then waited for up to
    `BAREMETAL_GPU_CHECK_S`. Recorded in `op.state["gpu_reset"]` and `["gpu_validation"]`: `executed` with the
    agent's results when it ran; a reset that failed or a check that did not pass → `failed` and the node held; no
    report in time → `unknown` / `unverified` and the node held. Skipped, with the reason, on fake-hardware (no
    server behind the node) and on a host with no node agent enrolled."""
    import datetime as dt

    from apps.health.services.repair import check_passed
    from apps.inventory.models import AgentCommand, AgentCredential
    from apps.inventory.services.agent import agent_command_enqueue
    from apps.inventory.services.scrub import gpus_scrub
    from apps.inventory.states import CommandKind, CommandStatus

    inst = _instance(op)
    node = _instance_node(inst)
    if node is None or "undeploy_started_at" not in op.state or "gpu_validation" in op.state:
        return None
    host = node.host
    indexes = sorted(host.gpus.values_list("index", flat=True))
    reason = ("fake-hardware has no server behind the node, so no node agent runs on it" if node.driver == receipts.FAKE
              else "no node agent is enrolled on this host" if not AgentCredential.objects.filter(
                  host=host, revoked_at__isnull=True).exists()
              else "the host has no GPUs in inventory" if not indexes else "")
    if reason:
        op.state["gpu_reset"] = op.state["gpu_validation"] = _skipped(reason)
        return None
    if "gpu_commands" not in op.state:
        names = gpus_scrub(actor=None, host=host, gpu_indexes=indexes,
                           reason=f"bare-metal instance {inst.pk} left the host")
        diag = agent_command_enqueue(actor=None, host=host, kind=CommandKind.RUN_DIAGNOSTICS,
                                     payload={"gpu_indexes": indexes, "level": 2}, ledger_guard=False)
        op.state["gpu_commands"] = {"resets": {k: str(v) for k, v in names.items() if k.startswith("reset_")},
                                    "diagnostics": str(diag.pk), "queued_at": now().isoformat()}
        return AGAIN  # the commands are committed before the agent is waited for
    queued = op.state["gpu_commands"]
    cmds = {str(c.pk): c for c in AgentCommand.objects.filter(
        pk__in=[*queued["resets"].values(), queued["diagnostics"]])}
    done = (CommandStatus.SUCCEEDED, CommandStatus.FAILED)
    late = (now() - dt.datetime.fromisoformat(queued["queued_at"])).total_seconds() > conf.gpu_check_s()
    if any(c.status not in done for c in cmds.values()) and not late:
        raise StepWait(conf.deploy_poll_s(), "waiting for the node agent's GPU reset and validation")
    finished = now().isoformat()

    def record(cs: list, ok, detail: str) -> dict:
        if any(c.status not in done for c in cs):
            return {"result": "unknown", "started_at": queued["queued_at"], "finished_at": None,
                    "how": f"unverified: the node agent did not report within {conf.gpu_check_s():.0f} s",
                    "detail": detail}
        return {"result": "succeeded" if all(ok(c) for c in cs) else "failed", "how": "executed",
                "started_at": queued["queued_at"], "finished_at": finished, "detail": detail}

    resets = [cmds[i] for _, i in sorted(queued["resets"].items())]
    op.state["gpu_reset"] = record(
        resets, lambda c: c.status == CommandStatus.SUCCEEDED and c.result.get("health") == "ok",
        "; ".join(f"GPU {c.payload.get('gpu_index')}: {c.status}, health {c.result.get('health') or c.error or '-'}"
                  for c in resets))
    diag = cmds[queued["diagnostics"]]
    op.state["gpu_validation"] = record(
        [diag], check_passed, f"{diag.result.get('tool') or 'diagnostics'} {diag.result.get('tool_version', '')}: "
        f"{diag.result.get('result') or diag.status}" + (f", errors: {'; '.join(diag.result['errors'])}"
                                                          if diag.result.get("errors") else "") + (
            f" ({diag.error})" if diag.error else ""))
    bad = [k for k in ("gpu_reset", "gpu_validation") if op.state[k]["result"] != "succeeded"]
    if bad:
        nodesvc.node_hold(node=node, reason=f"bare-metal: {' and '.join(bad)} after the tenant did not pass")
    return None


def return_to_service(op) -> None:
    """The host back to placement once cleaning, the erase read-back and the GPU checks passed (a node any of
    them held stays out for staff)."""
    inst = _instance(op)
    node = _instance_node(inst)
    if node is None or "undeploy_started_at" not in op.state:
        return
    node.refresh_from_db(fields=["held_reason"])
    if not node.held_reason and node.provision_state == P.AVAILABLE:
        nodesvc.node_return_to_service(node=node, reason="bare-metal node cleaned and available")


def capacity_released(inst: Instance, *, reason: str) -> None:
    """Compute's hook when someone else released the instance's capacity (its lease ended or was cancelled) while
    the instance stays until its delete runs (`apps.reservations` asks that delete in the same transaction): the
    host leaves placement at once (`maintenance`, "bare-metal cleaning ..."), so nobody is placed on a host that
    still carries the tenant's image before the undeploy, cleaning and checks finished (`return_to_service`)."""
    node = _instance_node(inst)
    if node is not None:
        nodesvc.node_cleaning(node=node, reason=f"bare-metal cleaning after instance {inst.pk}: {reason}")


def _networks_detach(op, inst: Instance) -> None:
    """Leave the instance's networks, keeping in the operation's state what left (for the receipt): the
    InfiniBand members (`pkey_members_removed`: partition, P_Key, GUID, fabric) and when (`networks_detached_at`).
    Idempotent: a retry finds nothing left to remove and keeps the first record."""
    from apps.compute.services.networks import instance_networks_detach
    from apps.networking.models import IbPartitionMember

    if "networks_detached_at" not in op.state:
        op.state["pkey_members_removed"] = [
            {"partition": str(m.partition_id), "pkey": f"{m.partition.pkey:#06x}", "guid": m.guid,
             "fabric": m.partition.fabric.name}
            for m in IbPartitionMember.objects.filter(instance_id=inst.pk).select_related("partition__fabric")
            .order_by("partition__pkey", "guid")]
    instance_networks_detach(actor=None, instance_id=inst.pk)
    op.state.setdefault("networks_detached_at", now().isoformat())


def detach_networks(op) -> None:
    """Right after the undeploy (the tenant's OS is gone), before the host can return to service: its HCA GUIDs
    leave the tenant's partitions (the fabric's reconcile is scheduled on commit), its ports are removed."""
    inst = _instance(op)
    op.state["had_networks"] = bool(inst.network)
    _networks_detach(op, inst)


def verify_fabric(op) -> None:
    """Wait until each InfiniBand fabric the host's GUIDs left has been reconciled after they left: its subnet
    manager applied (and, for OpenSM, read back on a sample of ports) a partitions file without them
    (networking's `FabricSyncState` for ``ib:<fabric>``, `last_ok_at` after `networks_detached_at`). A fabric
    with no subnet manager configured cannot be checked: recorded as unverified. One that is not applied within
    `BAREMETAL_FABRIC_VERIFY_S` is recorded as failed and the node is held (never handed to the next tenant
    while its GUIDs may still be in another tenant's partition). Result in `op.state["fabric"]` per fabric."""
    import datetime as dt

    from apps.networking import conf as netconf
    from apps.networking.models import FabricSyncState

    removed = op.state.get("pkey_members_removed") or []
    fabrics = sorted({m["fabric"] for m in removed})
    if not fabrics or "fabric" in op.state:
        return
    detached = dt.datetime.fromisoformat(op.state["networks_detached_at"])
    configured = netconf.ib_fabrics()
    out, waiting = {}, []
    for name in fabrics:
        if name not in configured:
            out[name] = {"result": "unknown", "how": f"unverified: fabric {name} has no subnet manager configured "
                         "(NETWORKING_IB_FABRICS)", "at": None}
            continue
        state = FabricSyncState.objects.filter(key=f"ib:{name}").first()
        if state is not None and state.last_ok_at is not None and state.last_ok_at >= detached:
            out[name] = {"result": "succeeded", "how": "executed", "at": state.last_ok_at.isoformat()}
        elif (now() - detached).total_seconds() > conf.fabric_verify_s():
            out[name] = {"result": "failed", "how": "executed", "at": None,
                         "detail": f"not applied within {conf.fabric_verify_s():.0f} s: "
                                   f"{(state.last_error if state else '') or 'no reconcile ran'}"[:500]}
        else:
            waiting.append(name)
    if waiting:
        raise StepWait(conf.deploy_poll_s(), f"waiting for the subnet manager of {', '.join(waiting)}")
    op.state["fabric"] = out
    if any(v["result"] == "failed" for v in out.values()):
        inst = _instance(op)
        node = _instance_node(inst)
        if node is not None:
            nodesvc.node_hold(node=node, reason="bare-metal: P_Key removal not applied by the subnet manager of "
                              + ", ".join(k for k, v in out.items() if v["result"] == "failed"))


def sign_receipt(op) -> None:
    inst = _instance(op)
    node = _instance_node(inst)
    if node is not None and "undeploy_started_at" in op.state:
        if "how" not in op.state.get("cleaning", {}):  # cleaned before its evidence was kept: read it now
            op.state["cleaning"] = _cleaning(op, node, baremetal_driver().get(node.ironic_id))
        receipts.receipt_issue(instance=inst, node=node, operation=op)


def clean_start(op) -> None:
    """The tenant's part is done (undeployed, networks left and verified): the host's own work - cleaning, the
    erase read-back, the GPU checks, the return to service and the receipt - goes on as `baremetal.node.clean`
    (target the node, no project: staff's), with the delete's record in its state and a deadline sized for
    cleaning (`BAREMETAL_CLEAN_TIMEOUT_S` + `BAREMETAL_GPU_CHECK_S` + an hour for the rest). Started once, in this
    step's transaction (`op.state["clean_operation"]`). A delete with nothing on the node (never deployed) has no
    cleaning to follow."""
    import datetime as dt

    from apps.operations.runner import operation_deadline_set, operation_start

    inst = _instance(op)
    node = _instance_node(inst)
    if node is None or "undeploy_started_at" not in op.state or "clean_operation" in op.state:
        return
    clean = operation_start(kind=CLEAN, target_type=nodesvc.TARGET, target_id=node.pk, request_id=op.request_id,
                            state={**op.state, "instance_id": str(inst.pk), "parent_operation": str(op.pk)})
    operation_deadline_set(operation=clean, deadline_at=now() + dt.timedelta(
        seconds=conf.clean_timeout_s() + conf.gpu_check_s() + 3600.0))
    op.state["clean_operation"] = str(clean.pk)


def _host_work(fn):
    """A step of the host's cleaning: run by `baremetal.node.clean`; in a delete only when that delete started
    before the cleaning became its own operation (no `clean_operation` in its state)."""
    def step(op):
        if op.kind == KINDS[DELETE] and "clean_operation" in op.state:
            return None
        return fn(op)

    step.__name__, step.__doc__ = fn.__name__, fn.__doc__
    return step


def clean_failed(op, code: str, detail: str) -> None:
    """on_error of `baremetal.node.clean` (its deadline passed, or a terminal driver error): the node is held with
    the reason (its host stays in maintenance for staff) and the tenant's receipt is signed with what was recorded
    (steps not done read `not_run` / `unknown`), so it never stays pending."""
    inst = _instance(op)
    node = BaremetalNode.objects.select_for_update().select_related("host").get(pk=op.target_id)
    nodesvc.node_hold(node=node, reason=f"bare-metal: cleaning after instance {inst.pk} failed: {code}: {detail}")
    receipts.receipt_issue(instance=inst, node=node, operation=op)


def release_allocations(op) -> None:
    """The instance is deleted (its allocations end, if the undeploy did not end them); a cluster whose last member
    this was is deleted too (`cluster_finish_if_empty`)."""
    from apps.compute.services.clusters import cluster_finish_if_empty

    inst = _instance(op)
    instance_allocations_release(instance=inst)
    transition(inst, "deleted", INSTANCE_TRANSITIONS, extra={"deleted_at": now()})
    if inst.cluster_id is not None:
        cluster_finish_if_empty(_cluster_locked(inst))


def delete_failed(op, code: str, detail: str) -> None:
    inst = _instance(op)
    if inst.status == InstanceStatus.DELETING:
        transition(inst, "fail", INSTANCE_TRANSITIONS,
                   extra={"error_code": code[:64], "error_reason": f"delete failed: {detail}"[:1000]})


def register() -> None:
    from apps.compute.services.instances import register_provisioner

    register_provisioner(KIND, KINDS, ready=baremetal_service_require, capacity_released=capacity_released)
    wf.register(wf.Workflow(kind=KINDS[CREATE], steps=(
        ("place_and_claim", place_and_claim), ("attach_networks", attach_networks), ("deploy", deploy),
        ("wait_active", wait_active)),
        on_error=create_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))
    host_work = (("wait_cleaned", wait_cleaned), ("erase_read_back", erase_read_back), ("gpu_checks", gpu_checks),
                 ("return_to_service", return_to_service), ("sign_receipt", sign_receipt))
    wf.register(wf.Workflow(kind=KINDS[DELETE], steps=(
        ("undeploy", undeploy), ("detach_networks", detach_networks), ("verify_fabric", verify_fabric),
        ("clean_start", clean_start), *((name, _host_work(fn)) for name, fn in host_work),
        ("release_allocations", release_allocations)),
        on_error=delete_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))
    # its deadline is set at its start from the settings (`clean_start`); this is only the registry's default
    wf.register(wf.Workflow(kind=CLEAN, steps=host_work, on_error=clean_failed, deadline_seconds=6 * 3600.0,
                            max_backoff_seconds=30.0))
    wf.register(wf.Workflow(kind=KINDS[REBOOT], steps=(("reboot", reboot),), on_error=action_failed,
                            deadline_seconds=600.0))
    wf.register(wf.Workflow(kind=KINDS[STOP], steps=(("power_off", power_off),), on_error=action_failed,
                            deadline_seconds=600.0))
    wf.register(wf.Workflow(kind=KINDS[START], steps=(("power_on", power_on),), on_error=action_failed,
                            deadline_seconds=600.0))
    wf.register(wf.Workflow(kind=KINDS[REBUILD], steps=(("rebuild", rebuild), ("wait_rebuilt", wait_rebuilt)),
                            on_error=action_failed, deadline_seconds=3600.0, max_backoff_seconds=30.0))


__all__ = ["operation_kind", "register"]
