"""The fault-replay benchmark (bench/fault_replay.py) at a tiny scale: it runs through the real ingest, remediation,
operations and invoice run, prints the figures the benchmark promises, and the SLA credits billing computed agree
with the ones computed from the replay's own JSON-lines log. The log-side credit computation is also held to a
hand-worked month."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fault_replay", ROOT / "bench" / "fault_replay.py")
fault_replay = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fault_replay)


def test_credits_from_log_by_hand(tmp_path):
    """June: VM a (standard) is down 8 h 00 min 30 s → 481 whole minutes of 43,200 held: 98.8866 % < 99.0 → 10 %
    of (720 h − 8 h 0 min 30 s) x $36 = $25,631.70 → $2,563.17. VM b (premium) is down 30 s inside June and
    15 min into July (still open at billing_until on Aug 1? no: moved): 1 min in June (99.9977 %, no credit)."""
    t = lambda *a: dt.datetime(2026, *a, tzinfo=dt.UTC).isoformat()  # noqa: E731
    rows = [
        {"type": "vm_active", "t": t(6, 1), "vm": "a", "host": "h1", "tier": "standard"},
        {"type": "vm_active", "t": t(6, 1), "vm": "b", "host": "h2", "tier": "premium"},
        {"type": "provider_fault", "t": t(6, 10, 0, 0, 0), "host": "h1", "vms": ["a"]},
        {"type": "vm_moved", "t": t(6, 10, 8, 0, 30), "vm": "a", "from_host": "h1"},
        {"type": "provider_fault", "t": t(6, 30, 23, 59, 30), "host": "h2", "vms": ["b"]},
        {"type": "vm_moved", "t": t(7, 1, 0, 15), "vm": "b", "from_host": "h2"},
        {"type": "config", "billing_until": t(8, 1), "hourly_price": "36.00", "tiers": fault_replay.TIERS},
    ]
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert fault_replay.credits_from_log(str(log)) == {
        ("a", "2026-06"): {"down_min": 481, "credit": "2563.17"},
        ("b", "2026-06"): {"down_min": 1, "credit": "0.00"},
        ("b", "2026-07"): {"down_min": 15, "credit": "0.00"},
    }


@pytest.mark.django_db
def test_tiny_replay_reports_the_figures_and_no_credit_mismatch(tmp_path, tiers, fake_driver, settings):  # noqa: F811
    settings.HEALTH_FENCE_DRIVER = "fake"  # the replay's hosts have BMCs that power off when asked
    lines = []
    result = fault_replay.replay(hosts=8, days=2, rate=150, seed=3, vm_share=0.5, log_path=str(tmp_path / "replay.jsonl"),
                                 out=lines.append, configure_driver=False)
    for key in ("detect_to_drain_p99_s", "recovered_pct", "credit_mismatches", "wall_s"):
        assert key in result
    assert result["faults"] > 0 and result["drains"] > 0, result
    assert result["credit_mismatches"] == 0, lines
    assert result["downtime_mismatches"] == 0, lines
    assert result["sla_reports"] > 0, result  # billing saw provider-fault downtime to compare
    assert 0 <= result["detect_to_drain_p99_s"] <= 60
    kinds = {json.loads(x)["type"] for x in (tmp_path / "replay.jsonl").read_text().splitlines()}
    assert {"config", "vm_active", "fault", "event", "provider_fault"} <= kinds
