"""GPU devices of an instance: what the create workflow prepares on the host and the delete workflow releases.

Recorded in `Instance.devices` (JSON), written in the step's transaction:
  placement    the placement engine's host choice (`HostChoice.as_dict()`: resources, gpu_index, mig_start, ...)
  numa_node    host NUMA node of the first GPU (kept for instances made before `numa`)
  numa         the guest NUMA layout that follows the GPUs' host NUMA nodes (`apps.compute.services.numa`)
  pci          whole-GPU PCI addresses (hostdev passthrough)
  partition    NVSwitch partition id (HGX, shared NVSwitch multitenancy), activated through the agent
  gpu_instance {gpu_index, start, profile}: the MIG GPU instance the agent creates at the planner's start slice
  vfs          [{address, vgpu_type, gpu_index}]: SR-IOV VFs (vGPU on NVIDIA's vendor VFIO driver, Ada and
               Hopper+), each given its vGPU type by the agent (`set_vf_vgpu_type`) before define
  mdevs        [{uuid, mdev_type, parent, gpu_instance_start}]: mediated devices (vGPU on mdev drivers)
  hca          PCI addresses of the HCA physical functions passed through for RDMA (an instance that takes its
               whole host and joined an InfiniBand partition with the host's port GUIDs)
  hca_vfs      [{address, device, vf_index, guid, rail}]: the HCA SR-IOV VFs passed through for RDMA (a VM that
               shares its host and joined a partition with virtual GUIDs), one per virtual GUID it holds, each
               given its GUID by the agent (`set_hca_vf_guid`) before define and cleared by the scrub. This is the
               record of which VF an instance holds (`vfs_held`), as `vfs` is for a GPU's VFs.
  agent        {name: command id} of commands to finish before define; `agent_release` the GPU scrub's commands
  scrub_queued_at  when the scrub of the instance's GPUs was queued (set once, by `devices_scrub`)

Which vGPU mechanism a GPU uses is the catalog's `vgpu_backing` (`mdev` | `sriov_vf`); a MIG flavor gets the
catalog's MIG-backed vGPU type for its profile (NVIDIA vGPU software user guide, "MIG-backed vGPU").
"""
from __future__ import annotations

import uuid

from apps.core.clock import now
from apps.core.drivers import DriverError
from apps.core.errors import DomainError
from apps.inventory.catalog import gpu_model_get
from apps.inventory.models import Gpu, GpuInstance, HcaPort, Host, VirtualFunction
from apps.inventory.numa import guest_numa_shortfall, node_caps
from apps.inventory.services.agent import agent_command_enqueue
from apps.inventory.services.scrub import gpus_hold_dirty, gpus_scrub
from apps.inventory.states import CommandKind, CommandStatus, HostState, VgpuTypeKind

from ..drivers.base import MdevHostdev, PowerState
from ..models import Instance
from ..states import GpuForm, InstanceStatus
from .numa import guest_numa

GPU_CLASSES = ("gpu", "mig", "vgpu", "share")


def _save(inst: Instance, d: dict) -> None:
    inst.devices = d
    Instance.objects.filter(pk=inst.pk).update(devices=d)


def _enqueue(inst: Instance, d: dict, bucket: str, name: str, kind: str, payload: dict) -> None:
    if name in d.setdefault(bucket, {}):
        return
    cmd = agent_command_enqueue(actor=None, host=inst.host, kind=kind, payload=payload,
                                ledger_guard=False)  # the GPU instance of its own claim
    d[bucket][name] = str(cmd.pk)


def mig_vgpu_type(model: str, profile: str) -> str:
    """The catalog's MIG-backed vGPU type for `profile` on `model` ('' when the catalog has none)."""
    spec = gpu_model_get(model)
    if spec is None or spec.mig is None:
        return ""
    prof = spec.mig.profile(profile)
    for t in spec.vgpu_types:
        if t.kind == VgpuTypeKind.MIG_BACKED and prof is not None and t.mig_profile == prof.id:
            return t.name
    return ""


