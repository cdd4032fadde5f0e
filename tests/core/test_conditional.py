"""ETag / If-Match on single objects (ADR 0011): a stale write is 412 `precondition_failed` and writes nothing;
two writers holding one ETag cannot both win."""
import threading

import pytest
import yaml
from django.conf import settings
from django.db import connection

from apps.tenancy.models import Project
from tests.tenancy.helpers import make_project, org_owner_client


@pytest.fixture
def owner(db):
    org, _user, client = org_owner_client()
    return client, make_project(org, "ml")


def _url(project) -> str:
    return f"/api/v1/projects/{project.pk}/"


def test_get_carries_a_strong_etag_that_follows_the_representation(owner):
    client, project = owner
    first = client.get(_url(project))
    assert first.status_code == 200
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/")
    assert client.get(_url(project))["ETag"] == etag  # unchanged object, same tag
    changed = client.patch(_url(project), {"name": "Machine learning"}, format="json", HTTP_IF_MATCH=etag)
    assert changed.status_code == 200, changed.content
    assert changed["ETag"] != etag
    assert client.get(_url(project))["ETag"] == changed["ETag"]  # the write's answer tags what GET now reads


def test_patch_with_a_stale_etag_is_412_and_writes_nothing(owner):
    client, project = owner
    stale = client.get(_url(project))["ETag"]
    assert client.patch(_url(project), {"name": "First"}, format="json").status_code == 200
    r = client.patch(_url(project), {"name": "Second"}, format="json", HTTP_IF_MATCH=stale)
    assert r.status_code == 412, r.content
    assert r["Content-Type"] == "application/problem+json"
    assert r.json()["code"] == "precondition_failed"
    assert "If-Match" in r.json()["errors"]
    assert Project.objects.get(pk=project.pk).name == "First"


def test_delete_with_a_stale_etag_is_412_and_the_object_stays(owner):
    client, project = owner
    stale = client.get(_url(project))["ETag"]
    client.patch(_url(project), {"name": "Renamed"}, format="json")
    r = client.delete(_url(project), HTTP_IF_MATCH=stale)
    assert r.status_code == 412, r.content
    assert Project.objects.filter(pk=project.pk).exists()
    current = client.get(_url(project))["ETag"]
    assert client.delete(_url(project), HTTP_IF_MATCH=current).status_code == 204


@pytest.mark.parametrize("header, status", [("*", 200), ('"0000", {current}', 200), ("W/{current}", 412),
                                            ('"not-the-tag"', 412)])
def test_if_match_lists_star_and_weak_tags(owner, header, status):
    client, project = owner
    current = client.get(_url(project))["ETag"]
    r = client.patch(_url(project), {"name": "X"}, format="json", HTTP_IF_MATCH=header.format(current=current))
    assert r.status_code == status, r.content


def test_if_match_on_an_object_the_caller_cannot_see_is_404(owner):
    client, _project = owner
    other_org, _u, _c = org_owner_client("other", "owner@other.test")
    theirs = make_project(other_org, "theirs")
    r = client.patch(_url(theirs), {"name": "X"}, format="json", HTTP_IF_MATCH='"whatever"')
    assert r.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_two_writers_with_one_etag_one_wins_the_other_gets_412():
    org, _user, client = org_owner_client()
    project = make_project(org, "race")
    etag = client.get(_url(project))["ETag"]
    results, barrier = [], threading.Barrier(2)

    def write(name):
        try:
            barrier.wait()
            results.append(client.patch(_url(project), {"name": name}, format="json",
                                        HTTP_IF_MATCH=etag).status_code)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in ("Alpha", "Beta")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [200, 412]


def test_the_committed_schema_declares_etag_and_if_match():
    with open(settings.BASE_DIR / "docs" / "openapi" / "v1.yaml") as fh:
        doc = yaml.safe_load(fh)
    item = doc["paths"]["/api/v1/projects/{id}/"]
    assert "ETag" in item["get"]["responses"]["200"]["headers"]
    for method in ("patch", "delete"):
        names = [p["name"] for p in item[method]["parameters"] if p["in"] == "header"]
        assert "If-Match" in names, method
        assert "412" in item[method]["responses"], method
