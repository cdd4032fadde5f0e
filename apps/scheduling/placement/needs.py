"""Host filters of other apps: conditions on hosts that only another app can judge, asked for per request.

A request names them in ``PlacementRequest.needs`` (`HostNeed`: the filter's name and its argument); the app that
owns the condition registers the filter once, from its `integrations.register`, with `register_host_filter`.
The exact path runs each needed filter after the host-level filters (host state .. memory) and before the
device step, on the hosts still in; a request with needs always takes the exact path (the SQL fast paths cannot
see them). A filter answers for the real fleet (``ideal=False``: what it can give now) and for the ideal one
(``ideal=True``, `apps.scheduling.services.fleet_fit`: only what no operator action short of changing the
hardware can fix), so a refusal is "never" (422 `unplaceable`) or "not now" (409 `capacity_unavailable`) as for
every other filter (docs/adr/0404-placement-admission.md).
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .explanation import Explanation
from .request import HostNeed, PlacementRequest


@dataclass(frozen=True)
class HostFilterResult:
    """What a host filter removed: ``removed`` maps a host id to the reason (a short phrase, counted in the
    explanation like every filter's reasons); ``note``: one line about the need itself (shown with the filter)."""

    removed: dict[uuid.UUID, str] = field(default_factory=dict)
    note: str = ""


#: ``fn(*, need, request, host_ids, ideal) -> HostFilterResult``; reads only.
HostFilter = Callable[..., HostFilterResult]

_FILTERS: dict[str, HostFilter] = {}


def register_host_filter(name: str, fn: HostFilter) -> None:
    """Register the host filter `name` (the `HostNeed.filter` that asks for it; the explanation's filter name)."""
    _FILTERS[name] = fn


def apply_needs(req: PlacementRequest, rows: Sequence, exp: Explanation, *, ideal: bool) -> list:
    """Keep the rows (anything with an ``id``: a host id) that every need of `req` keeps, recording the removed
    ones in `exp` under the need's filter name. A need without a registered filter is a programming error."""
    kept = list(rows)
    for need in req.needs:
        fn = _FILTERS.get(need.filter)
        if fn is None:
            raise LookupError(f"no host filter registered for {need.filter!r}")
        exp.declare(need.filter)
        result = fn(need=need, request=req, host_ids=[r.id for r in kept], ideal=ideal)
        if result.note:
            exp.note(need.filter, result.note)
        for r in kept:
            if r.id in result.removed:
                exp.remove(need.filter, result.removed[r.id])
        kept = [r for r in kept if r.id not in result.removed]
    return kept


__all__ = ["HostFilter", "HostFilterResult", "HostNeed", "apply_needs", "register_host_filter"]