def vfs_held(*, host_id, addresses=None, exclude_instance=None) -> dict[str, list[str]]:
    """{VF PCI address: [instance id]} of the SR-IOV VFs (a GPU's, `devices.vfs`, or an HCA's, `devices.hca_vfs`)
    that instances on host `host_id` not deleted hold; only `addresses` when given. A deleted instance's VF is free
    (its scrub, queued before, runs on the agent before any later command of the host)."""
    qs = Instance.objects.filter(host_id=host_id).exclude(status=InstanceStatus.DELETED)
    if exclude_instance is not None:
        qs = qs.exclude(pk=exclude_instance)
    wanted = None if addresses is None else set(addresses)
    out: dict[str, list[str]] = {}
    for pk, devs in qs.values_list("pk", "devices"):
        for v in (devs or {}).get("vfs", []) + (devs or {}).get("hca_vfs", []):
            if wanted is None or v["address"] in wanted:
                out.setdefault(v["address"], []).append(str(pk))
    return out


def _vgpu(inst: Instance, d: dict, gpu: Gpu, vgpu_type: str, gi_start: int | None) -> None:
    spec = gpu_model_get(gpu.model)
    backing = spec.vgpu_backing if spec else ""
    if backing == "sriov_vf":
        if d.get("vfs"):  # chosen already: (again, on a start) the agent gives it its type before the VM runs
            vf = d["vfs"][0]
            _enqueue(inst, d, "agent", "vf_vgpu_type", CommandKind.SET_VF_VGPU_TYPE,
                     {"gpu_index": vf["gpu_index"], "vf_address": vf["address"], "vgpu_type": vf["vgpu_type"]})
            return
        Gpu.objects.select_for_update().filter(pk=gpu.pk).first()  # serialise VF choice per GPU
        used = set(vfs_held(host_id=inst.host_id, exclude_instance=inst.pk))
        vf = (VirtualFunction.objects.filter(gpu=gpu).exclude(pci_address="").exclude(pci_address__in=used)
              .order_by("index").first())
        if vf is None:
            raise DriverError(f"GPU {gpu.index} on {inst.host.name} has no free SR-IOV VF in inventory",
                              code="no_free_vf")
        d["vfs"] = [{"address": vf.pci_address, "vgpu_type": vgpu_type, "gpu_index": gpu.index}]
        # the VF gets its vGPU type from the agent before the VM is defined (after the MIG GPU instance, queued
        # first); the scrub's `reset_vf` clears it on release
        _enqueue(inst, d, "agent", "vf_vgpu_type", CommandKind.SET_VF_VGPU_TYPE,
                 {"gpu_index": gpu.index, "vf_address": vf.pci_address, "vgpu_type": vgpu_type})
    elif backing == "mdev":
        mdev_uuid = str(uuid.uuid5(inst.pk, f"mdev-{gpu.index}"))
        d["mdevs"] = [{"uuid": mdev_uuid, "vgpu_type": vgpu_type, "mdev_type": "", "parent": gpu.pci_address,
                       "gpu_instance_start": gi_start}]
    else:
        raise DriverError(f"GPU model {gpu.model} has no vGPU backing in the catalog", code="vgpu_unsupported")


