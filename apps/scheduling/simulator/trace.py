"""Loaders for the Alibaba GPU-sharing trace ("openb", cluster-trace-gpu-v2023) and its FGD arrival sequences.

The trace is not part of the repository: it is read from the folder named by ``GPUCLOUD_TRACE_DIR`` (else an
``alibaba-gpu-v2023`` trace folder beside the checkout). Formats: the trace's node and pod CSV files, and one JSON
object per arriving pod in its arrival sequences (docs/placement-simulator.md).
"""
from __future__ import annotations

import csv
import gzip
import json
import os
from pathlib import Path

from apps.scheduling.policies.base import NodeView, PodRequest

WORKLOADS = (
    "default",
    "cpu050", "cpu100", "cpu200", "cpu250",
    "gpushare40", "gpushare60", "gpushare80", "gpushare100",
    "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33",
    "multigpu20", "multigpu30", "multigpu40", "multigpu50",
)
SEEDS = tuple(range(42, 52))
GPU_NODE_FILE = "openb_node_list_gpu_node.csv"


def trace_dir(path: str | os.PathLike | None = None) -> Path:
    """The trace folder: ``path``, else ``$GPUCLOUD_TRACE_DIR``, else the trace folder beside the checkout."""
    if path:
        return Path(path)
    if os.environ.get("GPUCLOUD_TRACE_DIR"):
        return Path(os.environ["GPUCLOUD_TRACE_DIR"])
    repo_root = Path(__file__).resolve().parents[3]
    return repo_root.parent / "shared" / "traces" / "alibaba-gpu-v2023"


def require_trace(directory: Path | None = None, filename: str = GPU_NODE_FILE) -> Path:
    """The trace folder, or FileNotFoundError with a one-line hint when its node list is missing."""
    folder = trace_dir(directory)
    if not (folder / filename).exists():
        raise FileNotFoundError(f"no openb trace in {folder} ({filename} missing): pass --trace-dir DIR or set "
                                f"GPUCLOUD_TRACE_DIR to the folder of the Alibaba cluster-trace-gpu-v2023 files")
    return folder


def load_nodes(directory: Path | None = None, filename: str = GPU_NODE_FILE) -> list[NodeView]:
    """Hosts of the node list, sorted by ``sn``, all capacity free."""
    nodes = []
    with open(require_trace(directory, filename) / filename, newline="") as fh:
        for row in csv.DictReader(fh):
            gpus = int(row["gpu"])
            nodes.append(NodeView(
                name=row["sn"], model=row["model"] if gpus else "",
                cpu_free_milli=int(row["cpu_milli"]), memory_free_mib=int(row["memory_mib"]),
                gpu_free_milli=(1000,) * gpus,
            ))
    nodes.sort(key=lambda n: n.name)
    return nodes


def _request(d: dict, name_key: str) -> PodRequest:
    num_gpu = int(d["num_gpu"])
    return PodRequest(
        cpu_milli=int(d["cpu_milli"]), memory_mib=int(d["memory_mib"]), num_gpu=num_gpu,
        gpu_milli=int(d["gpu_milli"]) if num_gpu else 0, gpu_spec=d.get("gpu_spec") or "", name=d[name_key],
    )


def load_workload_pods(workload: str, directory: Path | None = None) -> list[PodRequest]:
    """All pods of ``openb_pod_list_<workload>.csv`` (the workload FGD measures fragmentation against)."""
    with open(trace_dir(directory) / f"openb_pod_list_{workload}.csv", newline="") as fh:
        return [_request(row, "name") for row in csv.DictReader(fh)]


def sequence_path(workload: str, seed: int, directory: Path | None = None) -> Path:
    return trace_dir(directory) / "sequences" / f"openb-{workload}-seed{seed}.jsonl.gz"


def load_sequence(workload: str, seed: int, directory: Path | None = None,
                  limit: int | None = None) -> list[PodRequest]:
    """The arrival sequence (in order); ``limit`` keeps only the first pods (for tests)."""
    out = []
    with gzip.open(sequence_path(workload, seed, directory), "rt") as fh:
        for line in fh:
            out.append(_request(json.loads(line), "pod"))
            if limit is not None and len(out) >= limit:
                break
    return out
