"""The cross-tenant walk: another tenant's ids answer exactly as ids that do not exist (ADR 0010).

A tenant probing another tenant's ids must learn nothing, not even that an id exists. Built from the URL resolver
and the authorization-matrix entries (framework.py), so a new endpoint, filter or body member is covered without an
edit here. The caller is always `other_org` (the owner of organization B, with a write token); organization A holds
the objects. Three walks:

- paths: every matrix entry whose path names an object that `other_org` may not see, with A's ids and with random
  ids in the path;
- list filters: every filter of every list the URL resolver serves, with the id of an object A has (or another
  tenant's, from the filter's own selector) and with a random id;
- body references: every write entry, run for B (so the caller owns the path and the body); every member of its
  request serializer that names an object (a `VisibleField`, top level, present in B's body or not) gets an
  object of A (or one only staff see) from the member's own selector, and then a random id, the rest of B's body
  unchanged. A member with nothing to probe with, or an entry whose case cannot be built for B, fails the walk.

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

from apps.core.references import VisibleField, VisibleFilter
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


def _template(method: str, path: str) -> tuple[str, str]:
    return method.upper(), re.sub(r"\{[^}]+\}", "{}", path.rstrip("/"))


def _input_serializers() -> dict[tuple[str, str], object]:
    """(METHOD, path template) -> the request serializer the schema documents (the one the view validates)."""
    from drf_spectacular.generators import SchemaGenerator

    generator = SchemaGenerator()
    generator._initialise_endpoints()
    found = {}
    for path, _regex, method, view in generator._get_paths_and_endpoints():
        if method in ("POST", "PUT", "PATCH"):
            view.schema.method, view.schema.path = method, path
            found[_template(method, path)] = view.schema.get_request_serializer()
    return found


def _reference_members(serializer) -> dict[str, tuple[object, bool]]:
    """Top-level body members that name objects: member -> (its selector, whether it takes a list)."""
    from django.utils.module_loading import import_string
    from rest_framework.relations import ManyRelatedField

    if serializer is None:
        return {}
    fields = serializer().fields if isinstance(serializer, type) else getattr(serializer, "fields", {})
    members = {}
    for name, f in fields.items():
        many = isinstance(f, ManyRelatedField)
        field = f.child_relation if many else f
        if isinstance(field, VisibleField) and not f.read_only:
            selector = import_string(field.selector) if isinstance(field.selector, str) else field.selector
            members[name] = (selector, many)
    return members


def _foreign(selector, staff, other) -> str | None:
    """An object of organization A (or the provider) the member may name that `other` cannot see."""
    pk = selector(staff).exclude(pk__in=selector(other).values("pk")).values_list("pk", flat=True).first()
    return str(pk) if pk else None


def test_body_references_answer_as_missing_ones(world, mirror, prober):
    """Every reference member of every write body (read from the request serializer: a `VisibleField`), with an
    object of organization A and with a random id, in B's otherwise valid body: the same refusal."""
    _populate(world)
    _references_only_a_has(world)
    staff, other = world.users["staff"], world.users["other_owner"]
    other.api_token = None  # the selector sees what the owner of B sees
    serializers = _input_serializers()
    probed, unprobed, differing = [], [], []
    for entry in BODY_ENTRIES:
        members = _reference_members(serializers.get(_template(entry.method, entry.path)))
        if not members:
            continue
        savepoint = transaction.savepoint()
        try:
            case_b = _setup(entry, mirror)
            if case_b is None:
                unprobed += [f"{entry} {m}: B's case cannot be built" for m in members]
                continue
            path = entry.path.format(**case_b.kwargs) + "/"
            for m, (selector, many) in members.items():
                foreign = _foreign(selector, staff, other)
                if foreign is None:
                    unprobed.append(f"{entry} {m}: no object that B cannot see")
                    continue
                body = case_b.data or {}
                theirs = _request(prober, entry.method, path, {**body, m: [foreign] if many else foreign})
                missing = _request(prober, entry.method, path,
                                   {**body, m: [str(uuid.uuid4())] if many else str(uuid.uuid4())})
                probed.append(f"{entry} {m}")
                if theirs.status_code < 400:
                    differing.append(f"{entry} {m}: another tenant's object answered {theirs.status_code}")
                elif _answer(theirs) != _answer(missing):
                    differing.append(f"{entry} {m}: {_answer(theirs)} != {_answer(missing)}")
        finally:
            transaction.savepoint_rollback(savepoint)
    print(f"body references probed: {len(probed)} members; unprobed: {len(unprobed)}")
    assert not differing, "body references that tell another tenant's ids from missing ones:\n" + "\n".join(differing)
    assert not unprobed, "body references not probed:\n" + "\n".join(unprobed)
    assert len(probed) >= 65, f"only {len(probed)} body references probed"


def _references_only_a_has(world) -> None:
    """What the matrix setups leave out: a private flavor of A, an image only staff see (retired), a lease of A."""
    from apps.compute.models import Image
    from apps.reservations.services.leases import lease_create
    from tests.authz.matrix_compute import _flavor
    from tests.inventory.helpers import make_host

    _flavor(world, private=True)
    Image.objects.create(name="walk-retired", os="ubuntu", source_url="https://images.test/r.qcow2",
                         checksum="sha256:" + "d" * 64, is_active=False)
    from apps.reservations.models import OnDemandReserve

    OnDemandReserve.objects.all().delete()  # a reserve from a setup would keep the one GPU from the lease
    make_host("walk-resv-h", gpus=1)
    lease_create(actor=None, project=world.project_a, name="walk-lease", start="2098-01-01 09:00",
                 end="2098-01-01 12:00", kind="gpus", gpu_model="H100-SXM5-80GB", count=1)
