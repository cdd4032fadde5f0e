"""What /metrics serves, for the tests of the files that name its series (the Grafana dashboard, the alert rules)."""
from __future__ import annotations

import re
import uuid

from apps.billing.models import InvoiceRun
from apps.core import clock
from apps.networking.models import FabricDriftEvent
from apps.operations.models import Operation
from tests.scheduling import fleet

#: the series of a family from its `# TYPE` line (a counter's line already names it with `_total`)
SUFFIXES = {"histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum", "")}
#: labels Prometheus adds to every scraped series, and the histogram bucket bound
ADDED_LABELS = {"job", "instance", "le"}


def served_series() -> tuple[set[str], dict[str, dict[str, set[str]]]]:
    """(every series name /metrics serves, {series name: {label: values seen}}) after making one row of each
    kind the collectors count, so that every family has samples."""
    from django.test import Client

    fleet.host(gpus=1)
    now = clock.now()
    Operation.objects.create(kind="k", target_type="t", target_id=uuid.uuid4(), status="running")
    Operation.objects.create(kind="k", target_type="t", target_id=uuid.uuid4(), status="succeeded", finished_at=now)
    InvoiceRun.objects.create(period="2030-01", status="completed", finished_at=now)
    FabricDriftEvent.objects.create(key="ib:x", fabric=fleet.ib_fabric("x"), reason="missing")
    from apps.core.metrics import TASK_SEND_FAILURES
    TASK_SEND_FAILURES.labels("grafana.test").inc(0)
    client = Client()
    client.get("/healthz")
    text = client.get("/metrics").content.decode()
    names = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names |= {name + s for s in SUFFIXES.get(kind, ("",))}
    labels: dict[str, dict[str, set[str]]] = {}
    for name, body in re.findall(r"^([a-z_:][a-z0-9_:]*)\{([^}]*)\}", text, re.M):
        for key, value in re.findall(r'([a-z_]+)="([^"]*)"', body):
            labels.setdefault(name, {}).setdefault(key, set()).add(value)
    return names, labels