def _devices_again(inst: Instance, d: dict, op_id: str) -> None:
    """A start (once per start operation): the host may have rebooted since the devices were made, and neither a
    VF's vGPU type nor a MIG GPU instance survives that. The VF's type is queued again (the agent leaves a VF that
    has it as it is), and the restore of the GPU's recorded MIG layout, when one is pending, is waited for: the VM
    starts with its devices or the start fails naming the command (`agent_command_failed`), never without them. A
    GPU whose restore failed and is not queued again yet fails the start at once (`gpu_instance_missing`)."""
    from apps.inventory.models import AgentCommand

    if d.get("started_by") == op_id:
        return
    d["started_by"] = op_id
    agent = d.setdefault("agent", {})
    agent.pop("vf_vgpu_type", None)
    agent.pop("mig_restore", None)
    for name in [n for n in agent if n.startswith("hca_vf_guid:")]:
        agent.pop(name)  # the VF's GUID does not survive a reboot of the host: set again before the VM runs
    _hca_vf_guids(inst, d)
    gi = d.get("gpu_instance")
    if gi:
        restore = (AgentCommand.objects.filter(host_id=inst.host_id, gpu__index=gi["gpu_index"],
                                               kind=CommandKind.APPLY_MIG_LAYOUT,
                                               status__in=[CommandStatus.QUEUED, CommandStatus.DISPATCHED])
                   .order_by("created_at").values_list("pk", flat=True).first())
        if restore is not None:
            agent["mig_restore"] = str(restore)
        elif Gpu.objects.filter(host_id=inst.host_id, index=gi["gpu_index"],
                                observed__mig_restore_pending=True).exists():
            raise DriverError(f"GPU {gi['gpu_index']} on {inst.host.name} has not got its MIG GPU instances back "
                              "(the restore of its recorded layout failed; the agent's next inventory report "
                              "queues it again)", code="gpu_instance_missing")


def _hca(inst: Instance, d: dict) -> None:
    """RDMA inside the VM: an instance whose InfiniBand partition membership is its host's physical port GUIDs
    (it takes the whole host: `networks.ib_partition_join_whole_host`) gets those ports' HCA physical functions as
    PCI hostdevs, one per rail it joined, so the guest's mlx5 driver sees the same GUIDs the partition holds.
    `DriverError` `hca_pci_address_unknown` when the inventory has no PCI address for such a port (the VM would
    boot without the RDMA it asked for). A VM that shares its host joins with SR-IOV VF virtual GUIDs and gets
    those VFs instead (`_hca_vfs`, ADR 0508)."""
    from apps.networking.models import IbPartitionMember

    if not (inst.network or {}).get("ib_partition") or "hca" in d:
        return
    ports = [m.hca_port for m in IbPartitionMember.objects.filter(instance_id=inst.pk, hca_port__isnull=False)
             .select_related("hca_port").order_by("hca_port__rail", "hca_port__device", "hca_port__port_number")]
    missing = [f"{p.device}/{p.port_number}" for p in ports if not p.pci_address]
    if missing:
        raise DriverError(f"HCA port(s) {', '.join(missing)} on {inst.host.name} have no PCI address in the "
                          "inventory (fleet file hca_ports[].pci_address)", code="hca_pci_address_unknown")
    d["hca"] = list(dict.fromkeys(p.pci_address for p in ports))


def _hca_vfs(inst: Instance, d: dict) -> None:
    """RDMA inside a VM that shares its host: for each virtual GUID the instance holds in its InfiniBand partition
    (`networks.ib_partition_join_vf`: one per rail of its GPUs, on ports NUMA-near them) a free SR-IOV VF of that
    GUID's HCA port in inventory, recorded in `hca_vfs` in rail order, and a `set_hca_vf_guid` agent command that
    gives the VF the GUID as node and port GUID before the domain is defined (ADR 0508). The VFs are chosen under
    a lock of their ports, against every live instance's VFs on the host (`vfs_held`). `DriverError`
    `no_free_hca_vf` when a port has none left (placement counted them, so only a concurrent create gets there)."""
    from apps.networking.models import IbPartitionMember

    if not (inst.network or {}).get("ib_partition") or "hca_vfs" in d:
        return
    members = list(IbPartitionMember.objects.filter(instance_id=inst.pk, virtual_guid__isnull=False)
                   .select_related("virtual_guid__pool__hca_port")
                   .order_by("virtual_guid__pool__hca_port__rail", "virtual_guid__pool__hca_port__device"))
    if not members:
        return
    ports = sorted({m.virtual_guid.pool.hca_port_id for m in members}, key=str)
    list(HcaPort.objects.select_for_update().filter(pk__in=ports).order_by("pk"))  # serialise VF choice per port
    used = set(vfs_held(host_id=inst.host_id, exclude_instance=inst.pk))
    chosen = []
    for m in members:
        port = m.virtual_guid.pool.hca_port
        vf = (VirtualFunction.objects.filter(hca_port=port).exclude(pci_address="").exclude(pci_address__in=used)
              .order_by("index").first())
        if vf is None:
            raise DriverError(f"HCA {port.device} on {inst.host.name} has no free SR-IOV VF in inventory",
                              code="no_free_hca_vf")
        used.add(vf.pci_address)
        chosen.append({"address": vf.pci_address, "device": port.device, "vf_index": vf.index,
                       "guid": m.virtual_guid.guid, "rail": port.rail})
    d["hca_vfs"] = chosen
    _hca_vf_guids(inst, d)


