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

    @pytest.mark.parametrize("name", ["random", "best-fit", "fgd", "ours"])
    def test_gpus_of_an_unnamed_model_serve_requests_that_name_no_model(self, name):
        pol = get_policy(name, distribution=DIST)
        share = PodRequest(cpu_milli=1000, memory_mib=10, num_gpu=1, gpu_milli=500)
        whole = PodRequest(cpu_milli=1000, memory_mib=10, num_gpu=2, gpu_milli=1000)
        assert pol.score(node(model=""), share) is not None
        assert pol.choose_gpus(node(model=""), whole) == (0, 1)
        assert pol.score(node(model=""), PodRequest(1000, 10, 1, 500, gpu_spec="G2")) is None
        assert pol.score(node(model=""), PodRequest(1000, 10, 1, 500, gpu_spec="|")) is not None  # no model named
        if name == "random":  # random scores are random
            return
        # and scored like GPUs of a named model (the target workload names none): same state, same score
        assert pol.score_many([node(model=""), node(model="G2")], share) == pol.score_many(
            [node(model="G2"), node(model="G2")], share)

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

    @pytest.mark.parametrize("name", ["fgd", "ours", "best-fit"])
    def test_share_on_a_host_with_more_than_64_gpus_gets_a_gpu_that_fits(self, name):
        pol = get_policy(name, distribution=DIST)
        req = PodRequest(cpu_milli=1000, memory_mib=10, num_gpu=1, gpu_milli=470)
        wide = node("wide", gpus=(0,) * 65 + (1000,) * 5, cpu=10**6, mem=10**7)
        batch = NodeBatch.from_views([wide])
        best = pol.place(batch, req)
        assert best.gpus[0] >= 65 and best == pol.candidates(batch, req)[0]
        assert pol.choose_gpus(wide, req) == best.gpus
        batch.apply(best.row, req, best.gpus)  # raises if the GPU lacks the share

    @pytest.mark.parametrize("rank", [[0], [0, 1, 2], [[0, 1]]])
    def test_rank_needs_one_entry_per_host(self, rank):
        with pytest.raises(ValueError, match="one rank per host"):
            NodeBatch.from_views([node("a"), node("b")], rank=rank)

    @pytest.mark.parametrize("kw", [{"cpu_milli": 2**63}, {"memory_mib": 2**64}, {"num_gpu": 2**63}])
    def test_quantities_beyond_int64_are_a_value_error(self, kw):
        with pytest.raises(ValueError, match="int64"):
            PodRequest(**{"cpu_milli": 1000, "memory_mib": 10, "num_gpu": 1, "gpu_milli": 500, **kw})
        view = {"cpu_milli": "cpu", "memory_mib": "mem", "num_gpu": "pods_free"}[next(iter(kw))]
        with pytest.raises(ValueError, match="int64"):
            NodeBatch.from_views([node("a"), node("b", **{view: next(iter(kw.values()))})])

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

    @pytest.mark.parametrize("reserve", [False, True])
    def test_fast_place_equals_full_ranking(self, reserve):
        rng = np.random.default_rng(5)
        width = [1, 2, 4, 8] if reserve else list(range(1, 9))
        views = [node(f"h{i}", gpus=tuple(int(x) for x in rng.choice([0, 190, 530, 1000, 1000, 1000] if reserve
                                                                      else [0, 190, 530, 1000],
                                                                      size=rng.choice(width))),
                      cpu=int(rng.integers(1, 64)) * 1000, mem=int(rng.integers(1, 64)) * 4096,
                      model=str(rng.choice(["G2", "T4"])))
                 for i in range(40)]
        dist = DIST
        if reserve:  # memory per shape and two multi-GPU groups that become scarce as the fleet fills
            dist = PodTypeDistribution(types=DIST.types, counts=DIST.counts, memory_mib=(8192, 16384),
                                       multi_gpu=((2, 0.2, 4000), (8, 0.3, 16000)))
        ours = get_policy("ours", distribution=dist)
        batch = NodeBatch.from_views(views, rank=rng.permutation(40))
        scarce_seen = reserved = 0
        for _ in range(150):
            kind = rng.integers(5 if reserve else 3)
            mem = int(rng.integers(1, 8)) * 2048 if reserve else 1
            req = (PodRequest(int(rng.integers(1, 8)) * 500, mem) if kind == 0 else
                   PodRequest(1000, mem, 1, int(rng.choice([230, 470, 500, 810]))) if kind == 1 else
                   PodRequest(2000, mem, int(rng.choice([1, 2])), 1000) if kind == 2 else
                   PodRequest(4000, mem, int(rng.choice([2, 4, 8])), 1000) if kind == 3 else
                   PodRequest(1000, mem, 2, int(rng.choice([300, 600]))))
            fast, full = ours.place(batch, req), ours.candidates(batch, req)
            assert (fast is None) == (not full)
            scarce_seen += ours.reserve.scarce(batch).size > 0
            if fast is not None:
                assert fast == full[0]
                reserved += any(c.score < -(2**47) for c in full)  # a candidate with a reserve penalty
                batch.apply(fast.row, req, fast.gpus)
        if reserve:
            assert scarce_seen > 10 and reserved > 5


