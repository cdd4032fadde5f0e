"""deploy/grafana/gpucloud-dashboard.json stays in step with /metrics: it is valid JSON Grafana imports (unique panel
ids, a Prometheus datasource variable), and every metric, label and label value its queries name is one that
/metrics serves."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import settings

from tests.core.metrics_served import ADDED_LABELS, served_series

DASHBOARD = Path(settings.BASE_DIR) / "deploy" / "grafana" / "gpucloud-dashboard.json"


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels(dash: dict) -> list[dict]:
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))
    return out


def _exprs(dash: dict) -> list[str]:
    return [t["expr"] for p in _panels(dash) for t in p.get("targets", [])]


def test_dashboard_is_valid_grafana_json():
    dash = _dashboard()
    assert dash["uid"] == "gpucloud-overview" and dash["title"] == "gpucloud"
    panels = _panels(dash)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    graphs = [p for p in panels if p["type"] != "row"]
    assert len(graphs) >= 15
    for p in graphs:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and all(t["expr"] and t["refId"] for t in p["targets"]), p["title"]
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        for t in p["targets"]:
            e = t["expr"]
            assert e.count("(") == e.count(")") and e.count("{") == e.count("}"), e


@pytest.mark.django_db
def test_every_metric_label_and_value_the_dashboard_names_is_served():
    dash = _dashboard()
    names, labels = served_series()
    exprs = _exprs(dash) + [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    used = set()
    for e in exprs:
        metrics_in = set(re.findall(r"\b(gpucloud_[a-z0-9_]+)", e))
        assert metrics_in, e
        used |= metrics_in
        for m in metrics_in:
            assert m in names, f"{m} is not served by /metrics"
        known = set().union(*(labels.get(m, {}) for m in metrics_in)) | ADDED_LABELS
        for m, body in re.findall(r"(gpucloud_[a-z0-9_]+)\{([^}]*)\}", e):
            for key, op, value in re.findall(r'([a-z_]+)\s*(=~|!=|=)\s*"([^"]*)"', body):
                if key in ADDED_LABELS:
                    continue
                assert key in labels.get(m, {}), f"{m} has no label {key}"
                served = labels[m][key]
                for v in value.split("|"):
                    if op != "=~" or v.isidentifier():
                        assert v in served, f'{m}{{{key}="{v}"}}: served values {sorted(served)}'
        for clause in re.findall(r"\b(?:by|without) \(([^)]*)\)", e):
            for key in (k.strip() for k in clause.split(",")):
                assert key in known, f"{key} in {e!r} is no label of {sorted(metrics_in)}"
    business = {"gpucloud_gpus", "gpucloud_operations_in_progress", "gpucloud_operation_duration_seconds_count",
                "gpucloud_operation_oldest_step_age_seconds", "gpucloud_celery_queue_depth",
                "gpucloud_celery_queue_oldest_age_seconds", "gpucloud_ondemand_queue_waiting",
                "gpucloud_agents_seen_last_minute", "gpucloud_invoice_runs",
                "gpucloud_invoice_run_last_finished_timestamp_seconds", "gpucloud_http_requests_total",
                "gpucloud_http_request_duration_seconds_bucket"}
    assert business <= used, f"not on the dashboard: {sorted(business - used)}"
