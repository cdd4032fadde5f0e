"""The packing policy `ours` ranks hosts for MIG slices and vGPUs too (not only shares), through the placement
engine the API uses; the GPU and MIG start slice inside the chosen host stay the device planner's."""
import uuid

import pytest

from apps.inventory.catalog import gpu_model_get
from apps.inventory.mig import mig_layout_validate, mig_plan
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation
from apps.scheduling.placement import PlacementRequest, devices, place, weighers
from apps.scheduling.placement.fractional import (
    allocation_milli,
    fractional_milli,
    mig_slices_milli,
    policy_free_milli,
)
from apps.scheduling.services import placement_claim

from . import fleet

H100 = "H100-SXM5-80GB"


# ---- conversion (catalog values, no database) -----------------------------------------------------------------
@pytest.mark.parametrize(("model", "profile", "milli"), [
    (H100, "1g.10gb", 125), (H100, "1g.20gb", 250), (H100, "2g.20gb", 250), (H100, "3g.40gb", 500),
    (H100, "4g.40gb", 500), (H100, "7g.80gb", 1000), (H100, "9", 500),  # profile id 9 = 3g.40gb
    ("A100-SXM4-40GB", "1g.5gb", 125), ("A100-SXM4-40GB", "1g.10gb", 250),  # same name as H100's 1g.10gb, 2 slices
    ("A100-SXM4-40GB", "3g.20gb", 500), ("A100-SXM4-40GB", "7g.40gb", 1000),
    ("A100-SXM4-80GB", "3g.40gb", 500),
])
def test_mig_profile_milli_is_its_memory_slices_out_of_the_models(model, profile, milli):
    assert fractional_milli("mig", model, profile) == milli


@pytest.mark.parametrize(("model", "vtype", "milli"), [
    (H100, "H100XM-40C", 500), (H100, "H100XM-20C", 250), (H100, "H100XM-5C", 63),  # max 16: ceil(62.5)
    (H100, "H100XM-80C", 1000), (H100, "H100XM-1-10C", 143),  # MIG-backed: max 7 like the device filter counts
    ("L40S", "L40S-1Q", 32), ("L40S", "L40S-48Q", 1000), ("A100-SXM4-40GB", "A100-10C", 250),
])
def test_vgpu_type_milli_is_one_over_its_max_per_gpu(model, vtype, milli):
    assert fractional_milli("vgpu", model, vtype) == milli


def test_unknown_sizes_and_live_rows():
    assert fractional_milli("mig", "L40S", "1g.10gb") is None  # L40S has no MIG
    assert fractional_milli("mig", H100, "5g.50gb") is None
    assert fractional_milli("vgpu", H100, "L40S-1Q") is None
    assert fractional_milli("vgpu", "no-such-gpu", "x") is None
    assert fractional_milli("share", H100, amount=300) == 300
    assert mig_slices_milli(4) == 500 and mig_slices_milli(3, 7) == 429
    assert allocation_milli("mig", H100, lo=4, hi=8) == 500
    assert allocation_milli("vgpu", H100, amount=2, profile="H100XM-20C") == 500
    assert allocation_milli("share", H100, amount=70) == 70


def _row(index=0, model=H100, occupancy=()):
    return devices.GpuRow(uuid.uuid4(), index, 0, model, tuple(occupancy))


def test_policy_free_milli_of_a_gpu():
    mig = _row(occupancy=[{"rc": "mig", "lo": 4, "hi": 8, "amount": 1, "profile": "3g.40gb"}])
    assert policy_free_milli("mig", mig, 125, True) == 500
    assert policy_free_milli("mig", mig, 125, False) == 0  # the device filter refused it: full for the policy
    six = _row(occupancy=[{"rc": "vgpu", "lo": None, "hi": None, "amount": 6, "profile": "H100XM-1-10C"}])
    # 6 x 143 = 858 used leaves 142 < 143, yet the 7th fits: never below the request's milli when placeable
    assert policy_free_milli("vgpu", six, 143, True) == 143
    share = _row(occupancy=[{"rc": "share", "lo": None, "hi": None, "amount": 300, "profile": ""}])
    assert policy_free_milli("share", share, 800, False) == 700  # shares: unchanged (share_free_milli)


def test_fractional_key_keeps_scored_hosts_first_and_is_deterministic():
    hosts = [("b", None, 0.9), ("a", None, 0.9), ("c", -3, 0.1), ("d", 7, 0.2), ("e", 7, 0.5), ("f", None, 0.95),
             ("g", 100, 0.05)]
    # binpack: scored hosts first, best policy score first; spread ignores the policy: loosest device fit first
    for policy, expect in (("binpack", ["g", "e", "d", "c", "f", "a", "b"]),
                           ("spread", ["g", "c", "d", "e", "a", "b", "f"])):
        for order in (hosts, hosts[::-1]):
            got = sorted(order, key=lambda h, p=policy: weighers.fractional_key(p, h[1], h[2], h[0]))
            assert [h[0] for h in got] == expect


