"""Health ingest: classification table, de-duplication, thresholds, effects through inventory services, and the
`health_inject` command (the same service)."""

from __future__ import annotations

import datetime as dt
import json
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from apps.audit.models import AuditEvent
from apps.core.errors import ValidationFailed
from apps.health.classification import classification_load, classification_parse, classify
from apps.health.models import HealthEvent
from apps.health.services import health_event_ingest, health_event_preview
from apps.health.states import EventKind
from apps.inventory.models import Incident
from tests.inventory.helpers import make_host

pytestmark = pytest.mark.django_db
T0 = dt.datetime(2026, 6, 5, tzinfo=dt.UTC)


def test_shipped_classification_validates_and_cites_every_row():
    c = classification_load()
    assert c.version >= 1
    assert all(r.source.strip() for r in c.rules)
    assert {r.kind for r in c.rules} == set(EventKind.values)
    assert (classify("xid", 79, {}).klass, classify("xid", 79, {}).provider_at_fault) == ("gpu_lost", True)
    assert classify("xid", 48, {}).klass == "gpu_memory_uncorrectable"
    assert classify("xid", 64, {}).effects == ("cordon_gpu", "rma", "provider_at_fault", "recreate_vm")
    assert [classify("xid", x, {}).klass for x in (13, 31, 43)] == ["application"] * 3
    assert classify("xid", 94, {}).effects == () and classify("xid", 95, {}).provider_at_fault
    # the GPU System Processor stopped (the Llama 3 run's "GPU system processor" interruptions): reset and move
    assert [classify("xid", x, {}).klass for x in (119, 120)] == ["gsp_error"] * 2
    assert classify("xid", 119, {}).effects == ("cordon_gpu", "reset_gpu", "provider_at_fault", "recreate_vm")
    assert classify("xid", 9999, {}).klass == "unclassified"


