"""The compute driver port: what the control plane asks of a hypervisor, in typed frozen dataclasses.

Drivers import nothing from models, services or api. They raise only `apps.core.drivers` exceptions:
- `DriverTransientError` (code `host_unreachable`, ...): the host or its libvirt daemon did not answer; retry.
- `DriverNotFound`: no domain (or node device) with that UUID.
- `DriverConflict`: the object exists in an incompatible state (a name taken by another UUID).
- `DriverError`: terminal (invalid domain XML, a missing PCI device or mdev type, an unsupported feature).

Every call is keyed by our instance UUID, which is also the libvirt domain's UUID and name, so a retried
step finds what the last try made (`domain_define` redefines, `domain_start` on a running domain is a no-op,
`domain_delete` of a missing domain is a no-op).
"""
from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# Cloud-init's NoCloud seed is a small ISO; the user-data limit keeps it well under one CD sector budget and
# matches the 16 KiB limit EC2 and OpenStack document for user data (EC2 user guide "Run commands when you
# launch an EC2 instance with user data input": "limited to 16 KB, in raw form").
USER_DATA_MAX_BYTES = 16 * 1024


class PowerState(enum.StrEnum):
    """Observed power state, from libvirt's `virDomainState` (libvirt.org/html/libvirt-libvirt-domain.html)."""

    NOSTATE = "nostate"
    RUNNING = "running"
    BLOCKED = "blocked"
    PAUSED = "paused"
    SHUTDOWN = "shutting_down"
    SHUTOFF = "shutoff"
    CRASHED = "crashed"
    PMSUSPENDED = "pmsuspended"
    MISSING = "missing"  # no domain on the host (written by the reconciler, never returned by a driver)


@dataclass(frozen=True)
class PciHostdev:
    """A whole PCI function passed through with VFIO (`<hostdev type='pci' managed='yes'>`).

    `address` is the PCI address in `DDDD:BB:SS.F` form, e.g. ``0000:3b:00.0``. Used for whole GPUs and for
    SR-IOV VFs of NVIDIA's vendor VFIO driver (Hopper and later), where the VF carries a vGPU type that the
    agent set before start (`vgpu_type`, informational here).
    """

    address: str
    vgpu_type: str = ""
    is_vf: bool = False
    #: the guest NUMA node (index into `DomainSpec.numa_cells`) whose PCIe expander bus the device sits under
    #: (the node of its host NUMA node); None: on the guest's root complex
    guest_node: int | None = None


@dataclass(frozen=True)
class MdevHostdev:
    """A mediated device (`<hostdev type='mdev' model='vfio-pci'>`), e.g. an NVIDIA vGPU of type `mdev_type`.

    `uuid` is the mdev's UUID (we derive it from the instance id and device index so retries find it);
    `parent` the parent PCI address (`DDDD:BB:SS.F`); `gpu_instance_id` is set for a MIG-backed vGPU
    (the MIG GPU instance the agent created at the planner's start slice).
    """

    uuid: str
    mdev_type: str
    parent: str
    gpu_instance_id: int | None = None
    #: as `PciHostdev.guest_node`
    guest_node: int | None = None


@dataclass(frozen=True)
class NetInterface:
    """A virtio NIC on the host's Open vSwitch integration bridge (`bridge`, `br-int` under OVN), for one
    networking port: `mac_address` (``0a:58:...``), `port_id` (the port's UUID) and `iface_id`, the OVN logical
    switch port name (`gpc-p-<port id hex>`, ADR 0700) that ovn-controller binds through the OVS interface's
    `external_ids:iface-id`.

    libvirt's `<virtualport type='openvswitch'><parameters interfaceid=.../>` only takes a UUID (libvirt's
    networkcommon.rng), so the XML carries `port_id` there and `iface_id` in our domain metadata
    (`<gpucloud:interface mac=... iface-id=...>`); the host sets `external_ids:iface-id` to it when the tap is
    plugged (docs/compute.md, "Tenant networks").
    """

    mac_address: str
    port_id: uuid.UUID
    iface_id: str
    bridge: str = "br-int"


@dataclass(frozen=True)
class CloudInitSeed:
    """A cloud-init NoCloud seed (docs.cloud-init.io, "NoCloud" datasource): an ISO labelled `cidata` holding
    `meta-data` (instance-id, local-hostname), `user-data` (#cloud-config with `ssh_authorized_keys`, or the
    tenant's own user data up to `USER_DATA_MAX_BYTES`) and `network-config` (version 2)."""

    instance_id: str
    hostname: str
    ssh_authorized_keys: tuple[str, ...] = ()
    user_data: str = ""
    network_config: str = ""


@dataclass(frozen=True)
class DiskSpec:
    """The root disk: `size_gib`, and the image it starts from (`source_path` on the host, qcow2 backing file).
    An empty `source_path` means no disk at all (tests, diskless boot)."""

    size_gib: int
    source_path: str = ""
    format: str = "qcow2"


