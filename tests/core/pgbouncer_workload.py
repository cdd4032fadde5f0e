"""Run by tests/core/test_pgbouncer.py in a process of its own whose DATABASE_URL is PgBouncer in transaction
pooling: THREADS threads (more than the pool's server sessions) claim and release the same GPUs through the
ledger (row locks, exclusion constraints) and write audit events (deferred chain triggers, the chain's
transaction-level advisory lock) at once. Prints one JSON line: what was claimed, refused and failed, the
session settings each thread saw, and the audit chain's report.

argv: host id, rounds per thread, threads.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
django.setup()

from django.db import connection, transaction  # noqa: E402

from apps.audit.models import AuditEvent  # noqa: E402
from apps.audit.selectors import audit_chain_verify  # noqa: E402
from apps.audit.services import audit_record  # noqa: E402
from apps.inventory.models import Host  # noqa: E402
from apps.scheduling.errors import CapacityUnavailable  # noqa: E402
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release  # noqa: E402
from apps.tenancy.models import Project  # noqa: E402


def main(host_id: str, rounds: int, threads: int) -> dict:
    host = Host.objects.get(pk=host_id)
    gpus = list(host.gpus.order_by("index").values_list("pk", flat=True))
    project_id = Project.objects.values_list("pk", flat=True).get()
    out = {"claimed": 0, "refused": 0, "errors": [], "timezones": set(), "iterated": set()}
    lock = threading.Lock()
    barrier = threading.Barrier(threads)

    def work(i: int) -> None:
        try:
            barrier.wait()
            for n in range(rounds):
                consumer = ConsumerRef(id=uuid.uuid4(), consumer_type="instance", project_id=project_id)
                gpu = gpus[n % len(gpus)]   # every thread goes after the same GPU in the same round
                try:
                    allocations_claim(consumer=consumer, specs=[AllocationSpec(host_id=host.pk,
                                                                               resource_class="gpu", gpu_id=gpu)])
                    allocations_release(consumer_id=consumer.id)
                    key = "claimed"
                except CapacityUnavailable:
                    key = "refused"
                with transaction.atomic():
                    audit_record(actor=None, action="test.pgbouncer.round", target_type="test.round",
                                 target_id=f"{i}:{n}")
                with connection.cursor() as cur:
                    cur.execute("SHOW TIME ZONE")
                    tz = cur.fetchone()[0]
                ids = [e.pk for e in AuditEvent.objects.filter(action="test.pgbouncer.round")
                       .order_by("id").iterator(chunk_size=3)]   # several fetches: no server-side cursor
                with lock:
                    out[key] += 1
                    out["timezones"].add(tz)
                    out["iterated"].add(len(ids) > 0)
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the test
            with lock:
                out["errors"].append(f"{type(exc).__name__}: {exc}")
        finally:
            connection.close()

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    report = audit_chain_verify()
    out.update(timezones=sorted(out["timezones"]), iterated=sorted(out["iterated"]),
               chain_ok=report.ok, chain_checked=report.checked,
               server_side_cursors_disabled=bool(connection.settings_dict.get("DISABLE_SERVER_SIDE_CURSORS")))
    connection.close()
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
