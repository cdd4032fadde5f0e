"""Quotas: resource keys, plan defaults, pluggable usage counters and the atomic `quota_check`.

Resource keys (units in parentheses)::

    projects (projects)            gpus (whole GPUs)            gpus:<model> (GPUs of a catalog model)
    mig_slices (GPU instances)     mig_slices:<profile>         vgpus (vGPUs)       vgpus:<type>
    vcpus (vCPUs)                  memory_mib (MiB)             instances           vpcs
    public_ips                     ib_partitions                leases
    volumes (volumes)              volume_gib (GiB of volumes)  volume_gib:<volume type>
    snapshots (volume snapshots)

Limits: an explicit `Quota` row for the scope, else (organization scope only) the organization's plan default
from `PLANS`; a resource with neither is unlimited at that scope. A project-scope check also checks the
organization scope (the organization's usage counts every project).

Usage is never a stored counter: each resource has a counter function that counts what is really held (projects
rows; the allocation ledger, instances, VPCs ...). Apps register theirs from `AppConfig.ready()`, in their
`integrations.py`::

    from apps.tenancy.quotas import register_usage_counter
    register_usage_counter("gpus", count_gpus)          # fn(*, organization, project, qualifier) -> int

`project` is None for the organization-wide count; `qualifier` is the part after ":" (model, profile) or None.
A counter registered for the base key also serves its qualified keys.

Atomicity (ADR 0101): `quota_check` must run inside the caller's transaction, before the caller inserts. It
locks the organization row (`SELECT ... FOR UPDATE`), so every quota-checked create in one organization is
serialized until commit; it then counts real rows. Two racing creates can therefore never both see room for
one more. Lock order: organization row first, then whatever the caller locks. `quota_check_all` checks several
keys of one scope (an instance's instances, vCPUs, memory and GPUs) under one lock and one read of the limits.

Windows (ADR 0802): a quota is a limit on what is held *at once*. A create that holds capacity now (an instance)
holds its GPUs from now on with no end, so its check passes ``window=(now, None)``; a lease holds its GPUs over a
future window, so its check passes ``window=(start, end)``. The ledger's counters then answer the *peak* held at
any instant of that window, confirmed leases to come included (`counting_window()` tells a counter which window
is being checked; None = now; counters that do not know time count now).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connection
from django.db.models import Q

from apps.core.errors import QuotaExceeded

from .errors import Code, ValidationFailed

RESOURCES = ("projects", "gpus", "mig_slices", "vgpus", "vcpus", "memory_mib", "instances", "vpcs",
             "public_ips", "ib_partitions", "leases", "volumes", "volume_gib",
             "snapshots")
QUALIFIABLE = frozenset({"gpus", "mig_slices", "vgpus", "volume_gib"})
PROJECT_SCOPED = frozenset(RESOURCES) - {"projects"}

# Defaults per plan, copied into Quota rows when an organization is created (staff may change the rows).
# The figures are our product defaults, not from an external source.
PLANS: dict[str, dict[str, int]] = {
    "trial": {"projects": 2, "gpus": 1, "mig_slices": 7, "vgpus": 2, "vcpus": 32, "memory_mib": 131072,
              "instances": 2, "vpcs": 1, "public_ips": 1, "ib_partitions": 0, "leases": 0},
    "default": {"projects": 10, "gpus": 8, "mig_slices": 56, "vgpus": 16, "vcpus": 256, "memory_mib": 2097152,
                "instances": 32, "vpcs": 5, "public_ips": 8, "ib_partitions": 2, "leases": 2},
    "enterprise": {"projects": 100, "gpus": 1024, "mig_slices": 7168, "vgpus": 2048, "vcpus": 65536,
                   "memory_mib": 268435456, "instances": 2048, "vpcs": 100, "public_ips": 256,
                   "ib_partitions": 64, "leases": 64},
}

UsageCounter = Callable[..., int]
_COUNTERS: dict[str, UsageCounter] = {}
_QUALIFIERS: dict[str, Callable[[], set[str]]] = {}


def register_usage_counter(resource: str, fn: UsageCounter) -> None:
    """Register `fn(*, organization, project, qualifier) -> int` as the usage count of `resource`.

    `resource` is a base key from `RESOURCES` or a qualified key. Registering twice replaces the counter."""
    split_resource(resource)
    _COUNTERS[resource] = fn


def split_resource(resource: str) -> tuple[str, str | None]:
    """`"gpus:H100-SXM5-80GB"` → `("gpus", "H100-SXM5-80GB")`; 400 `unknown_resource` for an unknown key."""
    base, sep, qualifier = resource.partition(":")
    if base not in RESOURCES or (sep and (base not in QUALIFIABLE or not qualifier)):
        raise ValidationFailed(f"Unknown quota resource {resource!r}.", code=Code.UNKNOWN_RESOURCE,
                               errors={"resource": [f"one of {', '.join(RESOURCES)}; qualify "
                                                    f"{', '.join(sorted(QUALIFIABLE))} as <key>:<name>"]})
    return base, qualifier or None


def register_quota_qualifiers(resource: str, fn: Callable[[], set[str]]) -> None:
    """Register `fn() -> set of names` as the qualifiers `resource` accepts (`gpus` → the catalog's GPU models).

    Apps that own a catalog register theirs in `AppConfig.ready()`; a base key without a source accepts any name."""
    if resource not in QUALIFIABLE:
        raise ValueError(f"{resource!r} takes no qualifier")
    _QUALIFIERS[resource] = fn


#: ``fn() -> capacity``: reads the fleet once and returns ``capacity(base, qualifier) -> int | None``, the most of a
#: resource the fleet could ever place at once (all of its capacity, nothing held), or None when the source does
#: not know that resource. Registered by inventory.
CapacityLookup = Callable[[str, str | None], int | None]
_FLEET_CAPACITY: list[Callable[[], CapacityLookup]] = []


def register_fleet_capacity(fn: Callable[[], CapacityLookup]) -> None:
    if fn not in _FLEET_CAPACITY:
        _FLEET_CAPACITY.append(fn)


def fleet_capacity() -> list[CapacityLookup]:
    """A snapshot of what the fleet could place, from every registered source (each reads the fleet once: a
    fixed number of queries whatever the number of quotas it is then asked about). Pass it to `quota_warnings`
    for every row of one answer."""
    return [fn() for fn in _FLEET_CAPACITY]


def quota_warnings(*, resource: str, limit: int, capacity: list[CapacityLookup] | None = None) -> list[dict]:
    """Warnings (not errors) for a limit the fleet could never fill: ``[{"code": "quota_above_fleet_capacity",
    "resource", "limit", "placeable", "detail"}]`` when `limit` is above what the whole fleet could place of
    `resource` (e.g. ``gpus:H100-SXM5-80GB`` above the H100 GPUs that exist); [] otherwise or when no capacity
    source knows the resource. `capacity` is a `fleet_capacity()` snapshot shared by the rows of one answer
    (read here when not given). Requests inside such a quota are still refused by the placement rule when the
    fleet cannot hold them (422 ``unplaceable``)."""
    base, qualifier = split_resource(resource)
    for lookup in fleet_capacity() if capacity is None else capacity:
        placeable = lookup(base, qualifier)
        if placeable is not None and limit > placeable:
            return [{"code": "quota_above_fleet_capacity", "resource": resource, "limit": limit,
                     "placeable": placeable,
                     "detail": f"The fleet could place at most {placeable} of {resource}; a limit of {limit} "
                               "cannot be used in full."}]
    return []


def validate_resource(resource: str) -> tuple[str, str | None]:
    """`split_resource` plus the qualifier check a new limit needs: `gpus:NOPE-GPU` names no GPU model of the
    catalog, so a limit on it could never bind anything. 400 `unknown_resource` naming the known names."""
    base, qualifier = split_resource(resource)
    source = _QUALIFIERS.get(base)
    if qualifier is not None and source is not None:
        known = source()
        if qualifier not in known:
            raise ValidationFailed(f"Unknown quota resource {resource!r}: no {base} named {qualifier!r}.",
                                   code=Code.UNKNOWN_RESOURCE,
                                   errors={"resource": [f"{base}:<name> with a name from: {', '.join(sorted(known))}"]})
    return base, qualifier


def plan_default(plan: str, resource: str) -> int | None:
    return PLANS.get(plan, {}).get(resource)


#: The window (start, end) a quota check counts over, or None for "now" (see the module's "Windows").
_WINDOW: ContextVar[tuple | None] = ContextVar("quota_window", default=None)


def counting_window() -> tuple | None:
    """``(start, end)`` (aware datetimes, end exclusive) while a windowed `quota_check_all` / `quota_report`
    counts, else None: a usage counter that knows time (the allocation ledger's) returns the peak held at any
    instant of the window instead of what is held now; a counter that does not, counts now."""
    return _WINDOW.get()


@contextmanager
def _counting_over(window: tuple | None) -> Iterator[None]:
    token = _WINDOW.set(tuple(window) if window is not None else None)
    try:
        yield
    finally:
        _WINDOW.reset(token)


def usage_of(*, organization, project=None, resource: str) -> int | None:
    """What `organization` (or `project`) really holds of `resource`; None when no counter is registered."""
    base, qualifier = split_resource(resource)
    fn = _COUNTERS.get(resource) or _COUNTERS.get(base)
    if fn is None:
        return None
    return int(fn(organization=organization, project=project, qualifier=qualifier))


def limit_of(*, organization, project=None, resource: str) -> int | None:
    """The limit at the scope (explicit row, else the plan default for organizations); None = unlimited."""
    from .models import Quota

    row = Quota.objects.filter(organization_id=organization.pk, project_id=getattr(project, "pk", None),
                               resource=resource).values_list("limit", flat=True).first()
    if row is not None:
        return row
    return plan_default(organization.plan, resource) if project is None else None


def _keys(resource: str) -> list[str]:
    """`resource` and, when qualified (``gpus:H100``), its base key (``gpus``): the keys a check of it tests."""
    base, qualifier = split_resource(resource)
    return [resource] + ([base] if qualifier else [])


def _limit_rows(*, organization, project, keys) -> dict:
    """``{(project id or None, key): limit}``: the explicit `Quota` rows of `keys` at the project and organization
    scopes, in one query."""
    from .models import Quota

    return {(project_id, key): limit for project_id, key, limit in Quota.objects.filter(
        organization_id=organization.pk, resource__in=list(keys)).filter(
        Q(project__isnull=True) | Q(project_id=getattr(project, "pk", None))).values_list(
        "project_id", "resource", "limit")}


def _quota_lines(*, organization, project, resource: str, requested: int, rows: dict | None = None) -> list[dict]:
    """The limit lines `quota_check` tests, in its order: for `resource` (and its base key when qualified), the
    project scope then the organization scope, each with a limit (an unlimited scope has no line). `rows`: the
    limits already read by `_limit_rows` for these keys (else read here, in one query)."""
    keys = _keys(resource)
    scopes = ([("project", project)] if project is not None else []) + [("organization", None)]
    if rows is None:
        rows = _limit_rows(organization=organization, project=project, keys=keys)
    lines = []
    for key in keys:
        for scope_name, scope_project in scopes:
            limit = rows.get((getattr(scope_project, "pk", None), key))
            if limit is None and scope_project is None:
                limit = plan_default(organization.plan, key)
            if limit is None:
                continue
            usage = usage_of(organization=organization, project=scope_project, resource=key)
            if usage is None:
                raise LookupError(f"no usage counter registered for quota resource {key!r}")
            lines.append({"resource": key, "scope": scope_name, "limit": limit, "used": usage,
                          "requested": requested, "scope_slug": (scope_project or organization).slug})
    return lines


def _scopes(scope):
    from .models import Project

    project = scope if isinstance(scope, Project) else None
    return project, (project.organization if project is not None else scope)


def _report(lines: list[dict], requested: int) -> list[dict]:
    return [{**{k: v for k, v in line.items() if k != "scope_slug"},
             "exceeded": line["used"] + requested > line["limit"]} for line in lines]


def quota_report(*, scope, resource: str, requested: int = 1, window: tuple | None = None) -> list[dict]:
    """What `quota_check` would test, without locking or raising: ``[{"resource", "scope" ("project" |
    "organization"), "limit", "used", "requested", "exceeded" (bool)}]``, one line per limited scope of
    `resource` (and of its base key when qualified). Used by the launch checks (a dry run of a create); a check
    recorded by `quota_checks_recorded` is answered from the record (the same counts, not counted twice).
    `window`: count the peak over ``(start, end)`` as a windowed `quota_check_all` does."""
    recorded = _RECORDER.get()
    if recorded is not None and (_scope_key(scope), resource, requested) in recorded:
        return [dict(line) for line in recorded[(_scope_key(scope), resource, requested)]]
    project, organization = _scopes(scope)
    with _counting_over(window):
        return _report(_quota_lines(organization=organization, project=project, resource=resource,
                                    requested=requested), requested)


#: The lines every `quota_check` computed inside `quota_checks_recorded`, by (scope, resource, requested).
_RECORDER: ContextVar[dict | None] = ContextVar("quota_recorder", default=None)


def _scope_key(scope) -> tuple:
    return type(scope).__name__, scope.pk


@contextmanager
def quota_checks_recorded() -> Iterator[dict]:
    """Inside the block, every `quota_check` records the lines it tested (`quota_report`'s shape), and
    `quota_report` answers those from the record: a launch check runs the create's quota checks and reports
    their lines without counting twice."""
    token = _RECORDER.set({})
    try:
        yield _RECORDER.get()
    finally:
        _RECORDER.reset(token)


def quota_check(*, scope, resource: str, requested: int = 1) -> None:
    """Raise 422 `quota_exceeded` if adding `requested` units of `resource` to `scope` would pass a limit.

    `scope` is an Organization or a Project. Must be called inside `transaction.atomic()`; holds the
    organization row lock until the caller's transaction ends. A qualified key also checks its base key
    (`gpus:H100-SXM5-80GB` checks `gpus` too). The error carries `resource`, `limit`, `usage`, `requested`
    and `scope` ("organization" | "project") of the first limit passed, and `exceeded`, every limit passed
    (`quota_check_all`). Raises `LookupError` if no usage counter is registered.
    """
    quota_check_all(scope=scope, requests=[(resource, requested)])


def quota_check_all(*, scope, requests, window: tuple | None = None) -> None:
    """`quota_check` of each ``(resource, requested)`` in `requests`, in that order, for one `scope` (e.g. an
    instance's instances, vCPUs, memory and GPUs): the organization row is locked and its plan read once, and the
    limits of every key are read in one query; usage is counted per key as `quota_check` counts it. Every key is
    checked: one 422 `quota_exceeded` names each limit passed (project or organization scope, base or qualified
    key), in `detail` in words and in `exceeded` (``[{"resource", "scope", "limit", "usage", "requested",
    "message"}]``, in request order); `resource`, `limit`, `usage`, `requested` and `scope` are the first one's.
    `window`: ``(start, end)`` of a future holding (a lease): usage is the peak held at any instant of it
    (`counting_window`), so `requested` more at that peak must fit. An empty `requests` only takes the lock."""
    from .models import Organization

    if not connection.in_atomic_block:
        raise RuntimeError("quota_check must run inside the caller's transaction")
    requests = list(requests)
    project, organization = _scopes(scope)
    list(Organization.objects.select_for_update().filter(pk=organization.pk).values_list("pk"))
    organization.refresh_from_db(fields=["plan"])
    rows = _limit_rows(organization=organization, project=project,
                       keys={key for resource, _ in requests for key in _keys(resource)})
    recorder = _RECORDER.get()
    exceeded = []
    for resource, requested in requests:
        with _counting_over(window):
            lines = _quota_lines(organization=organization, project=project, resource=resource,
                                 requested=requested, rows=rows)
        if recorder is not None:
            recorder[(_scope_key(scope), resource, requested)] = _report(lines, requested)
        exceeded += [line for line in lines if line["used"] + requested > line["limit"]]
    if exceeded:
        raise _quota_exceeded(exceeded, window)


#: A quota key's words for a count `n` (`quota_words`); its qualifier (a GPU model, profile, type) goes in ``{q}``.
_WORDS = {
    "projects": "{n} projects", "gpus": "{n} {q}GPUs", "mig_slices": "{n} {q}MIG slices", "vgpus": "{n} {q}vGPUs",
    "vcpus": "{n} vCPUs", "instances": "{n} instances", "vpcs": "{n} VPCs", "public_ips": "{n} public IPs",
    "ib_partitions": "{n} InfiniBand partitions", "leases": "{n} leases", "volumes": "{n} volumes",
    "snapshots": "{n} snapshots",
}


def quota_amount(resource: str, n: int) -> str:
    """`n` of `resource` with its unit where it has one: memory (MiB in the API) in GiB, storage in GiB, else the
    count."""
    base = resource.partition(":")[0]
    if base == "memory_mib":
        gib = n / 1024
        return f"{int(gib) if gib.is_integer() else round(gib, 1)} GiB"
    return f"{n} GiB" if base == "volume_gib" else str(n)


def quota_words(resource: str, n: int) -> str:
    """`n` of quota key `resource` in words with its unit: ``gpus:H100-SXM5-80GB`` → "8 H100-SXM5-80GB GPUs",
    ``memory_mib`` → "2048 GiB of memory", ``volume_gib:ssd`` → "100 GiB of ssd volumes"; an unknown key as it
    is ("3 widgets")."""
    base, _, qualifier = resource.partition(":")
    if base == "memory_mib":
        return f"{quota_amount(resource, n)} of memory"
    if base == "volume_gib":
        return f"{quota_amount(resource, n)} of {qualifier + ' ' if qualifier else ''}volumes"
    words = _WORDS.get(base)
    return words.format(n=n, q=f"{qualifier} " if qualifier else "") if words else f"{n} {resource}"


def _quota_exceeded(lines: list[dict], window: tuple | None = None) -> QuotaExceeded:
    """One 422 naming every exceeded limit line: `detail` in words ("Quota exceeded: 8 H100-SXM5-80GB GPUs
    allowed, 8 in use, 1 more requested (project alpha-main); ..."; a windowed check's usage is "in use at the
    busiest moment of the window"), `exceeded` the lines; `resource`, `limit`,
    `usage`, `requested`, `scope` are the first line's (as before several were reported)."""
    items = [{"resource": line["resource"], "scope": line["scope"], "limit": line["limit"], "usage": line["used"],
              "requested": line["requested"],
              "message": f"{quota_words(line['resource'], line['limit'])} allowed, "
                         f"{quota_amount(line['resource'], line['used'])} in use{_when(window, line['resource'])}, "
                         f"{quota_amount(line['resource'], line['requested'])} more requested "
                         f"({line['scope']} {line['scope_slug']})"} for line in lines]
    first = items[0]
    return QuotaExceeded("Quota exceeded: " + "; ".join(item["message"] for item in items) + ".",
                         code=Code.QUOTA_EXCEEDED, resource=first["resource"], limit=first["limit"],
                         usage=first["usage"], requested=first["requested"], scope=first["scope"], exceeded=items)


#: The keys whose usage counters count over a window (the allocation ledger's, `counting_window`); the others
#: count now, and their words say nothing of a window.
WINDOWED = frozenset({"gpus", "mig_slices", "vgpus"})


def _when(window: tuple | None, resource: str) -> str:
    if window is None or resource.partition(":")[0] not in WINDOWED:
        return ""
    return " at the busiest moment of the window" if window[1] is not None else \
        " at the busiest moment from now on (leases to come included)"


def _count_projects(*, organization, project, qualifier) -> int:
    from .models import Project

    return Project.objects.filter(organization_id=organization.pk).count()


register_usage_counter("projects", _count_projects)