# ---- through the engine (real PostgreSQL) ---------------------------------------------------------------------
@pytest.fixture
def p(db):
    return fleet.project("frac")


def _claim(p, host, specs):
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id), specs=specs)


def _mig(p, host, index, lo, hi, profile):
    gpu = host.gpus.get(index=index)
    _claim(p, host, [AllocationSpec(host.id, "mig", gpu_id=gpu.id, slices=(lo, hi), profile=profile)])


def _vgpu(p, host, index, vtype, n=1):
    gpu = host.gpus.get(index=index)
    for _ in range(n):
        _claim(p, host, [AllocationSpec(host.id, "vgpu", gpu_id=gpu.id, profile=vtype)])


def _mig_host(**kw):
    return fleet.host(gpus=kw.pop("gpus", 1), mode="mig", nvswitch="", **kw)


def _order(result):
    return [c.hosts[0].host_id for c in result.candidates]


def test_mig_slice_is_ranked_by_ours_not_by_the_device_best_fit(p, monkeypatch):
    """A: one 3g.40gb at slices 4-7 (half free); B: one 1g.10gb (7/8 free); C: full of 3g.40gb. The workload is
    mostly 3g.40gb. The MIG planner's best fit puts the 1g.10gb on A (5 of 8 slices used after), which strands
    A's last 3g.40gb slot; `ours` puts it on B, whose 3g.40gb slot stays placeable."""
    a, b, c = _mig_host(), _mig_host(), _mig_host()
    _mig(p, a, 0, 4, 8, "3g.40gb")
    _mig(p, b, 0, 0, 1, "1g.10gb")
    _mig(p, c, 0, 0, 4, "3g.40gb")
    _mig(p, c, 0, 4, 8, "3g.40gb")
    assert sorted(m for m, _, _ in weighers.live_workload("mig")) == [125, 500, 500, 500]
    req = PlacementRequest(project_id=p.id, mig_profile="1g.10gb")
    with monkeypatch.context() as m:  # the device score alone
        m.setattr(weighers, "policy_scores", lambda *args: {})
        alone = place(req, explain=True)
        assert _order(alone) == [a.id, b.id]
        assert "policy_score" not in alone.candidates[0].hosts[0].detail
    result = place(req, explain=True)
    assert _order(result) == [b.id, a.id]
    best, second = (cand.hosts[0].detail for cand in result.candidates)
    assert best["policy_score"] > second["policy_score"]
    # the claim through the API's service lands on B at the planner's start slice, next to B's 1g.10gb
    placed = placement_claim(actor=None, request=req, consumers=ConsumerRef(uuid.uuid4(), "instance", p.id))
    assert placed.candidate.hosts[0].host_id == b.id
    new = Allocation.objects.get(host=b, slices__startswith=best["mig_start"])
    spec = gpu_model_get(H100).mig
    planned = mig_plan(spec, ["1g.10gb"], current=[("1g.10gb", 0)])
    assert (new.slices.lower, new.slices.upper) == (planned.placements[0].start, planned.placements[0].end)
    assert mig_layout_validate(spec, [("1g.10gb", 0), ("1g.10gb", new.slices.lower)]) == []


def test_mig_gpu_and_start_slice_inside_the_host_stay_the_planners(p):
    """One host, GPU 0 half used (3g.40gb at 4-7), GPU 1 with one 1g.10gb. The policy alone would take GPU 1 (no
    3g.40gb slot lost); the planner's best fit is GPU 0 at a start the MIG rules allow, and that is what is
    claimed - the policy only ranks hosts."""
    h = _mig_host(gpus=2)
    _mig(p, h, 0, 4, 8, "3g.40gb")
    _mig(p, h, 1, 0, 1, "1g.10gb")
    other = _mig_host()
    _mig(p, other, 0, 0, 4, "3g.40gb")
    _mig(p, other, 0, 4, 8, "3g.40gb")
    req = PlacementRequest(project_id=p.id, mig_profile="1g.10gb")
    alone = weighers.policy_scores(req, [weighers.PolicyHost(str(h.id), H100, 128_000, 1 << 20, (500, 875), 125)])
    assert alone[str(h.id)][1] == 1  # the policy's own GPU would be GPU 1
    choice = place(req).candidates[0].hosts[0]
    assert choice.host_id == h.id and "policy_score" in choice.detail
    assert choice.detail["gpu_index"] == 0
    spec = gpu_model_get(H100).mig
    planned = mig_plan(spec, ["1g.10gb"], current=[("3g.40gb", 4)])
    assert choice.detail["mig_start"] == planned.placements[0].start
    start = choice.detail["mig_start"]
    assert start in spec.profile("1g.10gb").starts and start < 4
    assert mig_layout_validate(spec, [("3g.40gb", 4), ("1g.10gb", start)]) == []


