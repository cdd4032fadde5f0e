"""Placement value objects: what is asked (`PlacementRequest`) and what comes back (`Candidate`, `Result`).

Units: ``vcpus`` (count), ``memory_mib`` (MiB), ``share_milli`` (milli-GPU, 1000 = one GPU). A request asks for
exactly one GPU form per host: ``gpus_per_host`` whole GPUs, or one ``mig_profile`` GPU instance, or one
``vgpu_type`` vGPU, or one ``share_milli`` share - or no GPU at all.
"""
from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field

from apps.core import clock

from ..errors import InvalidPlacementRequest
from ..ledger import AllocationSpec

POLICIES = ("binpack", "spread")
#: Upper bounds of the per-host quantities: more than any host can record (`inventory.Host.cpu_threads` is a
#: PostgreSQL integer, `memory_mib` a bigint), so a larger value is a bad request, not a capacity shortage.
MAX_VCPUS = 2**31 - 1
MAX_MEMORY_MIB = 2**63 - 1


@dataclass(frozen=True)
class TopologyConstraint:
    """Hard limits for multi-host requests. ``max_leaves_per_rail=1`` is "same leaf on every rail";
    ``one_fabric`` requires every host on one InfiniBand fabric; ``max_nvlink_domains=1`` is "one NVLink domain":
    every host's GPUs in one multi-node NVLink domain (`inventory.Gpu.nvlink_domain`, e.g. a GB200 NVL72 rack),
    hosts without one never qualify. Without limits the engine still prefers the tightest set (fewest leaves per
    rail, then fewest spine groups, then one fabric)."""

    max_leaves_per_rail: int | None = None
    max_spine_groups: int | None = None
    one_fabric: bool = False
    max_nvlink_domains: int | None = None

    @property
    def is_set(self) -> bool:
        return bool(self.max_leaves_per_rail or self.max_spine_groups or self.one_fabric or self.max_nvlink_domains)


@dataclass(frozen=True)
class HostNeed:
    """A condition another app puts on the hosts a request may use (e.g. compute: hosts that can join the
    instance's InfiniBand partition). `filter` names the host filter registered for it
    (`apps.scheduling.placement.register_host_filter`), which also names it in the explanation; `key` is the
    filter's argument (an InfiniBand partition id)."""

    filter: str
    key: str


@dataclass(frozen=True)
class PlacementRequest:
    project_id: uuid.UUID
    gpu_models: tuple[str, ...] = ()
    gpus_per_host: int = 0
    mig_profile: str = ""
    vgpu_type: str = ""
    share_milli: int = 0
    vcpus: int = 0
    memory_mib: int = 0
    hosts: int = 1
    zone: str = ""
    #: pin to one host (an instance whose host-local volume lives there; apps.storage): the exact path only
    host_id: uuid.UUID | None = None
    provisioning_kind: str = ""
    policy: str = ""
    affinity_group: str = ""
    anti_affinity: bool = False
    dedicated: bool = False
    lease_id: uuid.UUID | None = None
    spot: bool = False
    consumer_type: str = "instance"
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    topology: TopologyConstraint = field(default_factory=TopologyConstraint)
    #: other apps' conditions on the hosts (`HostNeed`): only hosts every need's filter keeps are candidates
    needs: tuple[HostNeed, ...] = ()

    def __post_init__(self):
        forms = [bool(self.gpus_per_host), bool(self.mig_profile), bool(self.vgpu_type), bool(self.share_milli)]
        problems = {}
        if sum(forms) > 1:
            problems["gpus_per_host"] = ["ask for one of gpus_per_host, mig_profile, vgpu_type, share_milli"]
        if not 0 <= self.share_milli < 1000:
            problems["share_milli"] = ["a share is 1..999 milli-GPU (use gpus_per_host for whole GPUs)"]
        for name in ("gpus_per_host", "vcpus", "memory_mib"):
            if getattr(self, name) < 0:
                problems[name] = ["must be >= 0"]
        for name, top in (("vcpus", MAX_VCPUS), ("memory_mib", MAX_MEMORY_MIB)):
            if getattr(self, name) > top:
                problems[name] = [f"must be <= {top}"]
        if self.hosts < 1:
            problems["hosts"] = ["at least 1"]
        if self.policy and self.policy not in POLICIES:
            problems["policy"] = [f"one of {', '.join(POLICIES)}"]
        if self.start and self.end and self.end <= self.start:
            problems["end"] = ["must be after start ([start, end) is half-open)"]
        elif self.end and not self.start and self.end <= clock.now():
            problems["end"] = ["must be in the future: without a start the window starts now"]
        if self.spot and (self.lease_id or self.consumer_type == "lease"):
            problems["spot"] = ["a spot request is neither a lease nor inside one"]
        if not any(forms) and not (self.vcpus or self.memory_mib):
            problems["gpus_per_host"] = ["nothing requested"]
        if problems:
            raise InvalidPlacementRequest("Invalid placement request.", errors=problems)

    @property
    def gpu_form(self) -> str:
        """``gpu`` | ``mig`` | ``vgpu`` | ``share`` | ``none``."""
        if self.gpus_per_host:
            return "gpu"
        if self.mig_profile:
            return "mig"
        if self.vgpu_type:
            return "vgpu"
        if self.share_milli:
            return "share"
        return "none"

    @property
    def gpu_mode(self) -> str:
        """The `inventory.Gpu.mode` a GPU needs to serve this request."""
        return {"gpu": "exclusive", "mig": "mig", "vgpu": "vgpu", "share": "shared"}.get(self.gpu_form, "")

    @property
    def is_on_demand_now(self) -> bool:
        return self.start is None and self.end is None and self.lease_id is None and self.consumer_type != "lease"


@dataclass
class HostChoice:
    """One host of a candidate and the ledger specs that would be claimed on it."""

    host_id: uuid.UUID
    host_name: str
    specs: list[AllocationSpec]
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"host_id": str(self.host_id), "host": self.host_name, **self.detail,
                "resources": [{"resource_class": s.resource_class, "gpu_id": str(s.gpu_id) if s.gpu_id else None,
                               "slices": list(s.slices) if s.slices else None, "amount": s.amount,
                               "profile": s.profile} for s in self.specs]}


@dataclass
class Candidate:
    """Hosts (one per requested host) with a score (higher is better) and how it was scored."""

    hosts: list[HostChoice]
    score: float
    topology: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"score": round(self.score, 3), "topology": self.topology,
                "hosts": [h.as_dict() for h in self.hosts]}


@dataclass
class Result:
    candidates: list[Candidate]
    explanation: dict

    @property
    def placeable(self) -> bool:
        return bool(self.candidates)
