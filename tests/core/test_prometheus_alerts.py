"""deploy/prometheus/gpucloud-alerts.yml stays loadable and in step with /metrics: every rule has the members
Prometheus requires and an operator reads (alert, expr, severity, summary), and every series, label and matched
label value its expressions name is one /metrics serves."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from tests.core.metrics_served import ADDED_LABELS, served_series

RULES = Path(settings.BASE_DIR) / "deploy" / "prometheus" / "gpucloud-alerts.yml"


def _rules() -> list[dict]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def test_rules_have_what_prometheus_and_the_operator_need():
    rules = _rules()
    names = [r["alert"] for r in rules]
    assert len(names) == len(set(names)) and len(rules) >= 8
    for r in rules:
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r["alert"]
        assert re.fullmatch(r"Gpucloud[A-Za-z]+", r["alert"])
        assert r["labels"]["severity"] in {"page", "ticket"} and r["annotations"]["summary"], r["alert"]
        assert "for" not in r or re.fullmatch(r"\d+[smh]", r["for"]), r["alert"]
        e = r["expr"]
        assert e.count("(") == e.count(")") and e.count("{") == e.count("}") and e.count("[") == e.count("]")


@pytest.mark.django_db
def test_every_series_label_and_value_the_rules_name_is_served():
    names, labels = served_series()
    for r in _rules():
        e = r["expr"]
        metrics = set(re.findall(r"\b(gpucloud_[a-z0-9_]+)", e))
        assert metrics, r["alert"]
        for m in metrics:
            assert m in names, f"{r['alert']}: {m} is not served by /metrics"
        for m, body in re.findall(r"(gpucloud_[a-z0-9_]+)\{([^}]*)\}", e):
            for key, op, value in re.findall(r'([a-z_]+)\s*(=~|!=|=)\s*"([^"]*)"', body):
                assert key in labels.get(m, {}), f"{r['alert']}: {m} has no label {key}"
                if op == "=":
                    assert value in labels[m][key], f"{r['alert']}: {m}{{{key}={value!r}}} is never served"
        known = set().union(*(labels.get(m, {}) for m in metrics)) | ADDED_LABELS
        for clause in re.findall(r"\b(?:by|without|on|ignoring) \(([^)]*)\)", e):
            for key in filter(None, (k.strip() for k in clause.split(","))):
                assert key in known, f"{r['alert']}: {key} is no label of {sorted(metrics)}"
        for key in re.findall(r"\$labels\.(\w+)", str(r["annotations"])):
            assert key in known, f"{r['alert']}: the summary names {key}, which the result does not carry"
