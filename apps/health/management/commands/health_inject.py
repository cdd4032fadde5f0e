"""`manage.py health_inject --host H --kind xid --xid 79 [--gpu 0]`: inject one health event as staff.

Goes through the same ingest service as the agent API (`apps.health.services.health_event_ingest`), so the
classification, effects, incident and audit event are exactly what an agent report would cause. `--preview` prints
what the event would do and writes nothing. Prints the stored event (or the preview) as JSON.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from apps.core.errors import DomainError
from apps.health.services import health_event_ingest, health_event_preview
from apps.health.states import EventKind, EventSource
from apps.inventory.models import Host


class Command(BaseCommand):
    help = "Inject one health event (XID, ECC, NVLink, ...) for a host, through the agent's ingest service."

    def add_arguments(self, parser):
        parser.add_argument("--host", required=True, help="host name")
        parser.add_argument("--kind", required=True, choices=EventKind.values)
        parser.add_argument("--xid", type=int, help="XID number (kind xid) or SXid number (kinds nvswitch_*)")
        parser.add_argument("--gpu", type=int, help="GPU index on the host")
        parser.add_argument("--hca-device", default="", help="HCA device (kinds ib_*), e.g. mlx5_0")
        parser.add_argument("--hca-port", type=int, default=None, help="HCA port number (default 1)")
        parser.add_argument("--nvswitch", default="", help="NVSwitch PCI address (kinds nvswitch_*)")
        parser.add_argument("--nvswitch-port", type=int, default=None, help="NVSwitch port (link) number")
        parser.add_argument("--count", type=int, default=1)
        parser.add_argument("--observed-at", default="", help="ISO 8601 time with zone (default now)")
        parser.add_argument(
            "--dedup-key", default="", help="idempotency key (default derived from the event)"
        )
        parser.add_argument("--message", default="")
        parser.add_argument("--preview", action="store_true", help="print what would happen; write nothing")

    def handle(self, *args, **o):
        host = Host.objects.filter(name=o["host"]).first()
        if host is None:
            raise CommandError(f"no host {o['host']!r}")
        observed_at = parse_datetime(o["observed_at"]) if o["observed_at"] else None
        if o["observed_at"] and observed_at is None:
            raise CommandError("--observed-at is not an ISO 8601 time")
        event = {
            "host": host,
            "kind": o["kind"],
            "xid": o["xid"],
            "gpu_index": o["gpu"],
            "hca_device": o["hca_device"],
            "hca_port_number": o["hca_port"],
            "nvswitch": o["nvswitch"],
            "nvswitch_port": o["nvswitch_port"],
            "count": o["count"],
            "observed_at": observed_at,
        }
        try:
            if o["preview"]:
                self.stdout.write(json.dumps(health_event_preview(**event), indent=2))
                return
            row, created = health_event_ingest(
                actor=None, source=EventSource.STAFF, dedup_key=o["dedup_key"], message=o["message"], **event
            )
        except DomainError as exc:
            raise CommandError(f"{exc.code}: {exc}") from exc
        self.stdout.write(
            json.dumps(
                {
                    "id": str(row.id),
                    "created": created,
                    "class": row.classification,
                    "classification_version": row.classification_version,
                    "effects": row.effects,
                    "applied": row.applied,
                },
                indent=2,
            )
        )
