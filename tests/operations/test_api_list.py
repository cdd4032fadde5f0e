"""GET /api/v1/operations: a tenant lists the operations of its projects (others' do not exist), with filters."""
import uuid
from datetime import timedelta

import pytest

from apps.core.clock import now
from apps.identity.models import StaffRole
from apps.operations.models import Operation, OperationStatus
from tests.tenancy.helpers import client_for, make_project, make_user, org_owner_client, token_for

pytestmark = pytest.mark.django_db

URL = "/api/v1/operations"


def _op(project, kind="instance.create", status=OperationStatus.SUCCEEDED, target_type="compute.instance", **kw):
    return Operation.objects.create(kind=kind, target_type=target_type, target_id=kw.pop("target_id", uuid.uuid4()),
                                    project=project, status=status, **kw)


def _ids(resp):
    assert resp.status_code == 200, resp.content
    return [row["id"] for row in resp.json()["results"]]


@pytest.fixture
def two_tenants():
    org_a, _owner_a, client_a = org_owner_client("acme", "owner@acme.test")
    org_b, _owner_b, client_b = org_owner_client("globex", "owner@globex.test")
    return make_project(org_a, "train"), client_a, make_project(org_b, "infer"), client_b


def test_lists_only_the_callers_operations_newest_first(two_tenants):
    proj_a, client_a, proj_b, client_b = two_tenants
    a1, a2 = _op(proj_a), _op(proj_a, kind="instance.delete")
    b1 = _op(proj_b)
    _op(None, kind="host.drain", target_type="inventory.host")  # a staff operation on the fleet
    assert _ids(client_a.get(URL)) == [str(a2.id), str(a1.id)]
    assert _ids(client_b.get(URL)) == [str(b1.id)]
    row = client_a.get(URL).json()["results"][0]
    assert row["project"] == str(proj_a.id) and row["kind"] == "instance.delete" and row["status"] == "succeeded"


def test_staff_see_every_operation():
    org, _owner, _client = org_owner_client()
    ops = [_op(make_project(org, "p")), _op(None, kind="host.drain", target_type="inventory.host")]
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    got = _ids(client_for(token_for(staff, staff=True)).get(URL))
    assert sorted(got) == sorted(str(o.id) for o in ops)


def test_filters(two_tenants):
    proj_a, client_a, proj_b, _client_b = two_tenants
    target = uuid.uuid4()
    failed = _op(proj_a, status=OperationStatus.FAILED, error_code="capacity_unavailable", target_id=target)
    running = _op(proj_a, status=OperationStatus.RUNNING, kind="instance.delete")
    vpc = _op(proj_a, kind="vpc.create", target_type="networking.vpc")
    other = _op(proj_b, target_id=target)
    assert _ids(client_a.get(URL, {"status": "failed"})) == [str(failed.id)]
    assert _ids(client_a.get(f"{URL}?status=failed&status=running")) == [str(running.id), str(failed.id)]
    assert _ids(client_a.get(URL, {"kind": "instance.delete"})) == [str(running.id)]
    assert _ids(client_a.get(URL, {"target_type": "networking.vpc"})) == [str(vpc.id)]
    assert _ids(client_a.get(URL, {"target_id": str(target)})) == [str(failed.id)]  # not the other tenant's
    assert _ids(client_a.get(URL, {"project": str(proj_a.id)})) == [str(vpc.id), str(running.id), str(failed.id)]
    assert _ids(client_a.get(URL, {"project": str(proj_b.id)})) == []  # another tenant's project: empty, no error
    assert other.project_id == proj_b.id


def test_created_window(two_tenants):
    proj_a, client_a, _proj_b, _client_b = two_tenants
    old, new = _op(proj_a), _op(proj_a)
    Operation.objects.filter(pk=old.pk).update(created_at=now() - timedelta(days=3))
    cut = (now() - timedelta(days=1)).isoformat()
    assert _ids(client_a.get(URL, {"created_after": cut})) == [str(new.id)]
    assert _ids(client_a.get(URL, {"created_before": cut})) == [str(old.id)]


@pytest.mark.parametrize("query, field", [({"status": "exploded"}, "status"), ({"target_id": "nope"}, "target_id"),
                                          ({"created_after": "yesterday"}, "created_after")])
def test_bad_filter_is_a_400_problem_naming_the_parameter(two_tenants, query, field):
    _proj_a, client_a, _proj_b, _client_b = two_tenants
    resp = client_a.get(URL, query)
    assert resp.status_code == 400, resp.content
    assert resp["Content-Type"].startswith("application/problem+json")
    body = resp.json()
    assert body["code"] == "validation_error" and field in body["errors"]


def test_pages_with_a_cursor(two_tenants):
    proj_a, client_a, _proj_b, _client_b = two_tenants
    ops = [_op(proj_a) for _ in range(5)]
    first = client_a.get(URL, {"page_size": 2}).json()
    second = client_a.get(first["next"]).json()
    assert [r["id"] for r in first["results"] + second["results"]] == [str(o.id) for o in reversed(ops)][:4]


def test_anonymous_is_401():
    assert client_for(None).get(URL).status_code == 401


def test_a_project_token_lists_only_its_projects_operations():
    org, owner, client = org_owner_client()
    train, infer = make_project(org, "train"), make_project(org, "infer")
    a, b = _op(train), _op(infer)
    assert sorted(_ids(client.get(URL))) == sorted([str(a.id), str(b.id)])  # the organization token: both
    bound = client_for(token_for(owner, project=train))
    assert _ids(bound.get(URL)) == [str(a.id)]
    assert bound.get(f"{URL}/{b.id}").status_code == 404