@dataclass(frozen=True)
class VolumeDisk:
    """An attached volume in the domain's definition, so that a redefine (resize) keeps it: `path` on the host,
    `target_dev` (``vdb``..), `serial` (the volume id, see `apps.storage.drivers.base.disk_serial`), `format`
    (``qcow2``/``raw``), `source_type` ``file`` (dir and netfs pools) or ``block`` (logical volumes) and the
    `<driver cache>` mode. Compute does not know volumes: storage's disk provider says which an instance has
    (`apps.compute.services.volumes.register_disk_provider`); the element is the one storage's driver
    hot-plugs (`apps.storage.drivers.libvirt.xml.disk_xml`). `boot`: the guest boots from this disk (boot from
    volume: the domain then has no image disk and the disk carries `<boot order='1'/>`)."""

    path: str
    target_dev: str
    bus: str = "virtio"
    serial: str = ""
    format: str = "qcow2"
    source_type: str = "file"
    read_only: bool = False
    cache: str = "none"
    boot: bool = False


@dataclass(frozen=True)
class NumaCell:
    """One guest NUMA node: guest vCPUs `vcpus` (ids), pinned to host CPUs `cpuset`, `memory_mib` MiB bound
    strictly to host NUMA node `host_node`."""

    host_node: int
    vcpus: tuple[int, ...]
    cpuset: tuple[int, ...]
    memory_mib: int


@dataclass(frozen=True)
class DomainSpec:
    """Everything needed to define one VM.

    Units: `memory_mib` MiB; `vcpus` count. `numa_node` is the host NUMA node of the VM's GPUs (memory is bound
    there and vCPUs run on `cpuset`, host CPU ids; with `dedicated_cpus` each vCPU is pinned 1:1 to one of them,
    which needs a scheduler that hands out CPUs exclusively); `hugepages` backs memory with 1 GiB pages (the flavor
    must then be a multiple of 1024 MiB). `numa_cells`, when given, replace `numa_node`/`cpuset`: one guest NUMA
    node each (their vCPUs and memory add up to `vcpus` and `memory_mib`), with the emulator's threads pinned to
    `emulator_cpuset` (host CPU ids kept apart from the vCPUs'); each cell also gets a PCIe expander bus on its node,
    under which the host devices whose `guest_node` is that cell sit. `virt_type` is `kvm` in production and `qemu` (TCG) in tests;
    `uefi` selects firmware autoselection (`<os firmware='efi'>`), without Secure Boot unless `secure_boot` (the
    image's property: unsigned kernel modules such as a DKMS-built NVIDIA driver do not load under it); `interfaces` are the VM's NICs in
    tenant subnets, in order (the first is the guest's first NIC); `volumes` the attached volumes, after the root disk. `project_id` and `labels` travel in the
    domain's metadata so a reconciler can tell our domains from others.
    """

    uuid: uuid.UUID
    vcpus: int
    memory_mib: int
    project_id: str = ""
    numa_node: int | None = None
    cpuset: tuple[int, ...] = ()
    dedicated_cpus: bool = False
    numa_cells: tuple[NumaCell, ...] = ()
    emulator_cpuset: tuple[int, ...] = ()
    hugepages: bool = False
    uefi: bool = True
    secure_boot: bool = False
    machine: str = "q35"
    virt_type: str = "kvm"
    arch: str = "x86_64"
    emulator: str = ""
    hostdevs: tuple[PciHostdev | MdevHostdev, ...] = ()
    interfaces: tuple[NetInterface, ...] = ()
    disk: DiskSpec | None = None
    volumes: tuple[VolumeDisk, ...] = ()
    seed: CloudInitSeed | None = None
    labels: tuple[tuple[str, str], ...] = field(default=())

    @property
    def name(self) -> str:
        return str(self.uuid)


@dataclass(frozen=True)
class DomainInfo:
    """What the host reports about one domain: power state, sizes (MiB, count) and our metadata."""

    uuid: uuid.UUID
    name: str
    power_state: PowerState
    vcpus: int
    memory_mib: int
    persistent: bool
    managed: bool  # carries our metadata element (we defined it)
    project_id: str = ""


@dataclass(frozen=True)
class MdevTypeInfo:
    """One mdev type a parent device offers: id (e.g. ``nvidia-471``), name and free instances."""

    type_id: str
    name: str
    available_instances: int


@runtime_checkable
class ComputeDriver(Protocol):
    """A hypervisor (one per host URI). All methods are idempotent, keyed by the instance UUID."""

    uri: str

    def domain_define(self, spec: DomainSpec) -> DomainInfo: ...
    def domain_start(self, domain_uuid: uuid.UUID) -> DomainInfo: ...
    def domain_stop(self, domain_uuid: uuid.UUID, *, hard: bool = False) -> DomainInfo: ...
    def domain_reboot(self, domain_uuid: uuid.UUID, *, hard: bool = False) -> DomainInfo: ...
    def domain_delete(self, domain_uuid: uuid.UUID) -> None: ...
    def domain_get(self, domain_uuid: uuid.UUID) -> DomainInfo: ...
    def domain_list(self) -> list[DomainInfo]: ...
    def console_log(self, domain_uuid: uuid.UUID, *, max_bytes: int = 65536) -> str: ...
    def mdev_create(self, dev: MdevHostdev) -> str: ...
    def mdev_delete(self, mdev_uuid: str) -> None: ...
    def mdev_types(self, parent: str) -> list[MdevTypeInfo]: ...
