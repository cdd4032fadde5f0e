"""Place and claim atomically, with retry when a concurrent claim wins the race.

`placement_claim` is what the compute and lease services call. It never claims on a host the placement engine
did not choose, and a refusal always carries the exact path's per-filter explanation.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction

from ..errors import CapacityUnavailable, InvalidPlacementRequest
from ..ledger import ConsumerRef, allocations_claim, lock_hosts
from ..models import Allocation
from ..placement import Candidate, PlacementRequest, Result, place
from .admission import refusal_summary

MAX_ROUNDS = 3


@dataclass
class Placed:
    candidate: Candidate
    allocations: list[Allocation]


def placement_candidates(*, actor, request: PlacementRequest, limit: int = 5) -> Result:
    """Staff dry run: where `request` would land and why (exact path, every host evaluated). Writes nothing."""
    return place(request, limit=limit, explain=True)


def _claim_candidate(req: PlacementRequest, cand: Candidate, consumers: Sequence[ConsumerRef]) -> list[Allocation]:
    from apps.core import clock

    if len(consumers) == 1 and len(cand.hosts) == 1:  # one claim: its own transaction, no savepoint
        return allocations_claim(consumer=consumers[0], specs=cand.hosts[0].specs, start=req.start, end=req.end,
                                 spot=req.spot, parent_consumer_id=req.lease_id)
    with transaction.atomic():
        if len(cand.hosts) > 1:  # gang: lock every host first, in id order, so two gangs cannot deadlock
            lock_hosts([h.host_id for h in cand.hosts], clock.now())
        rows: list[Allocation] = []
        if len(consumers) == 1:
            specs = [s for h in cand.hosts for s in h.specs]
            return allocations_claim(consumer=consumers[0], specs=specs, start=req.start, end=req.end,
                                     spot=req.spot, parent_consumer_id=req.lease_id)
        for consumer, h in zip(consumers, cand.hosts, strict=True):
            rows += allocations_claim(consumer=consumer, specs=h.specs, start=req.start, end=req.end,
                                      spot=req.spot, parent_consumer_id=req.lease_id)
        return rows


def placement_claim(*, actor, request: PlacementRequest, consumers: ConsumerRef | Sequence[ConsumerRef]) -> Placed:
    """Place `request` and claim the result in one transaction for `consumers` (one consumer for everything,
    or one per requested host - cluster members). Tries each candidate in rank order; when all lost a race it
    places again on the fresh ledger (up to 3 rounds; a host that failed twice is skipped).

    Raises `CapacityUnavailable` (409, ``capacity_unavailable``) with ``explanation``; `InvalidPlacementRequest`
    (400) when the consumers do not match the request."""
    consumers = [consumers] if isinstance(consumers, ConsumerRef) else list(consumers)
    if len(consumers) not in (1, request.hosts):
        raise InvalidPlacementRequest(f"give one consumer or {request.hosts} (one per host)")
    failed: Counter = Counter()
    last: CapacityUnavailable | None = None
    for _ in range(MAX_ROUNDS):
        skip = frozenset(h for h, n in failed.items() if n >= 2)
        result = place(request, limit=5, exclude_hosts=skip)
        if not result.candidates:
            break
        for cand in result.candidates:
            try:
                return Placed(cand, _claim_candidate(request, cand, consumers))
            except CapacityUnavailable as exc:
                last = exc
                failed.update(h.host_id for h in cand.hosts)
    explanation = place(request, limit=1, explain=True).explanation
    detail = "No host can hold the request: " + _summary(explanation)
    if last is not None and not _summary_blocking(explanation):
        detail = f"Every candidate was taken by concurrent claims ({last.detail})"
    raise CapacityUnavailable(detail, explanation=explanation)


def _summary_blocking(explanation: dict) -> list[str]:
    return [f["filter"] for f in explanation.get("filters", []) if f["removed"]]


_summary = refusal_summary
