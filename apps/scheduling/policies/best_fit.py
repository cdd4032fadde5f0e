"""Best-fit: the host whose free CPU and GPU left after placement are smallest.

Baseline "BestFit" of the FGD paper (USENIX ATC 2023, Sec. 6.1), as its artifact scores it: raw score
``int((1 - (0.5 * (cpu_free - cpu_req) / 128000 + 0.5 * (gpu_free_total - gpu_req_total) / 8000)) * 100)``
(128 cores and 8 GPUs are the largest host spec), then min-max normalised over the feasible hosts to 0..100
with integer division; a share goes to the sufficient GPU with the least free milli (lowest index on ties).
"""
from __future__ import annotations

import numpy as np

from .base import NodeBatch, PodRequest
from .policy import Policy, no_share

MAX_SPEC_CPU_MILLI = 128_000
MAX_SPEC_GPU_MILLI = 8_000


class BestFitPolicy(Policy):
    name = "best-fit"

    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray):
        gpu = batch.gpu_free[rows]
        free_gpu = np.where(gpu > 0, gpu, 0).sum(axis=1)
        s = (batch.cpu_free[rows] - req.cpu_milli) / MAX_SPEC_CPU_MILLI * 0.5
        s = s + (free_gpu - req.total_gpu_milli) / MAX_SPEC_GPU_MILLI * 0.5
        scores = ((1.0 - s) * 100).astype(np.int64)
        if not req.is_share:
            return scores, no_share(rows)
        key = np.where(gpu >= req.gpu_milli, gpu, np.iinfo(np.int64).max)
        return scores, key.argmin(axis=1)

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        lo, hi = scores.min(), scores.max()
        if hi == lo:
            return np.zeros_like(scores)
        return (scores - lo) * 100 // (hi - lo)
