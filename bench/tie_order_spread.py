"""How much of a seed-by-seed comparison is the tie order? Replay each arrival sequence of the Alibaba openb trace
with several tie orders, for FGD and ``ours``.

Under the FGD protocol a replay's seed picks two things: the arrival sequence
(``sequences/openb-<workload>-seed<S>.jsonl.gz``) and the random host permutation that breaks ties between equal
integer scores. This benchmark keeps the sequence and varies the permutation (``--tie-seeds``; the tie seed also
seeds a policy's own randomness, which FGD and ``ours`` do not have), so it shows, per
sequence, the spread of each policy over tie orders and where the protocol's own draw (tie seed = sequence seed)
falls in it. The seed-by-seed figure of ``bench/simulate_openb.py`` is unchanged; this is a second view of it.

Usage:
  .venv/bin/python bench/tie_order_spread.py                       # default workload, sequences 42-51, ties 1-9
  .venv/bin/python bench/tie_order_spread.py --seeds 48 --tie-seeds 1-20 --jobs 2

Per replay one line; per sequence one summary line: ``own`` is the protocol's draw, ``mean``/``min``/``max``
over the own draw and the extra tie seeds, ``own_pctl`` the share of draws the own draw beats (1.0: the best).
Last stdout line is JSON: per sequence and policy those figures, ``ours_minus_fgd_own`` (the protocol's per-seed
difference) and ``ours_minus_fgd_mean`` (difference of the means over tie orders), and their means over sequences.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from apps.scheduling.simulator import trace  # noqa: E402

_CONTEXTS: dict = {}


def _job(job):
    """(workload, policy, sequence seed, tie seed, trace dir) -> (policy, sequence, tie seed, alloc@130, cpu s)."""
    from apps.scheduling.simulator.runner import WorkloadContext

    workload, policy, seed, tie_seed, directory = job
    if workload not in _CONTEXTS:
        _CONTEXTS[workload] = WorkloadContext(workload, directory)
    summary, _ = _CONTEXTS[workload].run(policy, seed, tie_seed=tie_seed)
    return policy, seed, tie_seed, summary.alloc_130, summary.cpu_seconds


def spread(own: float, draws: list[float]) -> dict:
    """Figures of one (sequence, policy): ``draws`` holds every tie order's alloc %, the own draw included."""
    return {"own": own, "mean": round(statistics.mean(draws), 3), "min": min(draws), "max": max(draws),
            "draws": len(draws), "own_pctl": round(sum(d < own for d in draws) / max(len(draws) - 1, 1), 2)}


def main() -> int:
    from apps.scheduling.simulator.runner import parse_seeds

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="default")
    ap.add_argument("--seeds", default="42-51", help="arrival sequences (default 42-51)")
    ap.add_argument("--tie-seeds", default="1-9", help="extra tie-order seeds per sequence (default 1-9)")
    ap.add_argument("--policies", default="fgd,ours")
    ap.add_argument("--jobs", type=int, default=1, help="replays in parallel processes (default 1)")
    ap.add_argument("--trace-dir", help="trace folder (default $GPUCLOUD_TRACE_DIR, else the trace folder beside the checkout)")
    args = ap.parse_args()
    directory = Path(args.trace_dir) if args.trace_dir else None
    try:
        trace.require_trace(directory)
    except FileNotFoundError as exc:
        print(f"tie_order_spread: {exc}", file=sys.stderr)
        return 2
    seeds, policies = parse_seeds(args.seeds), [p for p in args.policies.split(",") if p]
    extra = parse_seeds(args.tie_seeds)
    work = [(args.workload, p, s, t, directory) for s in seeds for p in policies
            for t in [s] + [t for t in extra if t != s]]
    started = time.perf_counter()
    alloc: dict = defaultdict(dict)  # (policy, seq) -> {tie seed: alloc}
    cpu = []

    def record(res):
        policy, seq, tie, value, cpu_s = res
        alloc[(policy, seq)][tie] = value
        cpu.append(cpu_s)
        print(f"{args.workload:10} {policy:6} sequence {seq} ties {tie:3}: alloc@130 {value:6.2f}%", flush=True)

    if args.jobs > 1:
        from multiprocessing import Pool

        with Pool(args.jobs) as pool:
            for res in pool.imap_unordered(_job, work):
                record(res)
    else:
        for job in work:
            record(_job(job))

    per_seq: dict = {}
    for seq in seeds:
        row = {p: spread(alloc[(p, seq)][seq], list(alloc[(p, seq)].values())) for p in policies}
        if "fgd" in row and "ours" in row:
            row["ours_minus_fgd_own"] = round(row["ours"]["own"] - row["fgd"]["own"], 2)
            row["ours_minus_fgd_mean"] = round(row["ours"]["mean"] - row["fgd"]["mean"], 2)
        per_seq[seq] = row
        print(f"sequence {seq}: " + "  ".join(
            f"{p} own {row[p]['own']:.2f} mean {row[p]['mean']:.2f} [{row[p]['min']:.2f}, {row[p]['max']:.2f}] "
            f"own_pctl {row[p]['own_pctl']:.2f}" for p in policies), flush=True)
    summary = {"workload": args.workload, "replays": len(work), "wall_s": round(time.perf_counter() - started, 1),
               "cpu_seconds_per_replay": round(statistics.mean(cpu), 3), "per_sequence": per_seq}
    if all("ours_minus_fgd_own" in r for r in per_seq.values()):
        summary["mean_ours_minus_fgd_own"] = round(statistics.mean(r["ours_minus_fgd_own"] for r in per_seq.values()), 3)
        summary["mean_ours_minus_fgd_mean"] = round(
            statistics.mean(r["ours_minus_fgd_mean"] for r in per_seq.values()), 3)
        summary["min_ours_minus_fgd_mean"] = min(r["ours_minus_fgd_mean"] for r in per_seq.values())
        summary["fgd_spread_mean"] = round(statistics.mean(r["fgd"]["max"] - r["fgd"]["min"]
                                                           for r in per_seq.values()), 3)
        summary["ours_spread_mean"] = round(statistics.mean(r["ours"]["max"] - r["ours"]["min"]
                                                            for r in per_seq.values()), 3)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
