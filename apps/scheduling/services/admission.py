"""The placement rule every create follows (instances, clusters, leases; docs/adr/0404-placement-admission.md).

`placement_admit` answers, before anything is written, one of three ways:

1. **never** - no capacity of this fleet could ever hold the request, even empty and with every host that is not
   retired available (GPU model, GPUs per host or NVSwitch partition size, MIG/vGPU geometry, vCPUs or memory per
   host, too few such hosts, no topology that holds the gang, no such host meets a need such as an InfiniBand
   partition's fabric): 422 `unplaceable` with ``reason`` (the constraint that failed: `need_refusal`'s need,
   else `refusal_constraint`) and ``explanation`` (the per-filter counts of the ideal fleet);
2. **not now** - the fleet could hold it but cannot now: 409 `capacity_unavailable` with ``explanation``,
   ``constraint`` and ``earliest_start`` (the first instant the capacity calendar shows it fits: the end of an
   allocation that holds capacity - a lease, or work with a known end - or null when nothing known ends);
   unless the client asked to wait (``queue: true``): then the answer is `Admission(queued=True)` and the caller
   puts the request in its queue;
3. **now** - `Admission(now=True)`; the caller claims (a claim that then loses a race is "not now": the caller
   requeues it or answers 409, never `error`).

Reads only (the ledger and inventory); claims nothing.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.db import connection

from apps.core import clock
from apps.core.errors import DomainError

from ..errors import CapacityUnavailable, Code
from ..placement import PlacementRequest, place

#: How many future instants (allocation ends) `earliest_fit` tries at most.
EARLIEST_CANDIDATES = 16

ENDS_SQL = """
SELECT DISTINCT upper(a.period) AS t FROM scheduling_allocation a
WHERE a.parent_id IS NULL AND NOT a.spot AND NOT upper_inf(a.period) AND upper(a.period) > %(after)s
  AND (cardinality(%(models)s::text[]) = 0
       OR a.gpu_id IN (SELECT g.id FROM inventory_gpu g WHERE g.model = ANY(%(models)s::text[])))