class TestOursDistribution:
    def test_from_requests_keeps_multi_gpu_groups_and_memory_the_cut_drops(self):
        reqs = ([PodRequest(1000, m, 1, 500) for m in (100, 200, 300) for _ in range(20)]
                + [PodRequest(2000, 4000, 1, 1000)] * 36 + [PodRequest(3000, 1, 0, 0)] * 3
                + [PodRequest(6000, 1, 2, 1000), PodRequest(2000, 1, 2, 1000), PodRequest(4000, 1, 2, 1000)]
                + [PodRequest(32000, 1, 8, 1000)] + [PodRequest(1000, 1, 2, 300)])
        dist = PodTypeDistribution.from_requests(reqs)
        assert all(t.num_gpu < 2 for t in dist.types)  # the 95 % cut drops every multi-GPU shape
        assert dist.types[:2] == (PodType(1000, 500, 1, ""), PodType(2000, 1000, 1, ""))
        assert dist.memory_mib[:2] == (200, 4000)  # median memory per kept shape
        assert len(dist.memory_mib) == len(dist.types)
        total = 60 * 500 + 36 * 1000 + 3 * 2000 + 8000 + 600
        # whole-GPU groups only (the 2 x 300-milli pod counts in the total, not as a group); median CPU
        assert dist.multi_gpu == ((2, 6000 / total, 4000), (8, 8000 / total, 32000))

    def test_fgd_ignores_the_new_fields(self):
        plain = PodTypeDistribution(types=DIST.types, counts=DIST.counts)
        rich = PodTypeDistribution(types=DIST.types, counts=DIST.counts, memory_mib=(10, 10),
                                   multi_gpu=((2, 0.9, 1000),))
        views = [node("a", gpus=(1000, 600)), node("b", gpus=(1000, 1000)), node("c", gpus=(300, 1000), cpu=1500)]
        req = PodRequest(cpu_milli=1000, memory_mib=5, num_gpu=1, gpu_milli=500)
        assert FgdPolicy(plain).score_many(views, req) == FgdPolicy(rich).score_many(views, req)


# One typical shape: a whole GPU with 4 cores. 8-GPU pods (8 cores) are 60 % of the GPU demand, but the cut
# dropped them (as on the openb workloads): only `multi_gpu` knows them.
RESERVE_DIST = PodTypeDistribution(types=(PodType(4000, 1000, 1, ""),), counts=(1,), multi_gpu=((8, 0.6, 8000),))