def _hca_vf_guids(inst: Instance, d: dict) -> None:
    """Queue the agent's `set_hca_vf_guid` for each of the instance's HCA VFs (once per prepare; a VF that has the
    GUID already is written again with the same value, which the driver accepts)."""
    for v in d.get("hca_vfs", []):
        _enqueue(inst, d, "agent", f"hca_vf_guid:{v['device']}/{v['vf_index']}", CommandKind.SET_HCA_VF_GUID,
                 {"device": v["device"], "vf_index": v["vf_index"], "guid": v["guid"]})


def _numa(inst: Instance, d: dict) -> tuple[list[dict], list[Gpu]]:
    """Set `d`'s guest NUMA layout (`numa_node`, `numa`) for the instance's placed GPUs and its flavor's vCPUs and
    memory; returns the placement's GPU resources and their GPUs in that order."""
    resources = [r for r in d.get("placement", {}).get("resources", []) if r["resource_class"] in GPU_CLASSES]
    gpus = {str(g.pk): g for g in Gpu.objects.filter(pk__in=[r["gpu_id"] for r in resources])}
    ordered = [gpus[r["gpu_id"]] for r in resources]
    if ordered:
        d["numa_node"] = ordered[0].numa_node
        d["numa"] = guest_numa(host=inst.host, gpu_nodes=[g.numa_node for g in ordered], vcpus=inst.flavor.vcpus,
                               memory_mib=inst.flavor.memory_mib)
    return resources, ordered


def devices_numa_shortfall(instance: Instance, flavor) -> str:
    """Why `flavor`'s vCPUs and memory cannot have their guest NUMA nodes on the host nodes of the instance's placed
    GPUs ('' when they can, or without GPUs): the check placement makes for a create
    (`apps.inventory.numa.guest_numa_shortfall`), for a resize that keeps the GPUs (docs/adr/0510)."""
    resources = [r for r in (instance.devices or {}).get("placement", {}).get("resources", [])
                 if r["resource_class"] in GPU_CLASSES and r.get("gpu_id")]
    if not resources or instance.host is None:
        return ""
    nodes = dict(Gpu.objects.filter(pk__in=[r["gpu_id"] for r in resources]).values_list("pk", "numa_node"))
    gpu_nodes = [nodes[uuid.UUID(str(r["gpu_id"]))] for r in resources if uuid.UUID(str(r["gpu_id"])) in nodes]
    return guest_numa_shortfall(gpu_nodes, flavor.vcpus, flavor.memory_mib, node_caps(instance.host))


def devices_guest_nodes(instance: Instance) -> dict[str, int]:
    """{device: guest NUMA node} for the instance's host devices whose host NUMA node is one of its guest nodes'
    (`devices["numa"]["cells"][i]["host_node"]` -> node i): whole GPUs, HCA functions and VFs by PCI address,
    mdevs by UUID (their parent GPU's node). The domain puts each under its node's PCIe expander bus; a device on
    a node without guest node (an HCA on the other socket) is left out (the guest's root complex)."""
    d = instance.devices or {}
    cell_of = {c["host_node"]: i for i, c in enumerate((d.get("numa") or {}).get("cells", []))}
    if not cell_of or instance.host_id is None:
        return {}
    gpus = list(Gpu.objects.filter(host_id=instance.host_id).values_list("pci_address", "index", "numa_node"))
    node_of = {addr: node for addr, _i, node in gpus}
    node_of.update({v["address"]: node for v in d.get("vfs", []) for _a, i, node in gpus
                    if i == v.get("gpu_index")})
    node_of.update({m["uuid"]: node_of[m["parent"]] for m in d.get("mdevs", []) if m.get("parent") in node_of})
    if d.get("hca"):
        node_of.update(HcaPort.objects.filter(host_id=instance.host_id, pci_address__in=d["hca"])
                       .values_list("pci_address", "numa_node"))
    if d.get("hca_vfs"):  # an HCA VF sits on its physical function's node
        port_node = dict(HcaPort.objects.filter(host_id=instance.host_id, device__in=[v["device"] for v in d["hca_vfs"]])
                         .values_list("device", "numa_node"))
        node_of.update({v["address"]: port_node[v["device"]] for v in d["hca_vfs"] if v["device"] in port_node})
    return {dev: cell_of[node] for dev, node in node_of.items() if node in cell_of}