def test_vgpu_is_ranked_by_ours_not_by_the_device_fill(p, monkeypatch):
    """A: two H100XM-20C (max 4: half the GPU free); B: one. The device filter fills A first (3/4 after); the
    workload is half H100XM-40C (500 milli), so `ours` keeps A's remaining half whole and picks B."""
    a, b, c, d = (fleet.host(gpus=1, mode="vgpu", nvswitch="") for _ in range(4))
    _vgpu(p, a, 0, "H100XM-20C", 2)
    _vgpu(p, b, 0, "H100XM-20C", 1)
    _vgpu(p, c, 0, "H100XM-40C", 2)
    _vgpu(p, d, 0, "H100XM-40C", 2)
    assert sorted(m for m, _, _ in weighers.live_workload("vgpu")) == [250] * 3 + [500] * 4
    req = PlacementRequest(project_id=p.id, vgpu_type="H100XM-20C")
    with monkeypatch.context() as m:
        m.setattr(weighers, "policy_scores", lambda *args: {})
        assert _order(place(req, explain=True)) == [a.id, b.id]
    result = place(req, explain=True)
    assert _order(result) == [b.id, a.id]
    assert all("policy_score" in cand.hosts[0].detail for cand in result.candidates)
    assert result.explanation["remaining"] == 2
    placed = placement_claim(actor=None, request=req, consumers=ConsumerRef(uuid.uuid4(), "instance", p.id))
    assert placed.candidate.hosts[0].host_id == b.id
    assert Allocation.objects.filter(host=b, resource_class="vgpu").count() == 2


def test_hosts_without_a_policy_score_come_after_the_scored_ones_deterministically(p, monkeypatch):
    """A negative policy score (``ours``' reserve key can make one) still ranks before every unscored host, and
    unscored hosts follow by device score, then host id - whatever order the hosts come in."""
    hosts = [_mig_host() for _ in range(4)]
    _mig(p, hosts[0], 0, 0, 4, "3g.40gb")  # the fullest: best device score
    scored = hosts[3]
    monkeypatch.setattr(weighers, "policy_scores", lambda req, rows: {str(scored.id): (-5, 0)})
    req = PlacementRequest(project_id=p.id, mig_profile="1g.10gb")
    first = place(req, explain=True, limit=10)
    tail = sorted((h.id for h in hosts[1:3]), key=str)
    assert _order(first) == [scored.id, hosts[0].id, *tail]
    assert first.candidates[0].hosts[0].detail["policy_score"] == -5
    assert all("policy_score" not in c.hosts[0].detail for c in first.candidates[1:])
    assert _order(place(req, explain=True, limit=10)) == _order(first)


def test_policy_scores_groups_hosts_by_request_milli(p):
    """The same profile name can mean two sizes (1g.10gb: 1 slice on H100, 2 on A100 40GB): each host is scored
    with its own model's size."""
    req = PlacementRequest(project_id=p.id, mig_profile="1g.10gb")
    host = weighers.PolicyHost
    rows = [host("h100", H100, 8000, 10_000, (1000,), fractional_milli("mig", H100, "1g.10gb")),
            host("a100", "A100-SXM4-40GB", 8000, 10_000, (200,), fractional_milli("mig", "A100-SXM4-40GB", "1g.10gb")),
            host("a100b", "A100-SXM4-40GB", 8000, 10_000, (250,), 250)]
    out = weighers.policy_scores(req, rows)
    assert set(out) == {"h100", "a100b"}  # 200 free < 250: the A100 cannot take its 2-slice 1g.10gb


def test_shares_keep_the_policys_gpu_and_score(p):
    """Shares are unchanged: the host's GPU is the policy's (here GPU 0: FGD and the capacity change tie, the
    policy takes the lower index), not the device step's best fit (GPU 1, half used)."""
    h = fleet.host(gpus=2, mode="shared", nvswitch="")
    _claim(p, h, [AllocationSpec(h.id, "share", gpu_id=h.gpus.get(index=1).id, amount=500)])
    req = PlacementRequest(project_id=p.id, share_milli=500)
    out = weighers.policy_scores(req, [weighers.PolicyHost(str(h.id), H100, 128_000, 1 << 20, (1000, 500), 500)])
    score, pos = out[str(h.id)]
    got, _ = devices.choose_share(500, [_row(0), _row(1, occupancy=[{"rc": "share", "amount": 500}])])
    assert (pos, got.index) == (0, 1)
    choice = place(req).candidates[0].hosts[0]
    assert choice.detail == {"policy_score": score, "gpu_index": pos}