class TestOursReserve:
    one_gpu = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=1000)

    def test_keeps_the_last_able_8_gpu_host_when_scarce(self):
        fresh = node("fresh", gpus=(1000,) * 8, cpu=64_000)
        partial = node("partial", gpus=(1000,) * 7 + (0,), cpu=4_500)  # 7 free GPUs: cannot take an 8-GPU pod
        fgd, ours = FgdPolicy(RESERVE_DIST), get_policy("ours", distribution=RESERVE_DIST)
        batch = NodeBatch.from_views([fresh, partial])
        # FGD alone: on "partial" the pod leaves 3.5 cores < 4, so its 6 free GPUs become fragment
        assert fgd.score(fresh, self.one_gpu) > fgd.score(partial, self.one_gpu)
        assert fgd.place(batch, self.one_gpu).node == "fresh"
        # able 8-GPU hosts: 1 <= 0.6 * 15000 / 8000 = 1.125 -> scarce; "fresh" is the last one
        assert ours.reserve.scarce(batch).tolist() == [0]
        best = ours.place(batch, self.one_gpu)
        assert best.node == "partial"
        assert best == ours.candidates(batch, self.one_gpu)[0]
        # a CPU-only pod that leaves less than the 8-GPU pods' 8 cores breaks an able host too
        cpu_rows = np.array([0, 1])
        scarce = ours.reserve.scarce(batch)
        assert ours.reserve.key(batch, PodRequest(56_000, 1), cpu_rows, None, scarce).tolist() == [0, 0]
        assert ours.reserve.key(batch, PodRequest(57_000, 1), cpu_rows, None, scarce).tolist() == [-1, 0]

    def test_a_share_keeps_the_full_gpus_of_the_last_able_host(self):
        dist = PodTypeDistribution(types=(PodType(1000, 500, 1, ""), PodType(1000, 1000, 1, "")), counts=(1, 1),
                                   multi_gpu=((8, 0.9, 1000),))
        share = PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=1, gpu_milli=500)
        fresh = node("fresh", gpus=(1000,) * 8, cpu=64_000)
        other = node("other", gpus=(1000,) * 6 + (0, 0), cpu=64_000)
        ours, fgd = get_policy("ours", distribution=dist), FgdPolicy(dist)
        batch = NodeBatch.from_views([fresh, other])
        assert fgd.place(batch, share).node == "fresh"  # equal FGD scores, rank
        assert ours.place(batch, share).node == "other"
        # once "fresh" has a partly used GPU, a share there takes no full GPU: no reserve penalty
        half = node("fresh", gpus=(1000,) * 8 + (600,), cpu=64_000)
        batch = NodeBatch.from_views([half, other])
        best = ours.place(batch, share)
        assert (best.node, best.gpus) == ("fresh", (8,))
        assert best == ours.candidates(batch, share)[0]

    def test_not_scarce_means_no_reserve_key(self):
        from apps.scheduling.policies.ours import OursPolicy

        views = [node("fresh", gpus=(1000,) * 8, cpu=64_000), node("fresh2", gpus=(1000,) * 8, cpu=64_000),
                 node("partial", gpus=(1000,) * 7 + (0,), cpu=4_500)]
        ours = OursPolicy(RESERVE_DIST)
        old = OursPolicy(PodTypeDistribution(types=RESERVE_DIST.types, counts=RESERVE_DIST.counts))
        batch = NodeBatch.from_views(views)
        # able 8-GPU hosts: 2 > 0.6 * 23000 / 8000 = 1.725 -> not scarce
        assert ours.reserve.scarce(batch).size == 0
        for req in (self.one_gpu, PodRequest(cpu_milli=60_000, memory_mib=1),
                    PodRequest(cpu_milli=1000, memory_mib=1, num_gpu=8, gpu_milli=1000)):
            assert ours.candidates(batch, req) == old.candidates(batch, req)
            assert ours.place(batch, req) == old.place(batch, req)
        assert ours.place(batch, self.one_gpu).node == "fresh"


class TestOursMemory:
    def test_capacity_counts_memory_copies(self):
        from apps.scheduling.policies.ours import CapacityModel

        dist = PodTypeDistribution(types=DIST.types, counts=DIST.counts, memory_mib=(30_000, 0))
        model = CapacityModel(dist)
        batch = NodeBatch.from_views([node(gpus=(1000, 1000), mem=100_000), node(gpus=(1000, 1000), mem=50_000)])
        # 500-shape: 4 GPU copies, memory allows 3 / 1; 1000-shape (memory 0 = no limit): 2 copies
        assert list(model.host_state(batch)[1]) == [3 + 2, 1 + 2]

    def test_host_whose_memory_would_strand_its_gpus_loses(self):
        from apps.scheduling.policies.ours import OursPolicy

        dist = PodTypeDistribution(types=(PodType(1000, 1000, 1, ""),), counts=(1,), memory_mib=(16_000,))
        pod = PodRequest(cpu_milli=1000, memory_mib=40_000)
        tight = node("tight", gpus=(1000, 1000), mem=50_000)  # 10 GiB left: no 16 GiB GPU pod fits any more
        roomy = node("roomy", gpus=(1000, 1000), mem=80_000)  # 40 GiB left: both GPUs stay usable
        batch = NodeBatch.from_views([tight, roomy])
        assert FgdPolicy(dist).place(batch, pod).node == "tight"  # FGD ignores memory: ties, rank
        blind = OursPolicy(PodTypeDistribution(types=dist.types, counts=dist.counts))
        assert blind.place(batch, pod).node == "tight"  # without the shapes' memory, as before
        ours = get_policy("ours", distribution=dist)
        assert ours.place(batch, pod).node == "roomy"
        assert ours.score(roomy, pod) > ours.score(tight, pod)
        # a GPU pod's own memory counts too
        gpu_pod = PodRequest(cpu_milli=1000, memory_mib=40_000, num_gpu=1, gpu_milli=1000)
        assert ours.place(batch, gpu_pod).node == "roomy"
