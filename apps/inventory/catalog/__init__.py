"""The GPU model catalog: YAML data files in this package, loaded once and validated.

`gpu_model_get(key)` -> `GpuModelSpec`; `gpu_model_list()`; `nvswitch_partitions(system)`.
Every model file cites its sources by key (see `sources.yaml`); `load_catalog()` refuses a file that cites an
unknown source, lacks a citation on a section, or whose MIG profiles break the 8-slice geometry.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

CATALOG_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class MigProfile:
    """A MIG GPU instance profile: `memory` slices out of 8 placed at one of `starts`, `compute` of 7."""

    id: int
    name: str
    compute: int
    memory: int
    starts: tuple[int, ...]
    max: int
    media: bool = False


@dataclass(frozen=True)
class MigSpec:
    memory_slices: int
    compute_slices: int
    profiles: tuple[MigProfile, ...]
    min_driver_pairs: tuple[tuple[frozenset[int], int], ...] = ()
    cite: tuple[str, ...] = ()

    def profile(self, ref: int | str) -> MigProfile | None:
        """Resolve a profile by id (int or digit string) or by this model's profile name."""
        for p in self.profiles:
            if p.id == ref or p.name == ref or (isinstance(ref, str) and ref.isdigit() and p.id == int(ref)):
                return p
        return None


@dataclass(frozen=True)
class VgpuType:
    name: str
    framebuffer_mib: int
    max: int
    kind: str  # time_sliced | mig_backed
    mig_profile: int | None = None


@dataclass(frozen=True)
class GpuModelSpec:
    key: str
    name: str
    architecture: str
    memory_gb: int
    memory_mib: int
    form_factor: str
    pcie_generation: int
    pcie_width: int
    nvlink: dict | None
    nvswitch_system: str
    sriov_vfs: int
    mig: MigSpec | None
    vgpu_backing: str
    vgpu_types: tuple[VgpuType, ...]
    raw: dict = field(repr=False, compare=False, default_factory=dict)


class CatalogError(ValueError):
    """The catalog data is inconsistent (raised at load time, i.e. at start-up or in tests)."""


def _mig(data: dict | None, sources: dict, key: str) -> MigSpec | None:
    if not data:
        return None
    _check_cite(data, sources, f"{key}.mig")
    profiles = tuple(MigProfile(id=p["id"], name=p["name"], compute=p["compute"], memory=p["memory"],
                                starts=tuple(p["starts"]), max=p["max"], media=bool(p.get("media")))
                     for p in data["profiles"])
    for p in profiles:
        if any(s < 0 or s + p.memory > data["memory_slices"] for s in p.starts):
            raise CatalogError(f"{key}: profile {p.name} has a start outside the {data['memory_slices']} slices")
    pairs = tuple((frozenset(x["profiles"]), int(x["min_driver_major"])) for x in data.get("min_driver_pairs", []))
    return MigSpec(memory_slices=data["memory_slices"], compute_slices=data["compute_slices"], profiles=profiles,
                   min_driver_pairs=pairs, cite=tuple(data["cite"]))


def _check_cite(block: dict, sources: dict, where: str, key: str = "cite") -> None:
    cites = block.get(key) or []
    if not cites:
        raise CatalogError(f"{where}: no source cited")
    for c in cites:
        if c not in sources:
            raise CatalogError(f"{where}: unknown source {c!r}")


def _model(data: dict, sources: dict) -> GpuModelSpec:
    key = data["key"]
    _check_cite(data, sources, f"{key}.memory", "cite_memory")
    _check_cite(data, sources, f"{key}.sriov_vfs", "cite_sriov")
    _check_cite(data["pcie"], sources, f"{key}.pcie")
    if data.get("nvlink"):
        _check_cite(data["nvlink"], sources, f"{key}.nvlink")
    vgpu = data.get("vgpu") or {}
    if vgpu:
        _check_cite(vgpu, sources, f"{key}.vgpu")
    types = tuple(VgpuType(name=t["name"], framebuffer_mib=t["framebuffer_mib"], max=t["max"], kind=t["kind"],
                           mig_profile=t.get("mig_profile")) for t in vgpu.get("types", []))
    return GpuModelSpec(
        key=key, name=data["name"], architecture=data["architecture"], memory_gb=data["memory_gb"],
        memory_mib=data["memory_mib"], form_factor=data["form_factor"],
        pcie_generation=data["pcie"]["generation"], pcie_width=data["pcie"]["width"], nvlink=data.get("nvlink"),
        nvswitch_system=data.get("nvswitch_system") or "", sriov_vfs=data["sriov_vfs"],
        mig=_mig(data.get("mig"), sources, key), vgpu_backing=vgpu.get("backing", ""), vgpu_types=types, raw=data)


@cache
def load_catalog() -> dict[str, GpuModelSpec]:
    """Load and validate every `*.yaml` model file. Raises `CatalogError` on inconsistent data."""
    sources = yaml.safe_load((CATALOG_DIR / "sources.yaml").read_text())
    partitions = yaml.safe_load((CATALOG_DIR / "nvswitch.yaml").read_text())
    models: dict[str, GpuModelSpec] = {}
    for path in sorted(CATALOG_DIR.glob("*.yaml")):
        if path.name in ("sources.yaml", "nvswitch.yaml"):
            continue
        spec = _model(yaml.safe_load(path.read_text()), sources)
        if spec.key != path.stem:
            raise CatalogError(f"{path.name}: key {spec.key!r} does not match the file name")
        if spec.nvswitch_system and spec.nvswitch_system not in partitions:
            raise CatalogError(f"{spec.key}: unknown nvswitch_system {spec.nvswitch_system!r}")
        models[spec.key] = spec
    for system, block in partitions.items():
        _check_cite(block, sources, f"nvswitch.{system}")
    return models


@cache
def load_sources() -> dict:
    return yaml.safe_load((CATALOG_DIR / "sources.yaml").read_text())


@cache
def _partitions() -> dict:
    return yaml.safe_load((CATALOG_DIR / "nvswitch.yaml").read_text())


def gpu_model_list() -> list[GpuModelSpec]:
    return list(load_catalog().values())


def gpu_model_get(key: str) -> GpuModelSpec | None:
    return load_catalog().get(key)


def nvswitch_partitions(system: str) -> list[dict]:
    """Fabric Manager partitions of an HGX baseboard: `[{"id": 0, "gpus": [1..8]}, ...]` (GPU physical ids)."""
    if not system:
        return []
    return list(_partitions().get(system, {}).get("partitions", []))