ORDER BY t LIMIT %(limit)s
"""


class Unplaceable(DomainError):
    """422: no capacity of the fleet could ever hold the request as written (`reason`, `explanation`)."""

    code, status, title = Code.UNPLACEABLE.value, 422, "Unplaceable"

    def __init__(self, detail: str = "", *, reason: str = "", explanation: dict | None = None, **extra):
        super().__init__(detail or "No capacity of this fleet could ever hold the request.", reason=reason,
                         explanation=explanation or {}, **extra)
        self.reason = reason
        self.explanation = explanation or {}


@dataclass(frozen=True)
class Admission:
    """`now`: capacity exists now (claim it). `queued`: not now, and the client asked to wait (queue it);
    `reason` and `explanation` say why it waits."""

    now: bool
    queued: bool = False
    reason: str = ""
    explanation: dict = field(default_factory=dict)


def refusal_constraint(explanation: dict) -> str:
    """The constraint a refusal names: the topology limit, else the last filter that removed hosts, else
    ``no_hosts`` (the fleet has none), else ``capacity``. `placement_admit` and `fleet_fit` name a request's
    need instead when it alone refused the request (`need_refusal`)."""
    topo = explanation.get("topology") or {}
    if topo.get("constraint"):
        return topo["constraint"]
    if explanation.get("hosts_considered") == 0:
        return "no_hosts"
    removed = [f["filter"] for f in explanation.get("filters", []) if f.get("removed")]
    return removed[-1] if removed else "capacity"


def _hosts(n: int) -> str:
    return f"{n} host{'' if n == 1 else 's'}"


# filters whose reasons are a bare value (the host's state, its provisioning kind): the phrase around it
_REASON_WORDS = {"host_state": "host {} (not available)", "provisioning_kind": "{} host"}


def refusal_summary(explanation: dict) -> str:
    """The refusal's words for a person: the hosts considered, then per filter that removed any, its reasons (the
    filters' own phrases, most frequent first) with how many hosts each removed, e.g. ``"82 hosts considered; no
    GPU of L40S-48GB (74 hosts); no GPU that hands vGPUs to VMs as SR-IOV VFs has a free VF (8 hosts)"``. The
    filter names (``gpu_model``, ``vf_capacity``) stay in ``explanation`` for scripts."""
    parts = []
    for f in explanation.get("filters", []):
        if not f.get("removed"):
            continue
        reasons = f.get("reasons") or {f["filter"]: f["removed"]}
        parts += [f"{_REASON_WORDS.get(f['filter'], '{}').format(why)} ({_hosts(n)})" for why, n in reasons.items()]
    return f"{_hosts(explanation.get('hosts_considered', 0))} considered; " + ("; ".join(parts) or "none left")


def need_refusal(req: PlacementRequest, explanation: dict, *, ideal: bool) -> tuple[str, str] | None:
    """The host filter of another app that alone refused `req` (`PlacementRequest.needs`, e.g. compute's
    ``ib_partition``), as ``(filter, lead)``, or None. A need is the refusal's constraint when the same request
    without its needs would be placed (`place`, over the ideal fleet when `ideal`): every host that could hold
    the flavor failed the need, so the filters that ran after it (the device step) only removed hosts the need
    had kept, and the last filter that removed hosts (`refusal_constraint`) would name the wrong one - e.g. a MIG
    VM joining an InfiniBand partition whose MIG hosts have no HCA port on the fabric while the cabled HGX
    hosts have no MIG VFs. ``lead``: ``"<its most frequent reason> (<n> hosts)"``, what the refusal's
    detail starts with. One more placement pass, only for a refused request with needs (ADR 0406)."""
    if not req.needs or not place(dataclasses.replace(req, needs=()), limit=1, ideal=ideal).placeable:
        return None
    names = [n.filter for n in req.needs]
    for f in explanation.get("filters", []):
        if f["filter"] in names and f.get("removed"):
            top = next(iter(f["reasons"]), "")
            n = f["removed"]
            return f["filter"], f"{top} ({_hosts(n)})"
    return None


def _as_list(request) -> list[PlacementRequest]:
    return [request] if isinstance(request, PlacementRequest) else list(request)


def fleet_fit(request: PlacementRequest | Sequence[PlacementRequest]) -> None:
    """Raise `Unplaceable` when some request could not be held even by the empty fleet (`place(ideal=True)`)."""
    for req in _as_list(request):
        result = place(req, limit=1, ideal=True)
        if not result.placeable:
            exp = result.explanation
            reason, lead = need_refusal(req, exp, ideal=True) or (refusal_constraint(exp), "")
            raise Unplaceable("No capacity of this fleet could ever hold the request: "
                              + (f"{lead}; " if lead else "") + refusal_summary(exp),
                              reason=reason, explanation=exp)


def _shifted(req: PlacementRequest, t: dt.datetime) -> PlacementRequest:
    if req.start is not None and req.end is not None:
        return dataclasses.replace(req, start=t, end=t + (req.end - req.start))
    return dataclasses.replace(req, start=t, end=req.end if req.end and req.end > t else None)


def earliest_fit(request: PlacementRequest | Sequence[PlacementRequest], *,
                 fits: Callable[[dt.datetime], bool] | None = None) -> dt.datetime | None:
    """The first future instant (an end of a top-level, non-spot allocation after the request's start) at which
    the request fits, keeping its duration (ends of allocations on GPUs of the request's models, when it names
    models); None when none of the next `EARLIEST_CANDIDATES` ends makes it fit
    (on-demand work has no end: the time is unknown). `fits(t)` overrides the test (a lease tries its claim in a
    rolled-back savepoint)."""
    requests = _as_list(request)
    after = max([r.start for r in requests if r.start] + [clock.now()])
    with connection.cursor() as cur:
        models = sorted({m for r in requests for m in r.gpu_models})
        cur.execute(ENDS_SQL, {"after": after, "models": models, "limit": EARLIEST_CANDIDATES})
        instants = [r[0] for r in cur.fetchall()]
    for t in instants:
        if fits is not None:
            ok = fits(t)
        else:
            ok = all(place(_shifted(r, t), limit=1).placeable for r in requests)
        if ok:
            return t
    return None


def capacity_unavailable(request: PlacementRequest | Sequence[PlacementRequest], explanation: dict, *,
                         detail: str = "", fits: Callable[[dt.datetime], bool] | None = None,
                         **extra) -> CapacityUnavailable:
    """The "not now" answer: `CapacityUnavailable` with ``constraint``, ``explanation`` and ``earliest_start``
    (ISO 8601 UTC, or null)."""
    t = earliest_fit(request, fits=fits)
    extra.setdefault("constraint", refusal_constraint(explanation))
    return CapacityUnavailable(detail or "No capacity can hold the request now: " + refusal_summary(explanation),
                               explanation=explanation, earliest_start=t.isoformat() if t else None, **extra)


def placement_admit(*, request: PlacementRequest | Sequence[PlacementRequest], queue: bool = False) -> Admission:
    """Apply the rule (module doc) to `request` (several requests must each fit). Raises `Unplaceable` (422)
    or, unless `queue`, `CapacityUnavailable` (409 with ``earliest_start``)."""
    requests = _as_list(request)
    for req in requests:
        if not place(req, limit=1).placeable:   # fits now (the fast path): it could ever fit, nothing else to ask
            fleet_fit(requests)                 # the exact pass over the ideal fleet only for refusals
            exp = place(req, limit=1, explain=True).explanation
            need = need_refusal(req, exp, ideal=False)
            summary = (f"{need[1]}; " if need else "") + refusal_summary(exp)
            if queue:
                return Admission(now=False, queued=True, reason=summary, explanation=exp)
            if need is None:
                raise capacity_unavailable(requests, exp)
            raise capacity_unavailable(requests, exp, constraint=need[0],
                                       detail="No capacity can hold the request now: " + summary)
    return Admission(now=True)


# ---- launch checks: the rule's answer without the create (docs/adr/0405-launch-checks.md) ---------------------
#: What a launch check reports in its body instead of raising: the create's refusals that depend on the state
#: of the fleet or of the tenant's quota (409 and 422). A 400, 403 or 404 is raised as the create raises it.
CHECK_ANSWERED_STATUSES = frozenset({409, 422})


def check_refusal(exc: DomainError) -> bool:
    """Whether a launch check answers `exc` in its 200 body (the create would refuse with this code)."""
    return exc.status in CHECK_ANSWERED_STATUSES


def refusal_reason(exc: DomainError | None) -> str | None:
    """A refusal's short reason: an unplaceable request's `reason`, a capacity refusal's ``constraint``, a quota's
    ``resource``; None otherwise."""
    if exc is None:
        return None
    if isinstance(exc, Unplaceable):
        return exc.reason or None
    return exc.extra.get("constraint") or exc.extra.get("resource") or None


def check_answer(*, refusal: DomainError | None, admission: Admission | None = None,
                 placement_refusal: DomainError | None = None, earliest_start=None, queue_position: int | None = None,
                 quota: list[dict] | None = None, price: dict | None = None, start=None) -> dict:
    """The body of a launch check (`PlacementCheckOutput`):

    ``placeable``: the create would place it now (no refusal, not queued); ``code``: the error code the create
    would answer (null: it would be accepted); ``detail``; ``reason``/``explanation``: the placement rule's (or the
    quota's) reason and per-filter explanation; ``earliest_start``; ``queue``: ``would_queue`` (the create as sent
    would wait in the on-demand queue) and ``position`` (the place it would take there, 1-based); ``quota`` lines
    (`apps.tenancy.quotas.quota_report`); ``price`` (`apps.billing.selectors.price_quote`); ``start``: the start
    the create would confirm (leases; later than asked when spot instances are owed their notice), else null.
    A refusal other than the placement rule's also carries the members of the create's problem body (e.g.
    ``instances`` of 409 `volume_in_use`, ``current_state`` / ``allowed_states``, a quota's ``resource``,
    ``limit``, ``usage``, ``requested``)."""
    placement = placement_refusal or (refusal if isinstance(refusal, Unplaceable | CapacityUnavailable) else None)
    explanation = getattr(placement, "explanation", None) or (admission.explanation if admission and
                                                               admission.queued else None)
    queued = bool(admission and admission.queued and refusal is None)
    if isinstance(earliest_start, dt.datetime):
        earliest_start = earliest_start.isoformat()
    if isinstance(start, dt.datetime):
        start = start.isoformat()
    if earliest_start is None and placement is not None:
        earliest_start = placement.extra.get("earliest_start")
    detail = refusal.detail if refusal is not None else (admission.reason if queued else None)
    # the members the create's problem body would carry (`instances` of a volume in use, `allowed_states`,
    # `resource` of a quota ...), except the placement rule's (already answered below, in their own shape)
    members = {} if refusal is None or placement is refusal else dict(refusal.extra)
    return {**members, "placeable": refusal is None and not queued and placement_refusal is None,
            "code": refusal.code if refusal is not None else None,
            "detail": detail,
            "reason": refusal_reason(refusal) or refusal_reason(placement),
            "explanation": explanation or None,
            "earliest_start": earliest_start, "start": start,
            "queue": {"would_queue": queued, "position": queue_position},
            "quota": quota or [], "price": price}