def devices_numa_refresh(instance: Instance) -> None:
    """After a resize: the guest NUMA layout again for the new flavor's vCPUs and memory on the same GPUs (the
    layout of the old flavor no longer adds up). Raises `DriverError` `numa_memory_exceeded` (terminal)."""
    d = dict(instance.devices or {})
    _numa(instance, d)
    if d != (instance.devices or {}):
        instance.devices = d
        Instance.objects.filter(pk=instance.pk).update(devices=d)


def devices_prepare(*, instance: Instance, driver, call, start_op_id: str | None = None) -> None:
    """Decide the instance's devices from its placement and queue the agent commands they need (MIG GPU
    instance, NVSwitch partition, a VF's vGPU type). Idempotent. With `start_op_id` (a start of a stopped
    instance) the commands a host reboot makes necessary again are queued or waited for (`_devices_again`).
    Raises `DriverError` (terminal) when a device cannot exist."""
    inst = instance
    d = dict(inst.devices or {})
    if start_op_id is not None:
        _devices_again(inst, d, start_op_id)
    resources, ordered = _numa(inst, d)
    _hca(inst, d)
    _hca_vfs(inst, d)
    form = inst.flavor.gpu_form
    if form == GpuForm.GPU:
        d["pci"] = [g.pci_address for g in ordered]
        part = d["placement"].get("nvswitch_partition")
        if part is not None:
            d["partition"] = part
            if part not in inst.host.active_partitions:
                _enqueue(inst, d, "agent", "partition_activate", CommandKind.ACTIVATE_PARTITION,
                         {"partition_id": part})
    elif form == GpuForm.MIG:
        gpu, start = ordered[0], resources[0]["slices"][0]
        d["gpu_instance"] = {"gpu_index": gpu.index, "start": start, "profile": inst.flavor.mig_profile}
        if not GpuInstance.objects.filter(gpu=gpu, start=start).exists():
            _enqueue(inst, d, "agent", "gpu_instance_create", CommandKind.CREATE_GPU_INSTANCE,
                     {"gpu_index": gpu.index, "profile": inst.flavor.mig_profile, "start": start})
        _vgpu(inst, d, gpu, mig_vgpu_type(gpu.model, inst.flavor.mig_profile), start)
    elif form == GpuForm.VGPU:
        _vgpu(inst, d, ordered[0], inst.flavor.vgpu_type, None)
    elif form == GpuForm.SHARE:
        raise DriverError("fractional GPU shares are not offered to VMs", code="share_not_supported_for_vm")
    _save(inst, d)


def mdevs_create(*, instance: Instance, driver, call) -> None:
    """Create the instance's mediated devices through libvirt's node-device API (after the MIG GPU instance
    exists). The mdev type id is looked up on the parent by the catalog's vGPU type name."""
    d = dict(instance.devices or {})
    changed = False
    for m in d.get("mdevs", []):
        if not m.get("mdev_type"):
            types = call(driver.mdev_types, m["parent"])
            match = [t for t in types if t.name.split()[-1] == m["vgpu_type"] or t.type_id == m["vgpu_type"]]
            if not match:
                raise DriverError(f"{m['parent']} offers no mdev type for vGPU {m['vgpu_type']}",
                                  code="mdev_type_unsupported")
            m["mdev_type"], changed = match[0].type_id, True
        call(driver.mdev_create, MdevHostdev(m["uuid"], m["mdev_type"], m["parent"], m.get("gpu_instance_start")))
    if changed:
        _save(instance, d)


