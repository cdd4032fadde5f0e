"""Check a placement file against the protocol, independently of the policy that wrote it.

Re-applies each line of ``DIR/<policy>/<workload>-seed<S>.jsonl`` to a fresh in-memory fleet: a placement that
over-commits a host (CPU, memory, pod slots, GPU milli, wrong model, wrong number of GPUs) raises ValueError; a
pod left unplaced although some host could take it at that moment counts as ``refused_feasible``. Returns the
allocation % at 130 % arrived computed from the file alone.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from apps.scheduling.policies import NodeBatch

from . import trace
from .engine import bucket_curve


def verify_placement_file(path: Path, workload: str, seed: int, directory: Path | None = None) -> dict:
    nodes = trace.load_nodes(directory)
    index = {n.name: i for i, n in enumerate(nodes)}
    pods = trace.load_sequence(workload, seed, directory)
    batch = NodeBatch.from_views(nodes)
    total = sum(len(n.gpu_free_milli) for n in nodes) * 1000
    arrived = used = refused_feasible = 0
    arrived_pct, alloc_pct = np.empty(len(pods)), np.empty(len(pods))
    with open(path) as fh:
        lines = fh.read().splitlines()
    if len(lines) != len(pods):
        raise ValueError(f"{path}: {len(lines)} lines for {len(pods)} arrivals")
    for i, (req, line) in enumerate(zip(pods, lines, strict=True)):
        rec = json.loads(line)
        if rec["pod"] != req.name or rec["milli"] != req.gpu_milli:
            raise ValueError(f"line {i + 1}: pod or milli does not match the sequence")
        arrived += req.total_gpu_milli
        if rec["node"] is None:
            refused_feasible += int(batch.feasible_rows(req).size > 0)
        else:
            row = index[rec["node"]]
            if req.is_gpu and not batch.spec_mask(req.gpu_spec)[batch.model_idx[row]]:
                raise ValueError(f"line {i + 1}: model of {rec['node']} not allowed")
            if not req.is_gpu and rec["gpus"]:
                raise ValueError(f"line {i + 1}: GPUs charged to a CPU-only pod")
            batch.apply(row, req, rec["gpus"])
            used += req.total_gpu_milli
        arrived_pct[i] = arrived / (total / 1000) / 10
        alloc_pct[i] = used / (total / 1000) / 10
    return {"refused_feasible": refused_feasible, "alloc_130": bucket_curve(arrived_pct, alloc_pct).get(130)}
