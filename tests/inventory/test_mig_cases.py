"""Section A of the shared real-world cases (MIG geometry), as exact assertions on the planner."""
from apps.inventory.catalog import gpu_model_get
from apps.inventory.mig import mig_layout_validate, mig_max_placeable, mig_plan


def mig(key):
    return gpu_model_get(key).mig


def layout(plan):
    return [(p.profile, p.start, p.size) for p in plan.layout]


def codes(plan):
    return [r.code for r in plan.rejections]


# RW-001 -----------------------------------------------------------------------------------------------
def test_rw001_a_4g_plus_3g_accepted_on_a100_40gb():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["4g.20gb", "3g.20gb"], driver_version="535.104.05")
    assert plan.ok
    assert layout(plan) == [("4g.20gb", 0, 4), ("3g.20gb", 4, 4)]
    assert (plan.compute_slices_used, plan.memory_slices_used) == (7, 8)


def test_rw001_b_two_4g_rejected_max_one():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["4g.20gb", "4g.20gb"], driver_version="535.104.05")
    assert not plan.ok
    assert codes(plan) == ["max_instances", "compute_slices"]
    assert plan.rejections[0].details == {"profile": "4g.20gb", "profile_id": 5, "max": 1, "count": 2}
    assert plan.placements == ()


def test_rw001_c_4g_plus_3g_rejected_before_r510():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["4g.20gb", "3g.20gb"], driver_version="470.82.01")
    assert codes(plan) == ["driver_too_old"]
    assert "R510" in plan.rejections[0].message


# RW-002 -----------------------------------------------------------------------------------------------
def test_rw002_3g_3g_1g_fits_compute_but_not_memory():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["3g.20gb", "3g.20gb", "1g.5gb"])
    assert not plan.ok
    assert codes(plan) == ["memory_slices"]
    assert plan.rejections[0].details == {"needed": 9, "available": 8}


def test_rw002_3g_3g_alone_accepted_at_0_and_4():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["3g.20gb", "3g.20gb"])
    assert layout(plan) == [("3g.20gb", 0, 4), ("3g.20gb", 4, 4)]
    assert plan.compute_slices_used == 6


# RW-003 -----------------------------------------------------------------------------------------------
def test_rw003_creation_order_does_not_decide_feasibility():
    plan = mig_plan(mig("A100-SXM4-40GB"), ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"])
    assert plan.ok
    assert sorted((p.profile, p.start) for p in plan.layout) == sorted(
        [("3g.20gb", 4), ("2g.10gb", 2), ("1g.5gb", 0), ("1g.5gb", 1)])
    # placements come back in request order
    assert [p.profile for p in plan.placements] == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]