def agent_commands_pending(inst: Instance, *, phase: str) -> list[str]:
    """Ids of the instance's agent commands of `phase` (prepare | release) not finished yet. A failed command
    raises `DriverError` (code `agent_command_failed`), which fails the operation."""
    from apps.inventory.models import AgentCommand

    bucket = "agent" if phase == "prepare" else "agent_release"
    ids = list((inst.devices or {}).get(bucket, {}).values())
    pending = []
    for cmd_id, status, error, kind in AgentCommand.objects.filter(pk__in=ids).values_list(
            "pk", "status", "error", "kind"):
        if status == CommandStatus.FAILED:
            raise DriverError(f"agent command {kind} failed: {error}", code="agent_command_failed")
        if status != CommandStatus.SUCCEEDED:
            pending.append(str(cmd_id))
    return pending


def _deactivation_pending(host: Host, partition_id: int) -> bool:
    from apps.inventory.models import AgentCommand

    return AgentCommand.objects.filter(host=host, kind=CommandKind.DEACTIVATE_PARTITION,
                                       payload__partition_id=partition_id,
                                       status__in=[CommandStatus.QUEUED, CommandStatus.DISPATCHED]).exists()


def partition_deactivate(inst: Instance) -> None:
    """Queue the NVSwitch partition's deactivation after the VM stopped (its GPUs stay allocated)."""
    d = dict(inst.devices or {})
    part = d.get("partition")
    if part is None or part not in inst.host.active_partitions or _deactivation_pending(inst.host, part):
        return
    d.get("agent", {}).pop("partition_activate", None)  # a later start activates it again
    cmd = agent_command_enqueue(actor=None, host=inst.host, kind=CommandKind.DEACTIVATE_PARTITION,
                                payload={"partition_id": part}, ledger_guard=False)  # its own stopped VM's
    d.setdefault("agent_stop", {})["partition_deactivate"] = str(cmd.pk)
    _save(inst, d)


def mdevs_delete(*, instance: Instance, driver) -> None:
    """Remove the instance's mediated devices through libvirt (idempotent; raises the driver's errors)."""
    for m in (instance.devices or {}).get("mdevs", []):
        driver.mdev_delete(m["uuid"])


def devices_scrub(instance: Instance, *, reason: str) -> dict[str, str]:
    """Start the scrub of every GPU the instance had (`apps.inventory.services.scrub.gpus_scrub`): its GPUs are
    `dirty` from this transaction on, so none is placed again before the agent reset its vGPUs' VFs, destroyed
    its MIG GPU instance, deactivated its NVSwitch partition and reset and health-checked its whole GPUs. Records the command ids in
    `devices.agent_release` and `devices.scrub_queued_at`; a second call queues nothing. Returns the commands
    {name: id}. Every release path calls it before the ledger release (delete, failed create, vanished
    domain, local delete, lease end)."""
    inst = instance
    d = dict(inst.devices or {})
    if inst.host_id is None or "scrub_queued_at" in d:
        return d.get("agent_release", {})
    by_addr = dict(Gpu.objects.filter(host_id=inst.host_id, pci_address__in=d.get("pci", []))
                   .values_list("pci_address", "index"))
    indexes = {by_addr[a] for a in d.get("pci", []) if a in by_addr}
    indexes |= {v["gpu_index"] for v in d.get("vfs", []) if "gpu_index" in v}
    gi = d.get("gpu_instance")
    gis = [(gi["gpu_index"], gi["start"])] if gi else []
    parts = [d["partition"]] if d.get("partition") is not None else []
    vfs = [(v["gpu_index"], v["address"]) for v in d.get("vfs", []) if "gpu_index" in v]
    names = gpus_scrub(actor=None, host=inst.host, gpu_indexes=indexes, gpu_instances=gis, partitions=parts,
                       vfs=vfs, reason=f"instance {inst.pk} released its devices: {reason}")
    for v in d.get("hca_vfs", []):  # the HCA VF's GUID is cleared (node/port GUID 0, port down) for the next VM
        cmd = agent_command_enqueue(actor=None, host=inst.host, kind=CommandKind.SET_HCA_VF_GUID,
                                    payload={"device": v["device"], "vf_index": v["vf_index"], "guid": "0x0"},
                                    ledger_guard=False)  # its own released VF
        names[f"hca_vf_clear:{v['device']}/{v['vf_index']}"] = str(cmd.pk)
    d["agent_release"] = {**d.get("agent_release", {}), **names}
    d["scrub_queued_at"] = now().isoformat()
    _save(inst, d)
    return names