@pytest.mark.parametrize(
    "text, message",
    [
        ("rows: []", "version"),
        (
            "version: 1\nrows: [{id: a, match: {kind: nope}, class: c, effects: [], needs_return_to_service: false, "
            "source: s}]",
            "match.kind",
        ),
        (
            "version: 1\nrows: [{id: a, match: {kind: xid}, class: c, effects: [explode], needs_return_to_service: "
            "false, source: s}]",
            "effects",
        ),
        (
            "version: 1\nrows: [{id: a, match: {kind: xid}, class: c, effects: [], needs_return_to_service: false}]",
            "source",
        ),
        (
            "version: 1\nrows: [{id: a, match: {kind: xid}, class: c, effects: [], needs_return_to_service: false, "
            "source: s}]",
            "catch-all",
        ),
        (
            "version: 1\nrows: [{id: a, match: {kind: ecc_sbe, threshold: {count: 0, window_s: 5}}, class: c, "
            "effects: [], needs_return_to_service: false, source: s}]",
            "threshold",
        ),
    ],
)
def test_loader_rejects_bad_rows(text, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        classification_parse(text)


def test_xid79_marks_gpu_faulty_cordons_host_and_opens_provider_incident_once():
    host = make_host("hx1", gpus=2)
    with time_machine.travel(T0, tick=False):
        event, created = health_event_ingest(
            actor=None, host=host, kind="xid", xid=79, gpu_index=1, observed_at=T0, dedup_key="agent-1"
        )
    assert created and event.classification == "gpu_lost" and event.needs_return_to_service
    assert event.applied["actions"] == ["gpu_mark_faulty", "host_cordon"]
    assert event.applied["pending"] == ["reboot_host"]
    gpu = host.gpus.get(index=1)
    host.refresh_from_db()
    assert (gpu.health, host.state, host.gpus.get(index=0).health) == ("faulty", "cordoned", "ok")
    inc = Incident.objects.get(gpu=gpu)
    assert (inc.start, inc.end, inc.provider_at_fault, str(inc.pk)) == (
        T0,
        None,
        True,
        event.applied["incident"],
    )
    assert AuditEvent.objects.filter(action="health.event.ingest").count() == 1
    with time_machine.travel(T0 + dt.timedelta(minutes=1), tick=False):  # the agent re-sends it
        again, created = health_event_ingest(
            actor=None, host=host, kind="xid", xid=79, gpu_index=1, observed_at=T0, dedup_key="agent-1"
        )
    assert (created, again.pk) == (False, event.pk)
    assert HealthEvent.objects.count() == 1 and Incident.objects.count() == 1
    assert AuditEvent.objects.filter(action="health.event.ingest").count() == 1


def test_default_dedup_key_is_the_event_itself():
    host = make_host("hx2", gpus=1)
    for _ in range(2):
        health_event_ingest(actor=None, host=host, kind="xid", xid=13, gpu_index=0, observed_at=T0)
    assert HealthEvent.objects.count() == 1
    assert HealthEvent.objects.get().applied["actions"] == []  # an application fault changes nothing
    host.refresh_from_db()
    assert host.state == "available" and host.gpus.get().health == "ok"


def test_unknown_gpu_port_and_bad_event_are_400():
    host = make_host("hx3", gpus=1)
    cases = [
        ({"kind": "xid", "xid": 79, "gpu_index": 7}, "health_gpu_unknown"),
        ({"kind": "ib_port_down", "hca_device": "mlx5_9"}, "health_hca_port_unknown"),
        ({"kind": "xid"}, "health_invalid_event"),
        ({"kind": "thermal", "xid": 3}, "health_invalid_event"),
        ({"kind": "bogus"}, "health_invalid_event"),
        ({"kind": "thermal", "count": 0}, "health_invalid_event"),
    ]
    for kwargs, code in cases:
        with pytest.raises(ValidationFailed) as exc:
            health_event_ingest(actor=None, host=host, **kwargs)
        assert exc.value.code == code, kwargs
    assert HealthEvent.objects.count() == 0


def test_nvswitch_and_fabric_events_are_validated_and_classified_by_their_rows():
    """The SXid number rides in `xid` and the switch is named by its PCI address; each new kind has its sourced
    row (table version 4)."""
    host = make_host("hx9", gpus=1, hca=1)
    cases = [
        ({"kind": "nvswitch_fatal", "xid": 24007}, "nvswitch"),  # which switch?
        ({"kind": "nvswitch_fatal", "nvswitch": "0000:07:00.0"}, "xid"),  # which SXid?
        ({"kind": "nvswitch_fatal", "xid": 24007, "nvswitch": "nvswitch2"}, "nvswitch"),  # not a PCI address
        ({"kind": "xid", "xid": 79, "nvswitch": "0000:07:00.0"}, "nvswitch"),
        ({"kind": "ib_link_flap", "nvswitch_port": 3}, "nvswitch"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValidationFailed) as exc:
            health_event_ingest(actor=None, host=host, **kwargs)
        assert (exc.value.code, list(exc.value.errors)) == ("health_invalid_event", [field]), kwargs
    assert HealthEvent.objects.count() == 0
    assert classification_load().version >= 4
    want = {"nvswitch_fatal": ("nvswitch_fatal", ("cordon_host", "reboot_host", "provider_at_fault", "recreate_vm")),
            "nvswitch_nonfatal": ("observe", ()), "fabric_incomplete": ("fabric_not_ready", ("cordon_gpu",)),
            "fabric_manager_down": ("fabric_not_ready", ("cordon_host",)), "ib_link_flap": ("observe", ()),
            "ib_port_errors": ("observe", ()), "ib_rate_degraded": ("fabric_degraded", ("cordon_host",))}
    for kind, (klass, effects) in want.items():
        rule = classify(kind, 12028 if kind.startswith("nvswitch") else None, {})
        assert (rule.klass, rule.effects) == (klass, effects) and rule.source.strip(), kind
    ev, _ = health_event_ingest(actor=None, host=host, kind="nvswitch_fatal", xid=24007, nvswitch="0000:07:00.0",
                                nvswitch_port=32, observed_at=T0)
    host.refresh_from_db()
    assert (ev.nvswitch, ev.nvswitch_port, ev.classification, host.state) == ("0000:07:00.0", 32, "nvswitch_fatal",
                                                                              "faulty")
    assert "SXid 24007 on NVSwitch 0000:07:00.0 port 32" in Incident.objects.get().reason


def test_port_and_switch_thresholds_count_per_port_and_per_switch():
    host = make_host("hx10", hca=2)
    for i, dev in enumerate(["mlx5_0", "mlx5_1", "mlx5_0"]):
        ev, _ = health_event_ingest(actor=None, host=host, kind="ib_link_flap", hca_device=dev,
                                    observed_at=T0 + dt.timedelta(minutes=i))
        assert ev.classification == "observe"
    ev, _ = health_event_ingest(actor=None, host=host, kind="ib_link_flap", hca_device="mlx5_0",
                                observed_at=T0 + dt.timedelta(minutes=5))
    assert (ev.classification, ev.applied["window_counts"]) == ("fabric_degraded", {"ib-link-flap-rate": 3})
    for i in range(9):
        health_event_ingest(actor=None, host=host, kind="nvswitch_nonfatal", xid=12028, nvswitch="0000:05:00.0",
                            nvswitch_port=i, observed_at=T0 + dt.timedelta(minutes=i))
    with time_machine.travel(T0 + dt.timedelta(minutes=10), tick=False):
        other = health_event_preview(host=host, kind="nvswitch_nonfatal", xid=12028, nvswitch="0000:06:00.0")
        same = health_event_preview(host=host, kind="nvswitch_nonfatal", xid=12028, nvswitch="0000:05:00.0")
    assert (other["rule"]["id"], same["rule"]["id"]) == ("nvswitch-nonfatal", "nvswitch-nonfatal-rate")


def test_sbe_threshold_counts_within_the_window_only():
    host = make_host("hx4", gpus=1)
    for i, (minutes, count) in enumerate([(0, 60), (60 * 25, 30), (60 * 26, 30)]):  # first one falls out
        with time_machine.travel(T0 + dt.timedelta(minutes=minutes), tick=False):
            ev, _ = health_event_ingest(
                actor=None, host=host, kind="ecc_sbe", gpu_index=0, count=count, dedup_key=f"sbe-{i}"
            )
        assert ev.classification == "observe" and host.gpus.get().health == "ok"
    with time_machine.travel(T0 + dt.timedelta(minutes=60 * 27), tick=False):
        preview = health_event_preview(host=host, kind="ecc_sbe", gpu_index=0, count=40)
        assert preview["rule"]["id"] == "ecc-sbe-rate" and preview["window_counts"] == {"ecc-sbe-rate": 100}
        assert HealthEvent.objects.count() == 3  # preview writes nothing
        ev, _ = health_event_ingest(
            actor=None, host=host, kind="ecc_sbe", gpu_index=0, count=40, dedup_key="4"
        )
    assert ev.classification == "gpu_memory_degrading" and host.gpus.get().health == "faulty"
    inc = Incident.objects.get()
    assert inc.provider_at_fault is False  # cordoned, but a corrected-error rate is not downtime


def test_later_provider_fault_escalates_the_open_incident():
    host = make_host("hx5", gpus=1)
    health_event_ingest(actor=None, host=host, kind="thermal", gpu_index=0, observed_at=T0)
    assert Incident.objects.get().provider_at_fault is False
    health_event_ingest(actor=None, host=host, kind="xid", xid=48, gpu_index=0, observed_at=T0)
    inc = Incident.objects.get()
    assert inc.provider_at_fault is True and "XID 48" in inc.reason


def test_host_level_signal_cordons_only_from_available():
    host = make_host("hx6", hca=1)
    ev, _ = health_event_ingest(actor=None, host=host, kind="ib_port_down", hca_device="mlx5_0")
    host.refresh_from_db()
    # table v5: a compute InfiniBand port down is the provider's fault (its VMs move): the host is marked faulty
    assert (ev.hca_port.device, ev.applied["actions"], host.state) == ("mlx5_0", ["host_mark_faulty"], "faulty")
    ev, _ = health_event_ingest(actor=None, host=host, kind="heartbeat_lost")  # already faulty: left as is
    assert ev.applied["actions"] == []


def test_health_inject_command_goes_through_ingest():
    host = make_host("hx7", gpus=1)
    out = StringIO()
    call_command("health_inject", "--host", "hx7", "--kind", "xid", "--xid", "79", "--gpu", "0", stdout=out)
    body = json.loads(out.getvalue())
    assert (body["created"], body["class"], body["applied"]["actions"]) == (
        True,
        "gpu_lost",
        ["gpu_mark_faulty", "host_cordon"],
    )
    assert HealthEvent.objects.get().source == "staff" and host.gpus.get().health == "faulty"
    out = StringIO()
    call_command(
        "health_inject",
        "--host",
        "hx7",
        "--kind",
        "xid",
        "--xid",
        "48",
        "--gpu",
        "0",
        "--preview",
        stdout=out,
    )
    assert json.loads(out.getvalue())["rule"]["id"] == "xid-48" and HealthEvent.objects.count() == 1
    with pytest.raises(CommandError, match="health_gpu_unknown"):
        call_command("health_inject", "--host", "hx7", "--kind", "xid", "--xid", "79", "--gpu", "5")
    with pytest.raises(CommandError, match="no host"):
        call_command("health_inject", "--host", "nope", "--kind", "thermal")
