"""The cross-tenant walk: another tenant's ids answer exactly as ids that do not exist (ADR 0010).

A tenant probing another tenant's ids must learn nothing, not even that an id exists. Built from the URL resolver
and the authorization-matrix entries (framework.py), so a new endpoint, filter or body member is covered without an
edit here. The caller is always `other_org` (the owner of organization B, with a write token); organization A holds
the objects. Three walks:

- paths: every matrix entry whose path names an object that `other_org` may not see, with A's ids and with random
  ids in the path;
- list filters: every filter of every list the URL resolver serves, with the id of an object A has (or another
  tenant's, from the filter's own selector) and with a random id;
- body references: every write entry, run once for B (so the caller owns the path and the body) and once for A;
  each body member that names an object gets A's id and then a random id, the rest of B's body unchanged.

Two answers are identical when status and body agree with ids masked (`<id>`) and `request_id` dropped. A body
reference to another tenant's object must also be refused (a 4xx): no foreign write.
"""
from __future__ import annotations

import json
import re
import uuid

import django_filters
import pytest
from django.db import transaction
from django.urls import resolve

from apps.core.references import VisibleFilter
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, make_user, member

from .framework import API_PREFIX, Case, World, api_endpoints, collect_entries

ENTRIES = collect_entries()
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _answer(response) -> tuple[int, str]:
    """(status, body) with every id masked and the request id dropped."""
    text = response.content.decode(errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = text
    if isinstance(data, dict):
        data.pop("request_id", None)
    return response.status_code, UUID.sub("<id>", json.dumps(data, sort_keys=True))


def _request(client, method: str, path: str, data=None, query=None):
    if method == "GET":
        return client.get(path, data=query)
    return getattr(client, method.lower())(path, data=data, format="json" if data is not None else None)


def _setup(entry, world) -> Case | None:
    """The entry's case, built in a savepoint (None when it cannot be built twice in one transaction)."""
    if entry.setup is None:
        return Case()
    try:
        with transaction.atomic():
            return entry.setup(world)
    except Exception:  # noqa: BLE001 - a setup that collides with an earlier one only narrows the walk
        return None


def _is_id(value) -> bool:
    return isinstance(value, str) and bool(UUID.fullmatch(value))


def _is_ids(value) -> bool:
    return _is_id(value) or (isinstance(value, list) and bool(value) and all(_is_id(v) for v in value))


def _random_like(value):
    return [str(uuid.uuid4()) for _ in value] if isinstance(value, list) else str(uuid.uuid4())


@pytest.fixture
def mirror(world) -> World:
    """The same world seen from organization B: its owner and members act on B's objects."""
    users = {"owner": world.users["other_owner"], "other_owner": world.users["owner"], "staff": world.users["staff"]}
    for role in (OrgRole.ADMIN, OrgRole.MEMBER, OrgRole.VIEWER):
        users[role] = make_user(f"{role}@beta.test")
        member(users[role], world.org_b, role)
    return World(org_a=world.org_b, project_a=world.project_b, org_b=world.org_a, project_b=world.project_a,
                 users=users, tokens=world.tokens)


@pytest.fixture
def prober(world):
    return client_for(world.tokens["other_org"])


# --- paths -------------------------------------------------------------------------------------------------

PATH_ENTRIES = [e for e in ENTRIES if "{" in e.path and e.expect["other_org"] >= 400]


@pytest.mark.parametrize("entry", PATH_ENTRIES, ids=str)
def test_path_ids_answer_as_missing_ones(entry, world, prober):
    case = _setup(entry, world)
    assert case is not None, f"{entry}: setup failed"
    path = entry.path.format(**case.kwargs) + "/"
    random_kwargs = {k: (str(uuid.uuid4()) if _is_id(str(v)) else v) for k, v in case.kwargs.items()}
    random_path = entry.path.format(**random_kwargs) + "/"
    theirs = _request(prober, entry.method, path, case.data, case.query)
    missing = _request(prober, entry.method, random_path, case.data, case.query)
    assert theirs.status_code >= 400, f"{entry}: another tenant's object answered {theirs.status_code}"
    assert _answer(theirs) == _answer(missing), f"{entry}: {_answer(theirs)} != {_answer(missing)}"


# --- list filters ------------------------------------------------------------------------------------------

def _lists() -> list[str]:
    return sorted(path for method, path in api_endpoints() if method == "GET" and "{" not in path)


def _filterset(path: str):
    view = resolve(path + "/").func
    return getattr(getattr(view, "cls", None), "filterset_class", None)


def _foreign_id(f, world, other) -> str | None:
    """An id the filter references that `other` cannot see: from the filter's own selector, or one of A's."""
    if isinstance(f, VisibleFilter):
        theirs = f.selector(world.users["staff"]).exclude(pk__in=f.selector(other).values("pk"))
        pk = theirs.values_list("pk", flat=True).first()
        return str(pk) if pk else None
    name = f.field_name.removesuffix("_id")
    return str(world.org_a.pk) if name == "organization" else str(world.project_a.pk)


def _populate(world) -> None:
    """One of everything organization A can have: every matrix entry's setup, each in a savepoint, and the objects
    those setups cannot build a second time in one transaction (names they reuse)."""
    for entry in ENTRIES:
        _setup(entry, world)
    from apps.compute.models import Cluster, Flavor, Image
    from apps.networking import services as net

    vpc = net.vpc_create(actor=None, project=world.project_a, name="walk-vpc", cidr="10.9.0.0/16")
    net.port_create(actor=None, subnet=net.subnet_create(actor=None, vpc=vpc, name="walk-sn", cidr="10.9.1.0/24"))
    flavor = Flavor.objects.create(name="walk-c1", vcpus=1, memory_mib=1024)
    image = Image.objects.create(name="walk-img", os="ubuntu", source_url="https://images.test/w.qcow2",
                                 checksum="sha256:" + "c" * 64)
    Cluster.objects.create(project=world.project_a, name="walk-cl", flavor=flavor, image=image, size=0)


ID_FILTERS = (VisibleFilter, django_filters.UUIDFilter)


def test_list_filters_answer_alike(world, prober):
    _populate(world)
    other = world.users["other_owner"]
    other.api_token = None  # the selector sees what the owner of B sees
    probed, unprobed, differing = 0, [], []
    for path in _lists():
        filterset = _filterset(path)
        if filterset is None:
            continue
        reachable = prober.get(path + "/").status_code == 200
        for name, f in filterset.base_filters.items():
            if not isinstance(f, ID_FILTERS):
                continue
            foreign = _foreign_id(f, world, other)
            if foreign is None:
                if reachable:
                    unprobed.append(f"{path}?{name}")
                continue
            theirs = prober.get(path + "/", {name: foreign})
            missing = prober.get(path + "/", {name: str(uuid.uuid4())})
            probed += 1
            if _answer(theirs) != _answer(missing):
                differing.append(f"{path}?{name}: {_answer(theirs)} != {_answer(missing)}")
    assert not differing, "filters that tell another tenant's ids from missing ones:\n" + "\n".join(differing)
    assert not unprobed, f"filters without another tenant's object to probe with (add one to a setup): {unprobed}"
    assert probed >= 40, f"only {probed} filters probed"


def test_every_reference_filter_resolves_through_a_selector():
    """A filter on a relation is a VisibleFilter (apps.core.filters.FilterSet refuses the generated kind)."""
    offenders = []
    for path in _lists():
        filterset = _filterset(path)
        for name, f in (filterset.base_filters.items() if filterset else ()):
            if isinstance(f, django_filters.ModelChoiceFilter | django_filters.ModelMultipleChoiceFilter) \
                    and not isinstance(f, VisibleFilter):
                offenders.append(f"{path}?{name}")
    assert not offenders


# --- body references ---------------------------------------------------------------------------------------

BODY_ENTRIES = [e for e in ENTRIES if e.method in ("POST", "PUT", "PATCH") and e.setup is not None
                and e.path.startswith(API_PREFIX)]


def _references(case_a: Case, case_b: Case) -> list[str]:
    """Body members that name objects, with a different object for A and for B."""
    return [m for m, vb in (case_b.data or {}).items()
            if _is_ids(vb) and _is_ids((case_a.data or {}).get(m)) and case_a.data[m] != vb]


@pytest.mark.parametrize("entry", BODY_ENTRIES, ids=str)
def test_body_references_answer_as_missing_ones(entry, world, mirror, prober):
    case_a, case_b = _setup(entry, world), _setup(entry, mirror)
    if case_a is None or case_b is None or not case_b.data:
        pytest.skip("no body, or the case cannot be built for both organizations")
    members = _references(case_a, case_b)
    if not members:
        pytest.skip("no body member names another object")
    path = entry.path.format(**case_b.kwargs) + "/"
    for m in members:
        theirs = _request(prober, entry.method, path, {**case_b.data, m: case_a.data[m]})
        missing = _request(prober, entry.method, path, {**case_b.data, m: _random_like(case_a.data[m])})
        assert theirs.status_code >= 400, f"{entry}: {m} naming another tenant's object answered " \
                                          f"{theirs.status_code} {theirs.content[:300]}"
        assert _answer(theirs) == _answer(missing), f"{entry} {m}: {_answer(theirs)} != {_answer(missing)}"