def devices_hold(instance: Instance, *, reason: str) -> None:
    """Mark the instance's GPUs `dirty` without queuing anything yet: its capacity is released (a lease ended)
    while its VM still runs until the delete or stop that was just asked; that workflow queues the scrub."""
    d = instance.devices or {}
    if instance.host_id is None or "scrub_queued_at" in d:
        return
    indexes = {v["gpu_index"] for v in d.get("vfs", []) if "gpu_index" in v}
    if d.get("gpu_instance"):
        indexes.add(d["gpu_instance"]["gpu_index"])
    gpus_hold_dirty(actor=None, host=instance.host, gpu_indexes=indexes, pci_addresses=d.get("pci", []),
                    reason=f"instance {instance.pk}: {reason}")


def devices_capacity_released(instance: Instance, *, reason: str) -> None:
    """The instance's allocations were released by someone else (its lease ended or was cancelled) while the
    instance stays. Its VM known to be off (`stopped`, or `error` with its domain shut off or gone): the scrub is
    queued now. Any other (deleting, stopping, starting, rebooting, still being created, error with the domain
    possibly running): its GPUs are held dirty, since a reset under a running VM either fails or cleans a GPU a VM
    still uses; the delete or stop that turns the VM off queues the scrub (a start refuses to start it and its
    failure queues the scrub). A flavor kind with its own rule (bare metal: `register_provisioner`'s
    `capacity_released`) follows it instead."""
    from .instances import provisioner_capacity_released

    if instance.host_id is None or instance.status == InstanceStatus.DELETED:
        return
    if provisioner_capacity_released(instance, reason=reason):
        return
    off = instance.status == InstanceStatus.STOPPED or (
        instance.status == InstanceStatus.ERROR and instance.observed_state in (PowerState.SHUTOFF, PowerState.MISSING))
    if off:
        devices_scrub(instance, reason=reason)
    else:
        devices_hold(instance, reason=f"{reason}; waiting for its VM to be off ({instance.status})")


def devices_scrub_if_released(instance: Instance) -> None:
    """After a stop: when the instance no longer holds a GPU allocation (its lease ended while it ran, and
    `devices_hold` marked its GPUs dirty), queue the scrub now that the VM is off."""
    from apps.scheduling.selectors import allocation_list_for_consumer

    d = instance.devices or {}
    if instance.host_id is None or "scrub_queued_at" in d or not (d.get("pci") or d.get("gpu_instance")
                                                                   or d.get("vfs")):
        return
    if not allocation_list_for_consumer(instance.pk).filter(gpu__isnull=False).exists():
        devices_scrub(instance, reason="stopped after its capacity was released")


def devices_release(*, instance: Instance, driver, reason: str = "deleted") -> None:
    """Remove the instance's mdevs and start the scrub of its GPUs (`devices_scrub`). Idempotent."""
    mdevs_delete(instance=instance, driver=driver)
    devices_scrub(instance, reason=reason)


def host_cordon_unreachable(host: Host, detail: str) -> None:
    """Cordon a host whose libvirt did not answer, so new placements avoid it until a health check passes."""
    from apps.inventory.services.hosts import host_cordon

    if host.state != HostState.AVAILABLE:
        return
    try:
        host_cordon(actor=None, host=host, reason=f"compute: libvirt unreachable: {detail}"[:500])
    except DomainError:
        pass
