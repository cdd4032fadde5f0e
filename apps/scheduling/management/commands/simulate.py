"""Replay the Alibaba GPU-sharing trace's FGD arrival sequences through the packing policies.

Examples::

    manage.py simulate                                   # default workload, seeds 42-51, all policies
    manage.py simulate --workload gpushare40 --policy fgd --policy ours --seeds 42-44
    manage.py simulate --seeds 42 --export-placements /tmp/placements   # DIR/<policy>/<workload>-seed<S>.jsonl

Prints GPU allocation % and fragmentation % (FGD's measure) at arrived-workload levels, per replay and as the
mean per (workload, policy). Uses the in-memory backend and the same policy objects as the placement service.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from apps.scheduling.policies import POLICY_NAMES
from apps.scheduling.simulator import trace
from apps.scheduling.simulator.runner import parse_seeds, run_grid
from apps.scheduling.simulator.trace import WORKLOADS


class Command(BaseCommand):
    help = "Replay openb arrival sequences (FGD protocol) and report allocation and fragmentation."

    def add_arguments(self, parser):
        parser.add_argument("--workload", action="append", choices=WORKLOADS,
                            help="workload name (repeatable; default: default)")
        parser.add_argument("--policy", action="append", choices=POLICY_NAMES,
                            help="policy (repeatable; default: all)")
        parser.add_argument("--seeds", default="42-51", help="e.g. 42-51 or 42,43 (default 42-51)")
        parser.add_argument("--levels", default="100,110,120,130",
                            help="arrived-workload levels in %% to print, or 'all' for 0..130 (default 100,110,120,130)")
        parser.add_argument("--export-placements", metavar="DIR", help="write DIR/<policy>/<workload>-seed<S>.jsonl")
        parser.add_argument("--trace-dir", help="trace folder (default: $GPUCLOUD_TRACE_DIR, else the trace folder beside the checkout)")
        parser.add_argument("--json", action="store_true", help="print one JSON object per replay")

    def handle(self, *args, **opts):
        workloads = opts["workload"] or ["default"]
        policies = opts["policy"] or list(POLICY_NAMES)
        try:
            seeds = parse_seeds(opts["seeds"])
            levels = (list(range(0, 131)) if opts["levels"] == "all"
                      else [int(x) for x in opts["levels"].split(",") if x])
        except ValueError as exc:
            raise CommandError(f"bad --seeds or --levels: {exc}") from exc
        trace_dir = Path(opts["trace_dir"]) if opts["trace_dir"] else None
        try:
            trace.require_trace(trace_dir)
        except FileNotFoundError as exc:
            raise CommandError(str(exc)) from exc
        export = Path(opts["export_placements"]) if opts["export_placements"] else None

        def show(s):
            if opts["json"]:
                d = s.as_dict()
                d["alloc"] = {lv: s.alloc_curve.get(lv) for lv in levels}
                d["frag"] = {lv: s.frag_curve.get(lv) for lv in levels}
                self.stdout.write(json.dumps(d))
                return
            cells = " ".join(f"{s.alloc_curve.get(lv, float('nan')):6.2f}/{s.frag_curve.get(lv, float('nan')):5.2f}"
                             for lv in levels)
            self.stdout.write(f"{s.workload:12} {s.policy:9} {s.seed:3d}  {cells}  failed={s.failed} "
                              f"{s.seconds:.1f}s")

        if not opts["json"]:
            self.stdout.write("alloc%/frag% at arrived " + ", ".join(f"{lv}%" for lv in levels))
        results = run_grid(workloads, policies, seeds, directory=trace_dir, export_dir=export, progress=show)
        if opts["json"]:
            return
        groups = defaultdict(list)
        for s in results:
            groups[(s.workload, s.policy)].append(s)
        self.stdout.write("mean over seeds:")
        for (workload, policy), rows in groups.items():
            cells = " ".join(
                f"{sum(r.alloc_curve.get(lv, 0) for r in rows) / len(rows):6.2f}/"
                f"{sum(r.frag_curve.get(lv, 0) for r in rows) / len(rows):5.2f}" for lv in levels)
            self.stdout.write(f"{workload:12} {policy:9} n={len(rows):2d} {cells}")
