"""Staff may record when a condition took effect (`at`); incidents then carry exactly those times."""
import datetime as dt

import pytest
from rest_framework.test import APIClient

from apps.core.clock import now
from apps.identity.models import StaffRole, User
from apps.inventory.models import Host, Incident
from tests.inventory.helpers import make_host


@pytest.fixture
def operator_client():
    user = User.objects.create_user("op@example.com", staff_role=StaffRole.OPERATOR)
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def host(db):
    return make_host("h-times", state="available")


@pytest.mark.django_db
def test_backdated_fault_opens_and_closes_incident_at_given_times(operator_client, host):
    start = (now() - dt.timedelta(hours=10)).replace(microsecond=0)
    end = start + dt.timedelta(hours=9)
    url = f"/api/v1/hosts/{host.id}"
    resp = operator_client.post(f"{url}/mark-faulty", {"reason": "PSU failure", "at": start.isoformat()},
                                format="json")
    assert resp.status_code == 200, resp.content
    resp = operator_client.post(f"{url}/mark-available", {"reason": "PSU replaced", "at": end.isoformat()},
                                format="json")
    assert resp.status_code == 200, resp.content
    incident = Incident.objects.get(host=host)
    assert (incident.start, incident.end, incident.provider_at_fault) == (start, end, True)
    assert Host.objects.get(pk=host.pk).state == "available"


@pytest.mark.django_db
@pytest.mark.parametrize("offset_hours", [+1, -48])
def test_future_or_before_last_change_is_rejected_and_nothing_changes(operator_client, host, offset_hours):
    Host.objects.filter(pk=host.pk).update(state_changed_at=now() - dt.timedelta(hours=24))
    at = now() + dt.timedelta(hours=offset_hours)
    resp = operator_client.post(f"/api/v1/hosts/{host.id}/mark-faulty", {"reason": "x", "at": at.isoformat()},
                                format="json")
    assert resp.status_code == 400
    assert resp.json()["code"] == "invalid_time"
    assert Host.objects.get(pk=host.pk).state == "available"
    assert not Incident.objects.filter(host=host).exists()
