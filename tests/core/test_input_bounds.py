"""Input that no column or clock can hold is a 400 with a stable code, never a 500, and nothing is written.

The cases come from a probe of the API as a tenant and as staff: a datetime filter whose UTC offset PostgreSQL
refuses (it takes up to ±15:59, ISO 8601 up to ±23:59), integers past the column's range (a quota limit of 1e20,
a lease share of 1e19, a flavor's memory), a lease start in year 1 with a positive offset (no UTC instant), a
placement dry run whose window would end before it starts, and a fleet document with a control character.
"""
import pytest
from rest_framework import serializers

from apps.compute.models import Flavor
from apps.core.serializers import INT_MAX, INT_MIN, ModelSerializer, Serializer
from apps.reservations.models import Lease
from apps.tenancy.models import Quota
from tests.compute.conftest import gpu_host

pytestmark = pytest.mark.django_db
HUGE = 10 ** 20


@pytest.mark.parametrize("path", ["/api/v1/operations", "/api/v1/audit-events"])
@pytest.mark.parametrize("value", ["2026-01-01T00:00:00+20:00", "2026-01-01T00:00:00-23:59"])
def test_a_datetime_filter_takes_any_iso_offset_as_the_same_utc_instant(world, path, value):
    r = world.client_a.get(path, {"created_after": value})
    assert r.status_code == 200, r.content
    assert isinstance(r.json()["results"], list)


@pytest.mark.parametrize("path", ["/api/v1/operations", "/api/v1/audit-events"])
def test_a_datetime_filter_without_a_utc_instant_is_400(world, path):
    r = world.client_a.get(path, {"created_before": "0001-01-01T00:00:00+05:00"})
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error" and "created_before" in r.json()["errors"]


def test_a_quota_limit_beyond_the_column_is_400(world):
    """An organization owner sets a project's quota (tenant-reachable); the column is a bigint."""
    r = world.client_b.post("/api/v1/quotas", {"organization": str(world.org_b.pk), "project": str(world.project_b.pk),
                                               "resource": "gpus", "limit": HUGE}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error" and "limit" in r.json()["errors"]
    assert not Quota.objects.filter(project=world.project_b).exists()


def _lease(world, **kw):
    body = {"project": str(world.project_a.pk), "name": "l", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
            "count": 1, "start": "now", "end": "2027-06-01 00:00", **kw}
    return world.client_a.post("/api/v1/leases", body, format="json")


def test_a_lease_share_past_the_column_is_400(world):
    gpu_host()
    r = _lease(world, share_milli=10 ** 19)
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error" and "share_milli" in r.json()["errors"]
    assert not Lease.objects.exists()


def test_a_lease_start_in_year_one_with_an_offset_is_400(world):
    gpu_host()
    r = _lease(world, start="0001-01-01T00:00:00+05:00")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "invalid_lease_window" and "start" in r.json()["errors"]
    assert not Lease.objects.exists()


def test_a_flavor_memory_past_the_column_is_400(world):
    before = Flavor.objects.count()
    r = world.staff_client.post("/api/v1/flavors", {"name": "huge", "vcpus": 2, "memory_mib": HUGE}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error" and "memory_mib" in r.json()["errors"]
    assert Flavor.objects.count() == before


def test_a_placement_dry_run_ending_in_the_past_without_start_is_400(world):
    r = world.staff_client.post("/api/v1/placement/candidates",
                                {"project": str(world.project_a.pk), "gpus_per_host": 1,
                                 "end": "2000-01-01T00:00:00Z"}, format="json")
    assert r.status_code == 400, r.content
    assert "end" in r.json()["errors"]


def test_a_fleet_document_with_a_control_character_is_400_naming_the_line(world):
    r = world.staff_client.post("/api/v1/fleet/import", {"document": "zones:\n- name: a\x07b\n", "dry_run": True},
                                format="json")
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["code"] == "fleet_invalid", body
    assert "line 2" in str(body) and "x0007" in str(body)


def test_every_api_serializer_gets_the_default_integer_range():
    """The bound is one mechanism: every serializer of every app derives from apps.core's bases."""
    import importlib
    import pkgutil

    import apps
    for mod in pkgutil.iter_modules(apps.__path__):
        try:
            importlib.import_module(f"apps.{mod.name}.api.serializers")
        except ModuleNotFoundError:
            pass

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)
    strays = sorted(f"{c.__module__}.{c.__qualname__}" for c in subclasses(serializers.Serializer)
                    if c.__module__.startswith("apps.") and not issubclass(c, Serializer | ModelSerializer)
                    and not issubclass(c, serializers.ListSerializer))
    assert strays == []

    class Probe(Serializer):
        n = serializers.IntegerField()
        m = serializers.IntegerField(min_value=0)
        xs = serializers.ListField(child=serializers.IntegerField())

    fields = Probe().fields
    assert (fields["n"].min_value, fields["n"].max_value) == (INT_MIN, INT_MAX)
    assert (fields["m"].min_value, fields["m"].max_value) == (0, INT_MAX)
    assert fields["xs"].child.max_value == INT_MAX
    assert not Probe(data={"n": INT_MAX + 1, "m": 0, "xs": [1]}).is_valid()
    assert not Probe(data={"n": 1, "m": 0, "xs": [INT_MIN - 1]}).is_valid()
    assert Probe(data={"n": INT_MIN, "m": INT_MAX, "xs": []}).is_valid()


@pytest.mark.parametrize("document", ["- a\n- b\n", "just text\n", "42\n"])
def test_a_fleet_document_that_is_not_a_mapping_is_400(world, document):
    r = world.staff_client.post("/api/v1/fleet/import", {"document": document, "dry_run": True}, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "fleet_invalid"


def test_a_sign_in_without_a_client_address_is_no_500(db):
    """Behind a WSGI server that passes no REMOTE_ADDR the per-address sign-in throttle still has a key."""
    from rest_framework.test import APIClient
    r = APIClient(REMOTE_ADDR=None).post("/api/v1/session", {"email": "nobody@x.test", "password": "wrong-password"},
                                        format="json")
    assert r.status_code in (400, 401, 403), r.content


@pytest.mark.parametrize("body", [["zones"], "zones: []"])
def test_a_fleet_import_body_that_is_not_an_object_is_400(world, body):
    r = world.staff_client.post("/api/v1/fleet/import", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["code"] == "validation_error"
