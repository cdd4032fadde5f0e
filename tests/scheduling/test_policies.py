"""Packing policies on hand-computed cases (no database, no trace needed)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from apps.scheduling.policies import (
    FgdPolicy,
    FragModel,
    NodeBatch,
    NodeView,
    PodRequest,
    PodType,
    PodTypeDistribution,
    get_policy,
)
from apps.scheduling.policies.best_fit import BestFitPolicy
from apps.scheduling.policies.random_fit import RandomPolicy

# Target workload: half shares of 500 milli, half whole GPUs; both with 1 core.
DIST = PodTypeDistribution(types=(PodType(1000, 500, 1, ""), PodType(1000, 1000, 1, "")), counts=(1, 1))


def node(name="n", gpus=(1000, 1000), cpu=10_000, mem=100_000, model="G2", pods_free=1001):
    return NodeView(name=name, model=model, cpu_free_milli=cpu, memory_free_mib=mem, gpu_free_milli=tuple(gpus),
                    pods_free=pods_free)


def frag_milli(view: NodeView) -> float:
    model = FragModel(DIST)
    batch = NodeBatch.from_views([view])
    return float(model.host_state(batch)[3][0]) / model.total


def sig100(delta):
    return int(1 / (1 + math.exp(-delta / 1000)) * 100)


class TestFragmentation:
    def test_partial_gpu_is_fragment_for_larger_types(self):
        # GPU1 has 300 free: too small for both types -> 300 fragment for each -> F = 300.
        assert frag_milli(node(gpus=(1000, 300))) == 300

    def test_free_gpu_only_fragment_for_types_it_cannot_host(self):
        # [600, 1000]: 500-type uses both GPUs (0), 1000-type cannot use the 600 -> F = 600 / 2.
        assert frag_milli(node(gpus=(600, 1000))) == 300

    def test_lack_of_cpu_makes_everything_fragment(self):
        assert frag_milli(node(gpus=(1000, 1000), cpu=999)) == 2000

    def test_model_not_allowed_is_fragment(self):
        dist = PodTypeDistribution(types=(PodType(1000, 1000, 1, "T4"),), counts=(1,))
        model = FragModel(dist)
        batch = NodeBatch.from_views([node(model="G2"), node(model="T4")])
        assert list(model.host_state(batch)[3] // model.total) == [2000, 0]

    def test_cpu_only_types_count_all_free_gpu(self):
        dist = PodTypeDistribution(types=(PodType(1000, 0, 0, ""), PodType(1000, 1000, 1, "")), counts=(3, 1))
        model = FragModel(dist)
        batch = NodeBatch.from_views([node(gpus=(1000, 1000))])
        assert model.host_state(batch)[3][0] / model.total == 2000 * 3 / 4

    def test_distribution_keeps_popular_shapes_up_to_95_percent(self):
        reqs = ([PodRequest(1000, 1, 1, 500)] * 60 + [PodRequest(2000, 1, 1, 1000)] * 36
                + [PodRequest(3000, 1, 0, 0)] * 3 + [PodRequest(4000, 1, 2, 1000)])
        dist = PodTypeDistribution.from_requests(reqs)
        assert dist.types == (PodType(1000, 500, 1, ""), PodType(2000, 1000, 1, ""))
        assert dist.counts == (60, 36)


class TestFgd:
    def test_share_goes_to_gpu_that_reduces_fragmentation(self):
        # [600, 1000]: on GPU0 -> [100, 1000], F 300 -> 100 (delta +200); on GPU1 -> [600, 500], F -> 550.
        fgd = FgdPolicy(DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=500)
        assert fgd.score(node(gpus=(600, 1000)), req) == sig100(200) == 54
        assert fgd.choose_gpus(node(gpus=(600, 1000)), req) == (0,)

    def test_share_on_fresh_host_breaks_a_whole_gpu(self):
        fgd = FgdPolicy(DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=500)
        # [1000, 300] -> [500, 300]: F 300 -> 550, delta -250.
        assert fgd.score(node(gpus=(1000, 300)), req) == sig100(-250) == 43

    def test_cpu_pod_that_changes_nothing_scores_exactly_50(self):
        fgd = FgdPolicy(DIST)
        assert fgd.score(node(gpus=(600, 1000)), PodRequest(cpu_milli=500, memory_mib=1)) == 50

    def test_cpu_pod_that_starves_gpus_scores_low(self):
        fgd = FgdPolicy(DIST)
        # cpu 1500 -> 500 < 1000: F 300 -> 1600, delta -1300.
        assert fgd.score(node(gpus=(600, 1000), cpu=1500), PodRequest(cpu_milli=1000, memory_mib=1)) == 21

    def test_whole_gpu_takes_lowest_free_indices(self):
        fgd = FgdPolicy(DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=2, gpu_milli=1000)
        assert fgd.choose_gpus(node(gpus=(300, 1000, 1000, 1000)), req) == (1, 2)

    def test_place_prefers_higher_score_then_rank(self):
        fgd = FgdPolicy(DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=500)
        views = [node("a", gpus=(1000, 300)), node("b", gpus=(600, 1000)), node("c", gpus=(600, 1000))]
        assert fgd.place(NodeBatch.from_views(views, rank=[0, 2, 1]), req).node == "c"
        assert fgd.place(NodeBatch.from_views(views, rank=[0, 1, 2]), req).node == "b"


class TestBestFitAndRandom:
    def test_best_fit_raw_score(self):
        req = PodRequest(cpu_milli=8000, memory_mib=1, num_gpu=1, gpu_milli=1000)
        # (1 - (0.5 * 56000/128000 + 0.5 * 1000/8000)) * 100 = 71.875
        assert BestFitPolicy().score(node(gpus=(1000, 1000), cpu=64_000), req) == 71

    def test_best_fit_normalises_and_picks_fullest(self):
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=200)
        views = [node("a", gpus=(1000, 1000)), node("b", gpus=(1000, 300)), node("c", gpus=(500, 250))]
        cands = BestFitPolicy().candidates(NodeBatch.from_views(views), req)
        assert [c.node for c in cands] == ["c", "b", "a"]
        assert cands[0].score == 100 and cands[-1].score == 0
        assert cands[0].gpus == (1,)  # least sufficient GPU

    def test_random_picks_a_feasible_host_and_sufficient_gpu(self):
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=700)
        views = [node("a", gpus=(500, 600)), node("b", gpus=(100, 800)), node("c", cpu=10)]
        pol = RandomPolicy(seed=1)
        for _ in range(20):
            p = pol.place(NodeBatch.from_views(views), req)
            assert (p.node, p.gpus) == ("b", (1,))


class TestInterface:
    @pytest.mark.parametrize("name", ["random", "best-fit", "fgd", "ours"])
    def test_infeasible_hosts_score_none(self, name):
        pol = get_policy(name, distribution=DIST)
        share = PodRequest(cpu_milli=1000, memory_mib=10, num_gpu=1, gpu_milli=500, gpu_spec="T4|A10")
        assert pol.score(node(model="G2"), share) is None  # model not allowed
        assert pol.score(node(model="T4", gpus=(400, 300)), share) is None  # no GPU with 500 free
        assert pol.score(node(model="T4", mem=5), share) is None  # memory
        assert pol.score(node(model="T4", pods_free=0), share) is None  # pod slots
        assert pol.score(node(model="T4"), share) is not None
        assert pol.score_many([node(model="G2"), node(model="T4")], share)[0] is None

    @pytest.mark.parametrize("name", ["best-fit", "fgd", "ours"])
    def test_place_matches_candidates_and_choose_gpus(self, name):
        pol = get_policy(name, distribution=DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=10, num_gpu=1, gpu_milli=500)
        views = [node("a", gpus=(1000, 700)), node("b", gpus=(600, 1000)), node("c", gpus=(1000, 1000))]
        batch = NodeBatch.from_views(views)
        best = pol.place(batch, req)
        assert best == pol.candidates(batch, req)[0]
        assert pol.choose_gpus(views[best.row], req) == best.gpus
        assert all(isinstance(s, int) for s in pol.score_many(views, req))

    def test_apply_rejects_overcommit(self):
        batch = NodeBatch.from_views([node(gpus=(400,))])
        with pytest.raises(ValueError):
            batch.apply(0, PodRequest(cpu_milli=1, memory_mib=1, num_gpu=1, gpu_milli=500), (0,))
        batch.apply(0, PodRequest(cpu_milli=1, memory_mib=1, num_gpu=1, gpu_milli=400), (0,))
        assert batch.view(0).gpu_free_milli == (0,)

    def test_derived_features_follow_apply(self):
        model = FragModel(DIST)
        batch = NodeBatch.from_views([node(gpus=(1000, 1000)), node(gpus=(600, 1000))])
        state = model.host_state(batch)
        batch.apply(0, PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=400), (0,))
        fresh = FragModel(DIST).host_state(NodeBatch.from_views([batch.view(0), batch.view(1)]))
        for a, b in zip(state, fresh, strict=True):
            assert np.array_equal(a, b)

    def test_unknown_policy(self):
        with pytest.raises(ValueError):
            get_policy("nope")
        with pytest.raises(ValueError):
            get_policy("fgd")


class TestOurs:
    def test_capacity_counts_copies_limited_by_gpu_granularity_and_cpu(self):
        from apps.scheduling.policies.ours import CapacityModel

        model = CapacityModel(DIST)  # shapes: (1 core, 500 milli) and (1 core, 1000 milli), one count each
        batch = NodeBatch.from_views([node(gpus=(1000, 600), cpu=10_000), node(gpus=(1000, 600), cpu=2_500)])
        # host 0: 500-shape fits 2 + 1 = 3 times, 1000-shape once -> 4; host 1: CPU caps both at 2 -> 3.
        assert list(model.host_state(batch)[1]) == [4, 3]

    def test_breaks_fgd_ties_towards_the_host_that_keeps_capacity(self):
        ours, fgd = get_policy("ours", distribution=DIST), FgdPolicy(DIST)
        cpu_pod = PodRequest(cpu_milli=3000, memory_mib=1)
        rich = node("rich", gpus=(1000, 1000), cpu=100_000)
        tight = node("tight", gpus=(1000, 1000), cpu=4_000)  # after 3 cores only 1 copy fits by CPU
        assert fgd.score(rich, cpu_pod) == fgd.score(tight, cpu_pod) == 50
        batch = NodeBatch.from_views([tight, rich])  # FGD's tie-break (rank) would pick "tight"
        assert fgd.place(batch, cpu_pod).node == "tight"
        assert ours.place(batch, cpu_pod).node == "rich"
        assert ours.score(rich, cpu_pod) > ours.score(tight, cpu_pod)

    def test_never_overrides_fgd_primary_order(self):
        ours, fgd = get_policy("ours", distribution=DIST), FgdPolicy(DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=500)
        a, b = node("a", gpus=(600, 1000)), node("b", gpus=(1000, 300), cpu=100_000)
        assert fgd.score(a, req) > fgd.score(b, req)
        assert ours.score(a, req) > ours.score(b, req)

    def test_fast_place_equals_full_ranking(self):
        rng = np.random.default_rng(5)
        views = [node(f"h{i}", gpus=tuple(int(x) for x in rng.choice([0, 190, 530, 1000], size=rng.integers(1, 9))),
                      cpu=int(rng.integers(1, 64)) * 1000, model=str(rng.choice(["G2", "T4"])))
                 for i in range(40)]
        ours = get_policy("ours", distribution=DIST)
        batch = NodeBatch.from_views(views, rank=rng.permutation(40))
        for _ in range(150):
            kind = rng.integers(3)
            req = (PodRequest(int(rng.integers(1, 8)) * 500, 1) if kind == 0 else
                   PodRequest(1000, 1, 1, int(rng.choice([230, 470, 500, 810]))) if kind == 1 else
                   PodRequest(2000, 1, int(rng.choice([1, 2])), 1000))
            fast, full = ours.place(batch, req), ours.candidates(batch, req)
            assert (fast is None) == (not full)
            if fast is not None:
                assert fast == full[0]
                batch.apply(fast.row, req, fast.gpus)
