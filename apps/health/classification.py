"""The fault classification table (classification.yaml): loaded, validated and matched.

`classification_load()` parses and validates the file (raises `ImproperlyConfigured` naming the row and field);
`classify(kind, xid, window_count)` returns the first matching `Rule`. The app's `ready()` loads it, so a broken
file stops the process at start-up.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import yaml
from django.core.exceptions import ImproperlyConfigured

from .states import EFFECTS, XID_KINDS, EventKind

PATH = Path(__file__).with_name("classification.yaml")


@dataclass(frozen=True)
class Rule:
    id: str
    kind: str
    xid: int | None
    threshold_count: int | None
    threshold_window_s: int | None
    klass: str
    effects: tuple[str, ...]
    needs_return_to_service: bool
    source: str

    @property
    def provider_at_fault(self) -> bool:
        return "provider_at_fault" in self.effects

    def as_dict(self) -> dict:
        threshold = (
            None
            if self.threshold_count is None
            else {"count": self.threshold_count, "window_s": self.threshold_window_s}
        )
        return {
            "id": self.id,
            "kind": self.kind,
            "xid": self.xid,
            "threshold": threshold,
            "class": self.klass,
            "effects": list(self.effects),
            "provider_at_fault": self.provider_at_fault,
            "needs_return_to_service": self.needs_return_to_service,
            "source": self.source,
        }


@dataclass(frozen=True)
class Classification:
    version: int
    rules: tuple[Rule, ...]


def _fail(where: str, msg: str):
    raise ImproperlyConfigured(f"apps/health/classification.yaml {where}: {msg}")


def _rule(i: int, row) -> Rule:
    where = f"row {i}"
    if not isinstance(row, dict):
        _fail(where, "not a mapping")
    where = f"row {i} ({row.get('id', '?')})"
    unknown = set(row) - {"id", "match", "class", "effects", "needs_return_to_service", "source"}
    if unknown:
        _fail(where, f"unknown keys {sorted(unknown)}")
    match = row.get("match") or {}
    if not isinstance(match, dict) or match.get("kind") not in EventKind.values:
        _fail(where, f"match.kind must be one of {EventKind.values}")
    if set(match) - {"kind", "xid", "threshold"}:
        _fail(where, f"unknown match keys {sorted(set(match) - {'kind', 'xid', 'threshold'})}")
    xid = match.get("xid")
    if xid is not None and (match["kind"] not in XID_KINDS or not isinstance(xid, int) or xid < 0):
        _fail(where, f"match.xid must be a non-negative integer on kinds {list(XID_KINDS)}")
    threshold = match.get("threshold")
    count = window = None
    if threshold is not None:
        count, window = (threshold or {}).get("count"), (threshold or {}).get("window_s")
        if not (isinstance(count, int) and count >= 1 and isinstance(window, int) and window >= 1):
            _fail(where, "match.threshold needs integer count >= 1 and window_s >= 1")
    effects = row.get("effects")
    if not isinstance(effects, list) or set(effects) - set(EFFECTS):
        _fail(where, f"effects must be a list of {list(EFFECTS)}")
    for key in ("id", "class", "source"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            _fail(where, f"{key} is required (text)")
    if not isinstance(row.get("needs_return_to_service"), bool):
        _fail(where, "needs_return_to_service must be true or false")
    return Rule(
        row["id"],
        match["kind"],
        xid,
        count,
        window,
        row["class"],
        tuple(effects),
        row["needs_return_to_service"],
        row["source"],
    )


def classification_parse(text: str) -> Classification:
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("version"), int) or doc["version"] < 1:
        _fail("version", "must be an integer >= 1")
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        _fail("rows", "must be a non-empty list")
    rules = tuple(_rule(i, row) for i, row in enumerate(rows))
    ids = [r.id for r in rules]
    if len(set(ids)) != len(ids):
        _fail("rows", "ids must be unique")
    missing = set(EventKind.values) - {r.kind for r in rules if r.xid is None and r.threshold_count is None}
    if missing:
        _fail("rows", f"every kind needs a catch-all row (no xid, no threshold): missing {sorted(missing)}")
    return Classification(doc["version"], rules)


@functools.cache
def classification_load(path: Path = PATH) -> Classification:
    return classification_parse(Path(path).read_text())


def classify(kind: str, xid: int | None, window_count: dict[str, int]) -> Rule:
    """The first rule matching `kind`/`xid`; `window_count[rule.id]` is the summed count within a threshold rule's
    window (the caller computes it for each threshold rule, see `threshold_rules`)."""
    for rule in classification_load().rules:
        if rule.kind != kind or (rule.xid is not None and rule.xid != xid):
            continue
        if rule.threshold_count is not None and window_count.get(rule.id, 0) < rule.threshold_count:
            continue
        return rule
    raise ImproperlyConfigured(f"no classification row for kind {kind}")  # the loader forbids this


#: effects that act on one GPU: a row naming one is about the event's GPU
GPU_EFFECTS = frozenset({"cordon_gpu", "reset_gpu"})


def host_level(kind: str) -> bool:
    """Whether events of `kind` are about the host, not one of its GPUs (the agent's heartbeat, an HCA port, an
    NVSwitch, the Fabric Manager): the table marks a kind's scope by its rows' effects, and a host-level kind's
    rows act on the host (cordon_host) and none acts on one GPU (`GPU_EFFECTS`). Such an event names no GPU."""
    rows = [r for r in classification_load().rules if r.kind == kind]
    return any("cordon_host" in r.effects for r in rows) and not any(GPU_EFFECTS & set(r.effects) for r in rows)


def threshold_rules(kind: str, xid: int | None) -> list[Rule]:
    return [
        r
        for r in classification_load().rules
        if r.kind == kind and r.threshold_count is not None and (r.xid is None or r.xid == xid)
    ]
