"""The policy interface: score (host, request) pairs with integers; the highest score wins.

Every policy implements one vectorised method, :meth:`Policy.score_rows`, over the feasible rows of a
:class:`~apps.scheduling.policies.base.NodeBatch`. Everything else (one host, many hosts, choosing the host and
its GPUs) is built on it here, so the API's placement service and the trace simulator run the same code.

Selection rule (kube-scheduler's, as the published FGD simulator runs it): filter infeasible hosts, score the
rest, apply the policy's ``normalize`` (min-max for best-fit, identity otherwise), take the highest score; ties
go to the lowest ``rank``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base import MILLI, NodeBatch, NodeView, Placement, PodRequest, first_free_gpus, least_sufficient_gpus


class Policy:
    """Base class. Subclasses set ``name`` and implement :meth:`score_rows`."""

    name = "base"

    # ---- to implement -------------------------------------------------------------------------------
    def score_rows(self, batch: NodeBatch, req: PodRequest, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Raw integer scores (int64[len(rows)]) for feasible ``rows``, and for fractional shares the GPU
        index each row would use (int64[len(rows)]; -1 where not a share)."""
        raise NotImplementedError

    def normalize(self, scores: np.ndarray) -> np.ndarray:
        return scores

    def reset(self, seed: int) -> None:
        """Re-seed any randomness (random policy); called by the simulator at the start of a replay."""

    # ---- derived API --------------------------------------------------------------------------------
    def gpus_for(self, batch: NodeBatch, row: int, req: PodRequest, share_gpu: int) -> tuple[int, ...]:
        if not req.is_gpu:
            return ()
        if req.is_share:
            return (int(share_gpu),)
        if req.gpu_milli == MILLI:
            return first_free_gpus(batch.gpu_free[row], req.num_gpu)
        return least_sufficient_gpus(batch.gpu_free[row], req)

    def candidates(self, batch: NodeBatch, req: PodRequest, limit: int | None = None) -> list[Placement]:
        """Feasible hosts best first (score desc, rank asc), each with the GPUs the policy would use."""
        rows = batch.feasible_rows(req)
        if rows.size == 0:
            return []
        raw, share = self.score_rows(batch, req, rows)
        scores = self.normalize(raw)
        order = np.lexsort((batch.rank[rows], -scores))
        if limit is not None:
            order = order[:limit]
        return [Placement(int(rows[i]), batch.names[rows[i]],
                          self.gpus_for(batch, int(rows[i]), req, int(share[i])), int(scores[i]))
                for i in order]

    def place(self, batch: NodeBatch, req: PodRequest) -> Placement | None:
        """The chosen host for ``req`` (None when no host can take it). Does not charge the batch."""
        rows = batch.feasible_rows(req)
        if rows.size == 0:
            return None
        raw, share = self.score_rows(batch, req, rows)
        scores = self.normalize(raw)
        top = np.flatnonzero(scores == scores.max())
        i = int(top[np.argmin(batch.rank[rows[top]])]) if top.size > 1 else int(top[0])
        row = int(rows[i])
        return Placement(row, batch.names[row], self.gpus_for(batch, row, req, int(share[i])), int(scores[i]))

    def score_many(self, nodes: Sequence[NodeView], req: PodRequest) -> list[int | None]:
        """Raw score per host (None: infeasible). One vectorised call; use this for many hosts."""
        batch = NodeBatch.from_views(nodes)
        out: list[int | None] = [None] * len(nodes)
        rows = batch.feasible_rows(req)
        if rows.size:
            raw, _ = self.score_rows(batch, req, rows)
            for r, s in zip(rows, raw, strict=True):
                out[int(r)] = int(s)
        return out

    def score(self, node: NodeView, req: PodRequest) -> int | None:
        """Raw score of one host for ``req``; None when the request does not fit there."""
        return self.score_many([node], req)[0]

    def choose_gpus(self, node: NodeView, req: PodRequest) -> tuple[int, ...]:
        """GPU indices the policy uses on ``node`` for ``req`` (``()`` for CPU-only); ValueError if infeasible."""
        batch = NodeBatch.from_views([node])
        rows = batch.feasible_rows(req)
        if rows.size == 0:
            raise ValueError(f"{req.name or 'request'} does not fit on {node.name}")
        _, share = self.score_rows(batch, req, rows)
        return self.gpus_for(batch, 0, req, int(share[0]))


def no_share(rows: np.ndarray) -> np.ndarray:
    return np.full(len(rows), -1, dtype=np.int64)