def test_a_share_on_gpus_without_a_model_name_is_scored_by_the_policy(p):
    """A request that names no model may use GPUs whose model is unknown (empty); the policy scores that host
    instead of ranking it after every other host."""
    h = fleet.host(gpus=2, mode="shared", nvswitch="", model="")
    choice = place(PlacementRequest(project_id=p.id, share_milli=500)).candidates[0].hosts[0]
    assert choice.host_id == h.id and "policy_score" in choice.detail


def test_live_shares_carry_their_consumers_vcpus_and_memory(p, monkeypatch):
    """The live workload is shares of 500 milli whose VMs hold 16 vCPUs and 64 GiB each. B has 16 vCPUs free: a
    500-milli share with 1 vCPU there leaves a half GPU no such VM can use (15 vCPUs), so `ours` (FGD's measure
    counts CPU) puts it on A (32 vCPUs). Without the vCPUs in the workload the two hosts tie and the host id
    decides (B, created first)."""
    b = fleet.host(gpus=1, mode="shared", nvswitch="", threads=16)
    a = fleet.host(gpus=1, mode="shared", nvswitch="", threads=32)
    c = fleet.host(gpus=1, mode="shared", nvswitch="", threads=64)
    for _ in range(2):
        _claim(p, c, [AllocationSpec(c.id, "share", gpu_id=c.gpus.get().id, amount=500),
                      AllocationSpec(c.id, "vcpu", amount=16), AllocationSpec(c.id, "memory_mib", amount=65536)])
    assert weighers.live_workload("share") == [(500, 16_000, 65536)] * 2
    req = PlacementRequest(project_id=p.id, share_milli=500, vcpus=1, memory_mib=1024)
    assert _order(place(req, explain=True, limit=10)) == [a.id, b.id]
    with monkeypatch.context() as m:
        m.setattr(weighers, "live_workload", lambda form: [(500, 0, 0)] * 2)
        assert _order(place(req, explain=True, limit=10)) == [b.id, a.id]


def test_live_workload_splits_a_consumers_vcpus_over_its_units(p):
    """A VM with two vGPUs and 8 vCPUs on the host counts as two vGPUs of 4 vCPUs each; a share whose consumer
    holds no vCPU there counts 0 CPU."""
    h = fleet.host(gpus=1, mode="vgpu", nvswitch="")
    _claim(p, h, [AllocationSpec(h.id, "vgpu", gpu_id=h.gpus.get().id, profile="H100XM-20C", amount=2),
                  AllocationSpec(h.id, "vcpu", amount=8), AllocationSpec(h.id, "memory_mib", amount=4096)])
    assert weighers.live_workload("vgpu") == [(250, 4000, 2048)] * 2
    s = fleet.host(gpus=1, mode="shared", nvswitch="")
    _claim(p, s, [AllocationSpec(s.id, "share", gpu_id=s.gpus.get().id, amount=300)])
    assert weighers.live_workload("share") == [(300, 0, 0)]


def test_live_workload_counts_the_task_in_a_lease_not_the_lease(p):
    """A lease holding a 3g.40gb slice with 32 vCPUs and an instance running in it with 8 vCPUs: one task of 8
    vCPUs, not two (the lease's reservation is not a task shape)."""
    h = _mig_host()
    g = h.gpus.get()
    lease = ConsumerRef(uuid.uuid4(), "lease", p.id)
    allocations_claim(consumer=lease, specs=[
        AllocationSpec(h.id, "mig", gpu_id=g.id, slices=(4, 8), profile="3g.40gb"),
        AllocationSpec(h.id, "vcpu", amount=32), AllocationSpec(h.id, "memory_mib", amount=1 << 16)])
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", p.id), parent_consumer_id=lease.id, specs=[
        AllocationSpec(h.id, "mig", gpu_id=g.id, slices=(4, 8), profile="3g.40gb"),
        AllocationSpec(h.id, "vcpu", amount=8)])
    assert Allocation.objects.filter(parent__isnull=False).count() == 2  # the instance nests in the lease
    assert weighers.live_workload("mig") == [(500, 8000, 0)]


def test_live_workload_drops_rows_replaced_in_the_same_transaction(p):
    """A resize ends the old rows at the ledger's clock and claims new ones; a placement later in the same
    transaction sees only the new shape."""
    h = fleet.host(gpus=1, mode="shared", nvswitch="")
    c = ConsumerRef(uuid.uuid4(), "instance", p.id)
    gpu = h.gpus.get().id
    allocations_claim(consumer=c, specs=[AllocationSpec(h.id, "share", gpu_id=gpu, amount=500),
                                         AllocationSpec(h.id, "vcpu", amount=16)])
    allocations_claim(consumer=c, replace=True, specs=[AllocationSpec(h.id, "share", gpu_id=gpu, amount=500),
                                                       AllocationSpec(h.id, "vcpu", amount=4)])
    assert weighers.live_workload("share") == [(500, 4000, 0)]
