"""The `heartbeat_lost` detector: a host whose agent stopped heartbeating beyond the threshold gets one health
event (class host_unreachable: the host is marked faulty and its fence opens, ADR 0218); running it again adds
nothing; times are explicit."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.health.models import HealthEvent
from apps.health.services.heartbeat import heartbeat_lost_detect
from apps.health.tasks import heartbeat_lost_detect_task
from apps.inventory.models import AgentCredential
from tests.inventory.helpers import make_host

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 6, 5, 12, tzinfo=dt.UTC)


def _agent(host, *, last, revoked=False):
    AgentCredential.objects.create(
        host=host, prefix=f"p{host.name}", secret_hash="x", revoked_at=T0 if revoked else None
    )
    host.last_heartbeat_at = last
    host.save(update_fields=["last_heartbeat_at"])


def test_silent_agent_gets_one_event_and_is_taken_out(settings):
    settings.HEALTH_HEARTBEAT_LOST_SECONDS = 300
    silent = make_host("hb-silent")
    fresh = make_host("hb-fresh")
    revoked = make_host("hb-revoked")
    maint = make_host("hb-maint", state="maintenance")
    never = make_host("hb-never")
    _agent(silent, last=T0)
    _agent(fresh, last=T0 + dt.timedelta(seconds=200))
    _agent(revoked, last=T0, revoked=True)
    _agent(maint, last=T0)
    AgentCredential.objects.create(host=never, prefix="pnever", secret_hash="x")

    with time_machine.travel(T0 + dt.timedelta(seconds=299), tick=False):
        assert heartbeat_lost_detect() == []  # not yet beyond the threshold
    with time_machine.travel(T0 + dt.timedelta(seconds=301), tick=False):
        (event,) = heartbeat_lost_detect()
        assert (event.host, event.kind, event.classification, event.source) == (
            silent,
            "heartbeat_lost",
            "host_unreachable",
            "control_plane",
        )
        assert event.observed_at == T0 + dt.timedelta(seconds=300)
        assert event.applied["actions"] == ["host_mark_faulty"]
        assert event.applied["fence"]["status"] == "pending"
        assert heartbeat_lost_detect_task.run() == 0  # idempotent: the same silence is one event
    silent.refresh_from_db()
    fresh.refresh_from_db()
    assert (silent.state, fresh.state) == ("faulty", "available")
    assert HealthEvent.objects.count() == 1


def test_agent_back_then_silent_again_is_a_new_event(settings):
    settings.HEALTH_HEARTBEAT_LOST_SECONDS = 120
    host = make_host("hb-flappy")
    _agent(host, last=T0)
    with time_machine.travel(T0 + dt.timedelta(minutes=5), tick=False):
        assert len(heartbeat_lost_detect()) == 1
    host.last_heartbeat_at = T0 + dt.timedelta(minutes=10)  # it came back
    host.save(update_fields=["last_heartbeat_at"])
    with time_machine.travel(T0 + dt.timedelta(minutes=11), tick=False):
        assert heartbeat_lost_detect() == []
    with time_machine.travel(T0 + dt.timedelta(minutes=13), tick=False):
        (again,) = heartbeat_lost_detect()
    assert again.observed_at == T0 + dt.timedelta(minutes=12)
    assert HealthEvent.objects.filter(host=host, kind="heartbeat_lost").count() == 2
