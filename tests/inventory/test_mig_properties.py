"""Property test: for every catalog GPU with MIG, the planner accepts exactly the requests that fit.

The oracle enumerates, by brute force, every packing the catalog's placement table allows (non-overlapping
instances at allowed starts, per-profile maxima, compute slices <= 7) and checks requests against that set.
"""
from collections import Counter
from functools import cache

from hypothesis import given, settings
from hypothesis import strategies as st

from apps.inventory.catalog import gpu_model_get, gpu_model_list
from apps.inventory.mig import mig_plan

MIG_MODELS = [m.key for m in gpu_model_list() if m.mig]


@cache
def packings(key: str) -> tuple[frozenset, ...]:
    spec = gpu_model_get(key).mig
    candidates = [(p, s) for p in spec.profiles for s in p.starts]
    found: list[frozenset] = []

    def walk(i, chosen, used, compute, counts):
        if i == len(candidates):
            found.append(frozenset((p.id, s) for p, s in chosen))
            return
        walk(i + 1, chosen, used, compute, counts)
        p, s = candidates[i]
        span = set(range(s, s + p.memory))
        if span & used or compute + p.compute > spec.compute_slices or counts[p.id] >= p.max:
            return
        counts[p.id] += 1
        walk(i + 1, [*chosen, (p, s)], used | span, compute + p.compute, counts)
        counts[p.id] -= 1

    walk(0, [], set(), 0, Counter())
    return tuple(found)


def fits(key, current: frozenset, request: Counter) -> bool:
    return any(current <= pk and Counter(pid for pid, _ in pk - current) == request for pk in packings(key))


@st.composite
def cases(draw):
    key = draw(st.sampled_from(MIG_MODELS))
    spec = gpu_model_get(key).mig
    current = draw(st.sampled_from(packings(key))) if draw(st.booleans()) else frozenset()
    ids = [p.id for p in spec.profiles]
    request = draw(st.lists(st.sampled_from(ids), max_size=8))
    return key, current, request


def test_oracle_sees_the_documented_layouts():
    assert len(packings("H100-SXM5-80GB")) > 100
    assert frozenset({(5, 0), (9, 4)}) in packings("A100-SXM4-40GB")
    assert frozenset({(5, 0), (5, 4)}) not in packings("A100-SXM4-40GB")


@settings(max_examples=400, deadline=None)
@given(cases())
def test_planner_accepts_exactly_what_fits(case):
    key, current, request = case
    spec = gpu_model_get(key).mig
    by_id = {p.id: p for p in spec.profiles}
    plan = mig_plan(spec, request, current=[(by_id[pid].name, s) for pid, s in sorted(current)])
    want = fits(key, current, Counter(request))
    assert plan.ok == want, plan.explain()
    if plan.ok:
        result = frozenset((p.profile_id, p.start) for p in plan.layout)
        assert result in packings(key)  # obeys the placement table
        assert current <= result
        assert sorted(p.profile_id for p in plan.placements) == sorted(request)
    else:
        assert plan.rejections and all(r.message for r in plan.rejections)
