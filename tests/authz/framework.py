"""The authorization-matrix harness: the roles, the world every case runs in, the URL walker.

How to add an entry (for a new endpoint, in your own module, no edit here or in other apps' modules):

1. Create or open `tests/authz/matrix_<app>.py` and export `ENTRIES: list[Entry]`.
2. One `Entry` per (method, path template). The template is the URL pattern under /api/v1/ with named groups
   written `{name}` and no trailing slash, e.g. `Entry("GET", "/api/v1/operations/{pk}", ...)`.
   `test_every_endpoint_has_an_entry` prints the exact templates that are missing.
3. `expect` maps every role in `ROLES` to the status code it must get. Build it with `expect(...)`.
4. `setup(world)` (optional) creates what the request needs in organization A (`world.org_a`,
   `world.project_a`; users `world.users[role]`) and returns `Case(kwargs=..., data=..., query=...)`.
   It runs inside the test's transaction before the request; it must not depend on the role.
The harness then checks for every role: the status; for any 4xx, that no table changed row count, no audit event
was written, nothing was scheduled with `transaction.on_commit` and no Celery queue in the broker grew (so
nothing enqueued); for a successful
mutation, that an audit event was written (set `audited=False` only for endpoints that change nothing durable);
for `other_org`, that no identifier of organization A appears in the body (never listed, never counted).
An entry with `refusal_audited` expects its refusals of token roles (or of the roles it names) to write an audit
event (and nothing else).

`last_used_at` of the caller's token is written even on a denied request: probing with a leaked token is
exactly what that column must show.

Roles: anonymous (no credentials); other_org (write token of the owner of organization B); viewer, member, admin
(write tokens of organization-A users with those organization roles); read_token (a read-scoped token of
organization A's owner); staff (a staff-bound write token of a provider operator who is no member of organization
A: it reads everything, makes the provider's changes, and writes nothing in A's projects and members by staff
status alone, 403 `staff_not_member`; docs/adr/0104).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from django.urls import URLPattern, URLResolver, get_resolver

ROLES = ("anonymous", "other_org", "viewer", "member", "admin", "read_token", "staff")
API_PREFIX = "/api/v1/"


@dataclass
class Case:
    kwargs: dict = field(default_factory=dict)
    data: dict | None = None
    query: dict | None = None


@dataclass
class Entry:
    method: str
    path: str
    expect: dict[str, int]
    setup: Callable[[World], Case] | None = None
    audited: bool = True
    # a refusal that is itself a security event (a factor change tried with an API token, a token mint wider
    # than its parent): for the token roles (True) or the roles named (a tuple) a 4xx must write an audit event,
    # and only the audit tables may grow
    refusal_audited: bool | tuple[str, ...] = False
    # the object is the provider's public catalog (a region, a zone), not organization A's: other_org reading it
    # is no leak, so the ids in `Case.kwargs` are left out of the leak check
    public: bool = False

    def audits_refusal(self, role: str) -> bool:
        if self.refusal_audited is True:
            return role != "anonymous"
        return role in (self.refusal_audited or ())

    @property
    def key(self) -> tuple[str, str]:
        return self.method.upper(), self.path

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


def expect(anonymous=401, other_org=404, viewer=200, member=200, admin=200, read_token=200, staff=200) -> dict:
    """Expected status per role (defaults: a read of an organization-A object)."""
    return {"anonymous": anonymous, "other_org": other_org, "viewer": viewer, "member": member, "admin": admin,
            "read_token": read_token, "staff": staff}


def mutation(anonymous=401, other_org=404, viewer=403, member=403, admin=200, read_token=403, staff=200) -> dict:
    """Expected status per role for a write that organization admins and staff may do."""
    return expect(anonymous, other_org, viewer, member, admin, read_token, staff)


@dataclass
class World:
    org_a: object
    project_a: object
    org_b: object
    project_b: object
    users: dict
    tokens: dict

    def a_identifiers(self) -> list[str]:
        return [str(self.org_a.pk), str(self.project_a.pk)]


# --- URL walker ---------------------------------------------------------------------------------------------

_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def _normalize(route: str) -> str:
    route = route.replace("^", "").replace("$", "").replace("/?", "/")
    route = _GROUP.sub(r"{\1}", route)
    route = _CONVERTER.sub(r"{\1}", route)
    route = "/" + route.lstrip("/")
    return route.rstrip("/") if route != "/" else route


def _methods(callback) -> list[str]:
    actions = getattr(callback, "actions", None)
    if actions:
        return sorted(m.upper() for m in actions if m not in ("head", "options"))
    cls = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    if cls is not None:
        names = getattr(cls, "http_method_names", ["get", "post", "put", "patch", "delete"])
        return sorted(m.upper() for m in names if m not in ("head", "options", "trace") and hasattr(cls, m))
    return ["GET", "POST", "PUT", "PATCH", "DELETE"]


def api_endpoints(urlconf: str = "gpucloud.urls") -> set[tuple[str, str]]:
    """Every (METHOD, path template) served under /api/v1/."""
    found: set[tuple[str, str]] = set()

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                path = _normalize(route)
                if path.startswith(API_PREFIX.rstrip("/")):
                    found.update((method, path) for method in _methods(pattern.callback))

    walk(get_resolver(urlconf).url_patterns, "")
    return found


def collect_entries() -> list[Entry]:
    """ENTRIES of every `tests/authz/matrix_*.py` module."""
    import importlib
    import pkgutil

    import tests.authz as package

    entries: list[Entry] = []
    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("matrix_"):
            entries.extend(importlib.import_module(f"tests.authz.{module.name}").ENTRIES)
    return entries
