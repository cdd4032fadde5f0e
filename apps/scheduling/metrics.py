"""Prometheus metrics of the fleet's GPUs, computed from the database at scrape time (core's
`ScrapeTimeCollector`), so every web process reports the same fleet-wide figures.

- ``gpucloud_gpus{model, state}``: GPUs of hosts that are not retired, by catalog model and one state, the
  first that applies: ``allocated`` (any allocation of the ledger whose period holds now: a whole GPU, a MIG
  slice, a vGPU, a VF, a share, or a lease holding it), ``host_unavailable`` (its host is not ``available``:
  enrolling, cordoned, draining, maintenance, faulty), ``unhealthy`` (its health is not ``ok``), ``scrubbing``
  (``dirty`` or ``scrub_failed``), ``free`` (placeable now). Sum over ``state`` = the fleet's GPUs of a model.
  One grouped query over the GPUs (an indexed existence probe of the ledger per GPU).
"""
from __future__ import annotations

from django.db.models import Case, CharField, Count, Exists, OuterRef, Q, Value, When
from prometheus_client.core import GaugeMetricFamily

from apps.core import clock
from apps.core.metrics import ScrapeTimeCollector
from apps.inventory.models import Gpu

from .models import Allocation

GPU_STATES = ("allocated", "host_unavailable", "unhealthy", "scrubbing", "free")


def gpu_counts_by_model_and_state() -> dict[tuple[str, str], int]:
    """{(model, state): GPUs} for the GPUs of hosts not retired; states as in the module docstring."""
    at = clock.now()
    live = Allocation.objects.filter(gpu_id=OuterRef("pk"), period__contains=at)
    state = Case(
        When(Exists(live), then=Value("allocated")),
        When(~Q(host__state="available"), then=Value("host_unavailable")),
        When(~Q(health="ok"), then=Value("unhealthy")),
        When(~Q(scrub_state="clean"), then=Value("scrubbing")),
        default=Value("free"), output_field=CharField(),
    )
    rows = (Gpu.objects.exclude(host__state="retired").annotate(state=state).order_by()
            .values("model", "state").annotate(n=Count("id")))
    return {(r["model"], r["state"]): r["n"] for r in rows}


class GpuCollector(ScrapeTimeCollector):
    def families(self):
        family = GaugeMetricFamily("gpucloud_gpus", "GPUs by catalog model and state (allocated, "
                                   "host_unavailable, unhealthy, scrubbing, free).", labels=["model", "state"])
        counts = gpu_counts_by_model_and_state()
        for model in sorted({m for m, _ in counts}):
            for state in GPU_STATES:  # every state of a model present, 0 included: rates and sums stay defined
                family.add_metric([model, state], counts.get((model, state), 0))
        yield family


#: The one collector of this module; `integrations.register` adds it to core's registry once.
COLLECTOR = GpuCollector()