def test_rw003_naive_greedy_order_would_fail_but_explicit_layout_is_valid():
    bad = [("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2), ("3g.20gb", 0)]
    problems = mig_layout_validate(mig("A100-SXM4-40GB"), bad)
    assert [p.code for p in problems] == ["slices_collide"]
    assert problems[0].details["slices"] == [0, 1, 2, 3][:len(problems[0].details["slices"])]


# RW-005 -----------------------------------------------------------------------------------------------
def test_rw005_same_name_different_shape():
    a100 = mig("A100-SXM4-40GB")
    assert codes(mig_plan(a100, ["1g.10gb"] * 7))[0] == "max_instances"
    assert codes(mig_plan(a100, ["1g.10gb"] * 5))[0] == "max_instances"
    four = mig_plan(a100, ["1g.10gb"] * 4)
    assert [p.start for p in four.layout] == [0, 2, 4, 6]
    assert mig_plan(mig("H100-SXM5-80GB"), ["1g.10gb"] * 7).ok
    # resolution by profile id is unambiguous across models
    assert a100.profile(15).name == "1g.10gb" and mig("H100-SXM5-80GB").profile(15).name == "1g.20gb"


# RW-006 -----------------------------------------------------------------------------------------------
def test_rw006_per_profile_maxima_and_me_singleton_h100():
    h100 = mig("H100-SXM5-80GB")
    a = mig_plan(h100, ["1g.10gb+me", "1g.10gb+me"])
    assert codes(a) == ["max_instances"] and a.rejections[0].details["max"] == 1
    b = mig_plan(h100, ["1g.20gb"] * 4)
    assert [p.start for p in b.layout] == [0, 2, 4, 6] and b.memory_slices_used == 8
    c = mig_plan(h100, ["1g.20gb"] * 4 + ["1g.10gb"])
    assert codes(c) == ["memory_slices"]
    d = mig_plan(h100, ["2g.20gb"] * 3 + ["1g.10gb"])
    assert layout(d) == [("2g.20gb", 0, 2), ("2g.20gb", 2, 2), ("2g.20gb", 4, 2), ("1g.10gb", 6, 1)]


# RW-007 -----------------------------------------------------------------------------------------------
def test_rw007_h200_layouts():
    h200 = mig("H200-SXM-141GB")
    assert mig_plan(h200, ["1g.18gb"] * 2 + ["2g.35gb", "3g.71gb"]).ok
    assert mig_plan(h200, ["1g.18gb"] * 7).ok
    assert codes(mig_plan(h200, ["3g.71gb", "3g.71gb", "1g.18gb"])) == ["memory_slices"]
    assert layout(mig_plan(h200, ["4g.71gb", "3g.71gb"])) == [("4g.71gb", 0, 4), ("3g.71gb", 4, 4)]
    e = mig_plan(h200, ["1g.35gb"] * 5)
    assert codes(e)[0] == "max_instances" and e.rejections[0].details["max"] == 4


# RW-009 (b): changing the layout of a GPU keeps instances that are not removed ----------------------
def test_rw009_change_keeps_existing_instances_in_place():
    h100 = mig("H100-SXM5-80GB")
    current = [("1g.10gb", s) for s in range(7)]
    plan = mig_plan(h100, ["3g.40gb"], current=current, remove=[("1g.10gb", s) for s in (0, 1, 4, 5)])
    assert not plan.ok  # 3g needs 0-3 or 4-7: slices 2, 3 and 6 still hold tenants
    assert codes(plan) == ["no_placement"]
    msg = plan.rejections[0].message
    assert "start 0: 1g.10gb@2 on slices [2], 1g.10gb@3 on slices [3]" in msg
    assert "start 4: 1g.10gb@6 on slices [6]" in msg
    assert codes(mig_plan(h100, ["3g.40gb"], current=current, remove=[("1g.10gb", 0)])) == [
        "compute_slices", "memory_slices"]
    ok = mig_plan(h100, ["3g.40gb"], current=current, remove=[("1g.10gb", s) for s in range(4)])
    assert ok.ok and ok.placements[0].start == 0 and len(ok.removed) == 4


# Fragmentation awareness ------------------------------------------------------------------------------
def test_single_small_instance_keeps_the_largest_profiles_placeable():
    h100 = mig("H100-SXM5-80GB")
    plan = mig_plan(h100, ["1g.10gb"])
    assert plan.placements[0].start == 6
    left = mig_max_placeable(h100, plan.layout)
    assert left["4g.40gb"] == 1 and left["3g.40gb"] == 1 and left["7g.80gb"] == 0


def test_pinned_start_collision_is_explained():
    h100 = mig("H100-SXM5-80GB")
    plan = mig_plan(h100, [("2g.20gb", 2)], current=[("3g.40gb", 0)])
    assert codes(plan) == ["slices_collide"]
    assert plan.rejections[0].details["slices"] == [2, 3]
    assert codes(mig_plan(h100, [("3g.40gb", 2)])) == ["start_not_allowed"]


def test_unknown_profile_and_non_mig_gpu():
    assert codes(mig_plan(mig("H100-SXM5-80GB"), ["1g.5gb"])) == ["unknown_profile"]
    assert codes(mig_plan(gpu_model_get("L40S").mig, ["1g.5gb"])) == ["mig_unsupported"]


# RW-065 (a), (b): node-level `single` strategy needs every GPU in MIG mode and sliced alike -------------------
def test_rw065_single_strategy_requires_uniform_mig():
    from apps.inventory.mig import mig_single_strategy_problems

    h100 = mig("H100-SXM5-80GB")
    seven = mig_plan(h100, ["1g.10gb"] * 7).layout
    two = mig_plan(h100, ["3g.40gb"] * 2).layout
    a = mig_single_strategy_problems([(True, seven), (True, two)])
    assert [p.code for p in a] == ["non_uniform_layout"]
    assert "GPU 1: 3g.40gb, 3g.40gb" in a[0].message
    b = mig_single_strategy_problems([(True, two), (False, [])])
    assert [p.code for p in b] == ["gpu_not_in_mig"]
    assert mig_single_strategy_problems([(True, two), (True, two)]) == []
