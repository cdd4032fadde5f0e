"""The blast-radius breaker: a leaf switch fault makes 12 hosts under it report their InfiniBand port down within
a minute; with a 25 % share, 3 hosts are cordoned, the 4th opens ONE incident naming the switch, and the other
9 stay in service (their events recorded and held). Staff release it; later events act again."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.health.models import ComponentIncident, HealthEvent
from apps.health.services import health_event_ingest
from apps.inventory.models import HcaPort, Host, Incident
from tests.scheduling import fleet
from tests.tenancy.helpers import client_for, make_user, token_for

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 6, 5, 3, tzinfo=dt.UTC)


def _staff():
    return client_for(token_for(make_user("ops@breaker.test", staff_role="operator"), staff=True))


def test_switch_fault_on_12_hosts_opens_one_incident_and_drains_no_more_than_allowed(settings):
    settings.HEALTH_BREAKER_MAX_SHARE = 0.25
    settings.HEALTH_BREAKER_WINDOW_SECONDS = 900
    fabric = fleet.ib_fabric("ib-brk")
    su, leaves = fleet.su_with_leaves("su-brk", rails=2, fabric=fabric)
    hosts = [fleet.host(gpus=8, su=su) for _ in range(12)]
    for h in hosts:
        fleet.cable(h, leaves, fabric=fabric)
    bad_leaf = leaves[1]
    for i, h in enumerate(hosts):
        port = HcaPort.objects.get(host=h, leaf_switch=bad_leaf)
        with time_machine.travel(T0 + dt.timedelta(seconds=5 * i), tick=False):
            event, _ = health_event_ingest(
                actor=None,
                host=h,
                kind="ib_port_down",
                hca_device=port.device,
                observed_at=T0 + dt.timedelta(seconds=5 * i),
            )
        assert event.classification == "fabric_degraded"
    states = [Host.objects.get(pk=h.pk).state for h in hosts]
    assert states == ["faulty"] * 3 + ["available"] * 9  # table v5: an IB port down is the provider's fault
    (incident,) = ComponentIncident.objects.all()
    assert (incident.switch, incident.hosts_under, incident.allowed, incident.events_held) == (
        bad_leaf,
        12,
        3,
        9,
    )
    assert incident.hosts == sorted(h.name for h in hosts)
    assert incident.opened_at == T0 + dt.timedelta(seconds=15)
    held = HealthEvent.objects.filter(applied__breaker=str(incident.pk))
    assert held.count() == 9 and all(e.applied["held_actions"] == ["host_mark_faulty"] for e in held)
    assert all("remediations" not in e.applied for e in held)  # and no VM is moved off a held host
    # no per-host incident for the held hosts: only the 3 hosts taken out have one
    assert set(Incident.objects.values_list("host_id", flat=True)) == {h.pk for h in hosts[:3]}
    # the other leaf is not affected: a fault under it acts as usual
    other = HcaPort.objects.get(host=hosts[11], leaf_switch=leaves[0])
    staff = _staff()
    listed = staff.get("/api/v1/health/breakers").json()["results"]
    assert [(b["switch"], b["allowed"], b["released_at"]) for b in listed] == [(bad_leaf.name, 3, None)]

    with time_machine.travel(T0 + dt.timedelta(minutes=30), tick=False):
        r = staff.post(f"/api/v1/health/breakers/{incident.pk}/release")
        assert r.status_code == 200 and r.json()["released_at"] is not None
        assert staff.post(f"/api/v1/health/breakers/{incident.pk}/release").status_code == 409
        event, _ = health_event_ingest(
            actor=None, host=hosts[11], kind="ib_port_down", hca_device=other.device
        )
    assert event.applied["actions"] == ["host_mark_faulty"] and "breaker" not in event.applied
    assert Host.objects.get(pk=hosts[11].pk).state == "faulty"


def test_tenant_cannot_see_breakers(world):
    r = world.client_a.get("/api/v1/health/breakers")  # a staff endpoint answers a tenant like a missing one
    assert (r.status_code, r.json()["code"]) == (404, "not_found")


def test_a_gpu_fault_that_moves_vms_is_not_counted_as_a_host_taken_out(settings):
    """4 hosts under a leaf, share 0.25: one host may be taken out. An XID 48 on another host's GPU moves the
    VMs off that GPU and leaves its host in service, so an InfiniBand port down on a third host still takes it
    out (was: the XID 48 counted as a host taken out and the port down opened the breaker)."""
    settings.HEALTH_BREAKER_MAX_SHARE = 0.25
    fabric = fleet.ib_fabric("ib-brk-gpu")
    su, leaves = fleet.su_with_leaves("su-brk-gpu", rails=1, fabric=fabric)
    hosts = [fleet.host(gpus=8, su=su) for _ in range(4)]
    for h in hosts:
        fleet.cable(h, leaves, fabric=fabric)
    with time_machine.travel(T0, tick=False):
        xid, _ = health_event_ingest(actor=None, host=hosts[0], kind="xid", xid=48, gpu_index=0)
    port = HcaPort.objects.get(host=hosts[1], leaf_switch=leaves[0])
    with time_machine.travel(T0 + dt.timedelta(seconds=5), tick=False):
        down, _ = health_event_ingest(actor=None, host=hosts[1], kind="ib_port_down", hca_device=port.device)
    assert "takes_host_out" not in xid.applied and down.applied["takes_host_out"] is True
    assert [Host.objects.get(pk=h.pk).state for h in hosts[:2]] == ["available", "faulty"]
    assert not ComponentIncident.objects.exists()
