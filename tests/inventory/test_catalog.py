"""The GPU model catalog: every model present, every section cited, shapes consistent with the MIG reference."""
from collections import Counter

import pytest

from apps.inventory.catalog import (
    CatalogError,
    _model,
    gpu_model_get,
    gpu_model_list,
    load_sources,
    nvswitch_partitions,
)

KEYS = ["A100-SXM4-40GB", "A100-SXM4-80GB", "B200", "H100-NVL-94GB", "H100-SXM5-80GB", "H200-SXM-141GB", "L40S"]


def test_all_models_present():
    assert [m.key for m in gpu_model_list()] == KEYS


@pytest.mark.parametrize("key", [k for k in KEYS if k != "L40S"])
def test_mig_reference_table(key):
    """Shared fixtures 'MIG reference': ids, sizes, starts and maxima are the same on every GH100/GA100 part."""
    mig = gpu_model_get(key).mig
    shape = {p.id: (p.memory, p.compute, p.starts, p.max) for p in mig.profiles}
    assert shape == {19: (1, 1, tuple(range(7)), 7), 20: (1, 1, tuple(range(7)), 1), 15: (2, 1, (0, 2, 4, 6), 4),
                     14: (2, 2, (0, 2, 4), 3), 9: (4, 3, (0, 4), 2), 5: (4, 4, (0,), 1), 0: (8, 7, (0,), 1)}
    assert (mig.memory_slices, mig.compute_slices) == (8, 7)
    assert [p.name for p in mig.profiles if p.media] == [mig.profile(19).name + "+me"]


def test_profile_names_per_model():
    assert gpu_model_get("A100-SXM4-40GB").mig.profile(9).name == "3g.20gb"
    assert gpu_model_get("H100-SXM5-80GB").mig.profile(9).name == "3g.40gb"
    assert gpu_model_get("H200-SXM-141GB").mig.profile(0).name == "7g.141gb"
    assert gpu_model_get("L40S").mig is None and gpu_model_get("L40S").nvlink is None


def test_hgx_partitions_are_1x8_2x4_4x2_8x1():
    for system in ("hgx-a100-8gpu", "hgx-h100-8gpu", "hgx-b200-8gpu"):
        parts = nvswitch_partitions(system)
        assert Counter(len(p["gpus"]) for p in parts) == {8: 1, 4: 2, 2: 4, 1: 8}
        for size in (8, 4, 2, 1):  # each size class covers GPUs 1..8 exactly once
            assert sorted(g for p in parts if len(p["gpus"]) == size for g in p["gpus"]) == list(range(1, 9))
    assert gpu_model_get("H200-SXM-141GB").nvswitch_system == "hgx-h100-8gpu"


def test_vgpu_backing_and_mig_backed_types_refer_to_real_profiles():
    for m in gpu_model_list():
        assert m.vgpu_backing == ("mdev" if m.architecture == "ampere" else "sriov_vf")
        for t in m.vgpu_types:
            if t.kind == "time_sliced":  # framebuffers are fractions of the nominal board memory (GiB)
                assert t.max * t.framebuffer_mib <= m.memory_gb * 1024, t
            else:  # one vGPU per GPU instance: at most the profile's own maximum
                assert t.max == m.mig.profile(t.mig_profile).max, t


def test_every_cite_resolves_and_an_uncited_section_is_refused():
    sources = load_sources()
    for m in gpu_model_list():
        for block in ("pcie", "mig", "vgpu"):
            for cite in (m.raw.get(block) or {}).get("cite", []):
                assert cite in sources
    raw = dict(gpu_model_get("L40S").raw)
    raw["pcie"] = {"generation": 4, "width": 16}
    with pytest.raises(CatalogError, match="L40S.pcie: no source cited"):
        _model(raw, sources)
