"""Reads of audit events: tenant-scoped lists, the hash chain's verification and the SIEM export (staff).

Staff see every event. A tenant sees the events of the organizations it belongs to (organization-level
membership: any role) and of the projects it can see; never another organization's. Security events about a
user (sign-ins, factors, tokens) are written once per organization the user belongs to, so each one's owners
see them."""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q, QuerySet

from .models import AuditChainLink, AuditEvent


def audit_event_list_visible_to(user) -> QuerySet[AuditEvent]:
    from apps.tenancy.selectors import (
        is_staff,
        org_role_of,
        organization_ids_visible_to,
        project_list_visible_to,
    )

    qs = AuditEvent.objects.all()
    if user is None or not user.is_authenticated:
        return qs.none()
    if is_staff(user):
        return qs
    org_ids = [org for org in organization_ids_visible_to(user) if org_role_of(user, org)]
    project_ids = list(project_list_visible_to(user).values_list("id", flat=True))
    return qs.filter(Q(organization_id__in=org_ids) | Q(project_id__in=project_ids))


# --- the targets' names -----------------------------------------------------------------------------------------

#: The field that names an object, by the first of these its model has as a column: a host's or a project's
#: `name`, a user's `email`, a `slug`, a quota's `resource` (`gpus:H100-SXM5-80GB`). Objects named by a computed
#: number (an invoice's `display_number`) are left out: their number is in the event's `after`.
NAME_FIELDS = ("name", "email", "slug", "resource")


def audit_target_names(events) -> dict[tuple[str, str], str]:
    """`{(target_type, target_id): name}` for the events' targets that still exist and have a name field
    (`NAME_FIELDS`): one query per target type of the page, whatever its length. A type that is no model, a
    model without a name field, an id that is not its primary key's kind, or a deleted object is left out (the
    caller shows the id). Names are read as they are now, not as they were at the event."""
    from django.apps import apps
    from django.core.exceptions import ValidationError

    wanted: dict[str, set[str]] = {}
    for event in events:
        if event.target_type and event.target_id:
            wanted.setdefault(event.target_type, set()).add(event.target_id)
    names: dict[tuple[str, str], str] = {}
    for target_type, ids in wanted.items():
        try:
            model = apps.get_model(target_type)
        except (LookupError, ValueError):
            continue
        concrete = {f.name for f in model._meta.concrete_fields}
        field = next((f for f in NAME_FIELDS if f in concrete), None)
        if field is None:
            continue
        keys = []
        for raw in ids:
            try:
                keys.append(model._meta.pk.to_python(raw))
            except ValidationError:
                continue
        for pk, name in model._base_manager.filter(pk__in=keys).values_list("pk", field):
            if name:
                names[(target_type, str(pk))] = str(name)
    return names


# --- the hash chain (ADR 0111) --------------------------------------------------------------------------------

GENESIS_HASH = "0" * 64

_CHAIN_ROWS = """
SELECT l.seq, l.event_id::text, l.prev_hash, l.hash,
       CASE WHEN e.id IS NULL THEN NULL
            ELSE encode(sha256(convert_to(l.prev_hash || audit_event_canonical(e), 'UTF8')), 'hex') END
FROM audit_auditchainlink l LEFT JOIN audit_auditevent e ON e.id = l.event_id
ORDER BY l.seq
"""

_UNCHAINED = """
SELECT e.id::text FROM audit_auditevent e
WHERE NOT EXISTS (SELECT 1 FROM audit_auditchainlink l WHERE l.event_id = e.id)
ORDER BY e.created_at LIMIT 1
"""


@dataclass(frozen=True)
class ChainBreak:
    """The first broken link: `reason` is `gap` (a link is missing before `seq`), `prev_mismatch` (the link does
    not name the previous link's hash), `event_missing` (the event row is gone), `hash_mismatch` (the event or
    its link was changed after it was written) or `unchained` (an event without a link: written with the chain
    trigger disabled; `seq` is None)."""

    reason: str
    seq: int | None
    event_id: str


@dataclass(frozen=True)
class ChainReport:
    """`checked` links read; `head_seq`/`head_hash` the last good link (0 and 64 zeros for an empty chain);
    `broken` the first break or None."""

    checked: int
    head_seq: int
    head_hash: str
    broken: ChainBreak | None

    @property
    def ok(self) -> bool:
        return self.broken is None


def audit_chain_verify() -> ChainReport:
    """Walk the whole chain in `seq` order, recomputing each hash from the stored event (server-side cursor,
    constant memory), and report the first broken link. Committed events only: an event is linked when its
    transaction commits. Cutting the newest events off the end is not visible here; the SIEM that received the
    export holds the later hashes (ADR 0111)."""
    checked, head_seq, head_hash = 0, 0, GENESIS_HASH
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CHAIN_ROWS)
        while rows := cursor.fetchmany(2000):
            for seq, event_id, prev_hash, stored, recomputed in rows:
                reason = ("gap" if seq != head_seq + 1 else "prev_mismatch" if prev_hash != head_hash
                          else "event_missing" if recomputed is None else "hash_mismatch" if recomputed != stored
                          else None)
                if reason is not None:
                    return ChainReport(checked, head_seq, head_hash, ChainBreak(reason, seq, event_id))
                checked, head_seq, head_hash = checked + 1, seq, stored
        cursor.execute(_UNCHAINED)
        row = cursor.fetchone()
    broken = ChainBreak("unchained", None, row[0]) if row else None
    return ChainReport(checked, head_seq, head_hash, broken)


def audit_export_lines(*, after_seq: int = 0, limit: int | None = None) -> Iterator[str]:
    """The chained events after `after_seq`, oldest first, as JSON Lines (one object per line, ADR 0111):
    `seq`, `prev_hash`, `hash`, then the event (`id`, `time`, `action`, `actor` {id, email, is_staff,
    token_prefix}, `organization`, `project`, `target` {type, id}, `before`, `after`, `request_id`,
    `source_ip`). `seq` follows commit order, so a collector that asks for `after_seq` = its last `seq` never
    misses an event that committed late."""
    qs = (AuditChainLink.objects.filter(seq__gt=after_seq).select_related("event").order_by("seq"))
    if limit is not None:
        qs = qs[:limit]
    for link in qs.iterator(chunk_size=1000):
        e = link.event
        yield json.dumps({
            "seq": link.seq, "prev_hash": link.prev_hash, "hash": link.hash,
            "id": str(e.pk), "time": e.created_at.isoformat(), "action": e.action,
            "actor": {"id": str(e.actor_id) if e.actor_id else None, "email": e.actor_email,
                      "is_staff": e.actor_is_staff, "token_prefix": e.token_prefix},
            "organization": str(e.organization_id) if e.organization_id else None,
            "project": str(e.project_id) if e.project_id else None,
            "target": {"type": e.target_type, "id": e.target_id},
            "before": e.before, "after": e.after, "request_id": e.request_id, "source_ip": e.source_ip,
        }, sort_keys=True, separators=(",", ":"))
