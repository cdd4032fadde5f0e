"""A quota larger than the fleet could ever place is accepted with a warning saying what is placeable.

Why: staff set `gpus:H100-SXM5-80GB` to 100 on a fleet with 8 such GPUs and nothing said so; the tenant then
saw "inside quota" and could not tell why a 16-GPU request would never run. The warning is not an error (fleets
grow); a request that no capacity could ever hold is refused by the placement rule (422 `unplaceable`,
tests/compute/test_placement_rule.py, tests/reservations/test_placement_rule.py).
"""
import pytest

from apps.tenancy.models import Quota
from tests.scheduling import fleet

from .helpers import client_for, make_org, make_project, make_user, org_owner_client, token_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(db):
    return client_for(token_for(make_user("ops@provider.test", staff_role="operator"), staff=True))


def test_quota_above_the_fleet_answers_with_a_warning_not_an_error(staff_client):
    org = make_org("wide")
    fleet.host(gpus=8, model="H100-SXM5-80GB")
    fleet.host(gpus=8, model="H100-SXM5-80GB", state="retired")          # never placeable again
    r = staff_client.post("/api/v1/quotas/", {"organization": str(org.pk), "resource": "gpus:H100-SXM5-80GB",
                                              "limit": 100}, format="json")
    assert r.status_code == 201, r.content
    [w] = r.json()["warnings"]
    assert (w["code"], w["placeable"], w["limit"]) == ("quota_above_fleet_capacity", 8, 100)
    r = staff_client.patch(f"/api/v1/quotas/{r.json()['id']}", {"limit": 8}, format="json")
    assert (r.status_code, r.json()["warnings"]) == (200, [])
    for resource, warned in (("vcpus", [128]), ("instances", [])):   # 128 CPU threads on the one live host;
        quota = Quota.objects.get(organization=org, project=None, resource=resource)    # instances: not counted
        r = staff_client.patch(f"/api/v1/quotas/{quota.pk}", {"limit": 10_000}, format="json")
        assert r.status_code == 200, r.content
        assert [w["placeable"] for w in r.json()["warnings"]] == warned


def test_project_quota_above_the_fleet_is_warned_to_the_owner():
    org, _owner, client = org_owner_client("own")
    web = make_project(org, "web")
    fleet.host(gpus=2, model="H100-SXM5-80GB")
    r = client.post("/api/v1/quotas/", {"organization": str(org.pk), "project": str(web.pk), "resource": "gpus",
                                        "limit": 3}, format="json")
    assert r.status_code == 201, r.content
    assert [w["placeable"] for w in r.json()["warnings"]] == [2]



def _quota_rows(org, first: int, projects: int) -> list[Quota]:
    rows = []
    for i in range(first, first + projects):
        project = make_project(org, f"p{i}")
        rows += [Quota.objects.create(organization=org, project=project, resource=resource, limit=10_000)
                 for resource in ("gpus", "gpus:H100-SXM5-80GB", "vcpus", "memory_mib")]
    return rows


def test_the_quota_list_reads_the_fleet_capacity_once(staff_client, django_assert_max_num_queries):
    """Every row's warnings come from one read of the fleet per request (it was one fleet query per row)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from apps.tenancy.quotas import usage_of

    org = make_org("many")
    fleet.host(gpus=8, model="H100-SXM5-80GB")
    fleet.host(gpus=4, model="L40S")
    staff_client.get("/api/v1/quotas/")  # warm: the token's last use is written once
    _quota_rows(org, 0, 2)
    with CaptureQueriesContext(connection) as few:
        assert staff_client.get("/api/v1/quotas/", {"page_size": 500}).status_code == 200
    added = _quota_rows(org, 2, 10)
    with CaptureQueriesContext(connection) as usage:  # what each added row's usage column costs by itself
        for row in added:
            usage_of(organization=org, project=row.project, resource=row.resource)
    with django_assert_max_num_queries(len(few.captured_queries) + len(usage.captured_queries)):
        r = staff_client.get("/api/v1/quotas/", {"page_size": 500})
    assert r.status_code == 200 and len(r.json()["results"]) == Quota.objects.count()
    warned = [row for row in r.json()["results"] if row["warnings"]]
    assert len(warned) == 36 and {w["warnings"][0]["placeable"] for w in warned} == {12, 8, 256}
