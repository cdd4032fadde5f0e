"""Fleet import: normalise + validate a document, diff it against the database, apply it in one transaction.

`fleet_plan(text)` -> `FleetPlan` (errors, or the change set). `fleet_apply(plan)` writes it (bulk operations).
Import creates and updates the objects the file names; objects in the database that the file does not name are
reported (`extra`) and left alone (retire hosts through the API). Re-importing the same file changes nothing.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction

from apps.core.clock import now

from ..catalog import gpu_model_get
from ..topology import topology_changed
from .loader import FleetError, FleetSyntaxError, expand, line_of, parse_yaml
from .schema import COLLECTIONS, KIND, KINDS, NESTED, Kind, key_paths

Key = tuple
Values = dict


@dataclass
class Change:
    kind: str
    key: Key
    op: str                      # create | update
    values: Values
    before: Values = field(default_factory=dict)

    def describe(self) -> str:
        name = "/".join(str(k) for k in self.key)
        if self.op == "create":
            return f"+ {self.kind} {name}"
        diffs = ", ".join(f"{f}: {self.before.get(f)!r} -> {v!r}" for f, v in self.values.items())
        return f"~ {self.kind} {name}: {diffs}"


@dataclass
class FleetPlan:
    errors: list[FleetError] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    extra: dict[str, list[Key]] = field(default_factory=dict)
    desired: dict[str, dict[Key, Values]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    def summary(self) -> dict:
        created = defaultdict(int)
        updated = defaultdict(int)
        for c in self.changes:
            (created if c.op == "create" else updated)[c.kind] += 1
        return {"created": dict(created), "updated": dict(updated), "unchanged": {
            k: n - created[k] - updated[k] for k, n in self.counts.items()},
            "not_in_file": {k: len(v) for k, v in self.extra.items() if v}}

    def diff_lines(self) -> list[str]:
        return [c.describe() for c in self.changes]


# --- normalisation -----------------------------------------------------------------------------------------
def _value(kind: Kind, name: str, raw: dict, rec: dict, line: int, errors: list[FleetError]):
    f = kind.fields[name]
    present = (f.yaml or name) in raw and raw[f.yaml or name] is not None
    value = raw.get(f.yaml or name) if present else None
    if not present:
        if f.required:
            errors.append(FleetError(line, f"{kind.name}: missing required field {f.yaml or name!r}"))
        return None if f.null or f.type == "ref" else f.default
    if f.type == "int":
        try:
            return int(str(value), 0) if isinstance(value, str) else int(value)
        except (TypeError, ValueError):
            errors.append(FleetError(line, f"{kind.name}: {name} must be an integer, got {value!r}"))
            return f.default
    if f.type == "choice":
        if value not in f.choices:
            errors.append(FleetError(line, f"{kind.name}: {name} must be one of {list(f.choices)}, got {value!r}"))
        return str(value)
    if f.type == "ref":
        if isinstance(value, list | tuple):
            return tuple(value)
        prefix: tuple = ()
        for s in f.scope:
            prefix += rec.get(s) or ()
        return prefix + (str(value),)
    return str(value)


def _record(kind: Kind, raw, parent_key: Key | None, errors: list[FleetError]) -> tuple[Key, Values, int] | None:
    line = line_of(raw)
    if not isinstance(raw, dict):
        errors.append(FleetError(line, f"{kind.name}: expected a mapping"))
        return None
    if kind.name == "link":
        raw = dict(raw)
        for end in ("a", "b"):
            if isinstance(raw.get(end), str) and ":" in raw[end]:
                raw[f"{end}_switch"], raw[f"{end}_port"] = raw[end].rsplit(":", 1)
    known = {f.yaml or n for n, f in kind.fields.items()} | set(NESTED.get(kind.name, {})) | {"a", "b"}
    for extra_key in set(raw) - known - {kind.parent}:
        errors.append(FleetError(line, f"{kind.name}: unknown field {extra_key!r}"))
    rec: dict = {}
    if kind.parent:
        rec[kind.parent] = parent_key
    for name in kind.fields:
        if name == kind.parent:
            continue
        rec[name] = _value(kind, name, raw, rec, line, errors)
    key = tuple(x for n in kind.key for x in (rec[n] if kind.fields[n].type == "ref" else (rec[n],)))
    return key, rec, line


def normalise(doc) -> tuple[dict[str, dict[Key, Values]], dict[str, dict[Key, int]], list[FleetError]]:
    errors: list[FleetError] = []
    desired: dict[str, dict[Key, Values]] = {k.name: {} for k in KINDS}
    lines: dict[str, dict[Key, int]] = {k.name: {} for k in KINDS}
    if not isinstance(doc, dict):
        return desired, lines, [FleetError(line_of(doc), "the document must be a mapping")]
    for top in set(doc) - set(COLLECTIONS) - {"version", "sources", "description"}:
        errors.append(FleetError(line_of(doc), f"unknown top-level key {top!r}"))

    def add(kind_name: str, raw, parent_key=None):
        kind = KIND[kind_name]
        out = _record(kind, raw, parent_key, errors)
        if out is None:
            return
        key, rec, line = out
        if key in desired[kind_name]:
            errors.append(FleetError(line, f"duplicate {kind_name} {'/'.join(map(str, key))} "
                                           f"(first at line {lines[kind_name][key]})"))
            return
        desired[kind_name][key], lines[kind_name][key] = rec, RecordLine(line, getattr(raw, "key_lines", {}))
        for coll, child in NESTED.get(kind_name, {}).items():
            for item in raw.get(coll) or []:
                add(child, item, key)

    for coll, kind_name in COLLECTIONS.items():
        for raw in doc.get(coll) or []:
            add(kind_name, raw)
    return desired, lines, errors


class RecordLine(int):
    """A record's line number that also knows the line of each of its fields."""

    def __new__(cls, line: int, fields: dict):
        obj = super().__new__(cls, line)
        obj.fields = fields
        return obj


def _fline(lines, kind: str, key, field: str) -> int:
    """Line of `field` in the record (the record's own line when the field came from a template or is absent)."""
    rec_line = lines[kind][key]
    return int(getattr(rec_line, "fields", {}).get(field) or rec_line)


# --- validation --------------------------------------------------------------------------------------------
def _refs_exist(desired, lines, existing_keys, errors):
    for kind in KINDS:
        for key, rec in desired[kind.name].items():
            for name, f in kind.fields.items():
                target = rec.get(name)
                if f.type != "ref" or target is None or name == kind.parent:
                    continue
                if target not in desired[f.ref] and target not in existing_keys[f.ref]:
                    errors.append(FleetError(lines[kind.name][key],
                                             f"{kind.name} {'/'.join(map(str, key))}: unknown {f.ref} "
                                             f"{'/'.join(map(str, target))!r}"))


def _uniques(desired, lines, db_owner, errors):
    for kind in KINDS:
        for fname in kind.unique:
            seen: dict[str, Key] = {}
            for key, rec in desired[kind.name].items():
                value = rec.get(fname)
                if not value:
                    continue
                line = _fline(lines, kind.name, key, fname)
                if value in seen:
                    errors.append(FleetError(line, f"duplicate {kind.name} {fname} {value!r} "
                                                   f"(also line {_fline(lines, kind.name, seen[value], fname)})"))
                    continue
                seen[value] = key
                owner = db_owner[(kind.name, fname)].get(value)
                if owner is not None and owner != key and owner not in desired[kind.name]:
                    errors.append(FleetError(line, f"{kind.name} {fname} {value!r} already belongs to "
                                                   f"{kind.name} {'/'.join(map(str, owner))} in the inventory"))


def _switch_ports(desired, lines, port_counts, errors):
    used: dict[tuple, tuple[int, str]] = {}

    def use(switch, port, line, what):
        if switch is None or port is None:
            return
        ref = (switch, port)
        limit = port_counts.get(switch)
        if limit is not None and not 1 <= port <= limit:
            errors.append(FleetError(line, f"{what}: switch {switch[0]} has ports 1..{limit}, not {port}"))
        if ref in used:
            errors.append(FleetError(line, f"switch port {switch[0]}:{port} used twice: {what} and "
                                           f"{used[ref][1]} (line {used[ref][0]})"))
        else:
            used[ref] = (line, what)

    for key, rec in desired["link"].items():
        line = lines["link"][key]
        use(rec["a_switch"], rec["a_port"], line, f"link {rec['a_switch'][0]}:{rec['a_port']}")
        use(rec["b_switch"], rec["b_port"], line, f"link {rec['b_switch'][0]}:{rec['b_port']}")
    for key, rec in desired["hca_port"].items():
        use(rec["leaf_switch"], rec["leaf_port"], _fline(lines, "hca_port", key, "leaf_port"),
            f"HCA port {key[0]}/{key[1]}")
    for key, rec in desired["nic"].items():
        use(rec["switch"], rec["switch_port"], _fline(lines, "nic", key, "switch_port"), f"NIC {key[0]}/{key[1]}")


def _devices(desired, lines, existing_hosts, errors):
    for key, rec in desired["gpu"].items():
        line = _fline(lines, "gpu", key, "numa_node")
        if gpu_model_get(rec["model"]) is None:
            errors.append(FleetError(_fline(lines, "gpu", key, "model"), f"gpu {key[0]}/{key[1]}: unknown GPU model {rec['model']!r}"))
        host = desired["host"].get(rec["host"]) or existing_hosts.get(rec["host"])
        if host is not None and rec["numa_node"] >= host["numa_nodes"]:
            errors.append(FleetError(line, f"gpu {key[0]}/{key[1]}: NUMA node {rec['numa_node']} but host "
                                           f"{key[0]} has {host['numa_nodes']} NUMA node(s)"))
    for kind in ("hca_port", "nic"):
        for key, rec in desired[kind].items():
            host = desired["host"].get(rec["host"]) or existing_hosts.get(rec["host"])
            if host is not None and rec["numa_node"] >= host["numa_nodes"]:
                errors.append(FleetError(_fline(lines, kind, key, "numa_node"), f"{kind} {key[0]}/{key[1]}: NUMA node "
                                                           f"{rec['numa_node']} but host has {host['numa_nodes']}"))


# --- database side -----------------------------------------------------------------------------------------
def _field_paths(kind: Kind) -> dict[str, list[str]]:
    out = {}
    for name, f in kind.fields.items():
        out[name] = key_paths(KIND[f.ref], f"{f.attr}__") if f.type == "ref" else [f.attr]
    return out


def existing_rows(kind: Kind) -> dict[Key, Values]:
    """Current rows of `kind` in the same shape as normalised records: `{natural key: {field: value}}`."""
    fpaths = _field_paths(kind)
    flat = [p for paths in fpaths.values() for p in paths]
    rows: dict[Key, Values] = {}
    for row in kind.model.objects.values(*dict.fromkeys(flat)):
        rec = {}
        for name, paths in fpaths.items():
            if kind.fields[name].type == "ref":
                vals = tuple(row[p] for p in paths)
                rec[name] = None if vals[0] is None else vals
            else:
                rec[name] = row[paths[0]]
        key = tuple(x for n in kind.key for x in (rec[n] if kind.fields[n].type == "ref" else (rec[n],)))
        rows[key] = rec
    return rows


def fleet_plan(text: str) -> FleetPlan:
    """Parse, validate and diff a fleet document (no writes). `plan.errors` name the line of each problem."""
    try:
        doc, errors = expand(parse_yaml(text))
    except FleetSyntaxError as exc:
        return FleetPlan(errors=[exc.error])
    except ValueError as exc:
        return FleetPlan(errors=[FleetError(0, str(exc))])
    desired, lines, norm_errors = normalise(doc)
    errors += norm_errors
    existing = {k.name: existing_rows(k) for k in KINDS}
    _refs_exist(desired, lines, {k: set(v) for k, v in existing.items()}, errors)
    db_owner = {(k.name, f): {rec[f]: key for key, rec in existing[k.name].items()} for k in KINDS for f in k.unique}
    _uniques(desired, lines, db_owner, errors)
    port_counts = {k: r["port_count"] for k, r in {**existing["switch"], **desired["switch"]}.items()}
    _switch_ports(desired, lines, port_counts, errors)
    _devices(desired, lines, existing["host"], errors)
    if errors:
        return FleetPlan(errors=sorted(set(errors)))
    plan = FleetPlan(desired=desired, counts={k: len(v) for k, v in desired.items()})
    for kind in KINDS:
        have = existing[kind.name]
        for key, rec in desired[kind.name].items():
            if key not in have:
                plan.changes.append(Change(kind.name, key, "create", rec))
                continue
            diff = {n: v for n, v in rec.items() if n not in kind.create_only and have[key].get(n) != v}
            if diff:
                plan.changes.append(Change(kind.name, key, "update", diff, {n: have[key][n] for n in diff}))
        plan.extra[kind.name] = sorted(set(have) - set(desired[kind.name]), key=str)
    return plan


def _id_map(kind: Kind) -> dict[Key, object]:
    paths = key_paths(kind)
    return {tuple(row[1:]): row[0] for row in kind.model.objects.values_list("id", *paths)}


def _kwargs(kind: Kind, rec: Values, ids: dict[str, dict]) -> dict:
    out = {}
    for name, value in rec.items():
        f = kind.fields[name]
        if f.type == "ref":
            out[f"{f.attr}_id"] = None if value is None else ids[f.ref][value]
        else:
            out[f.attr] = value
    return out


def fleet_apply(plan: FleetPlan) -> dict:
    """Write `plan` in one transaction (bulk create/update, kinds in dependency order). Returns the summary."""
    if not plan.ok:
        raise ValueError("cannot apply a plan with errors")
    by_kind: dict[str, list[Change]] = defaultdict(list)
    for c in plan.changes:
        by_kind[c.kind].append(c)
    ids: dict[str, dict] = {}
    with transaction.atomic():
        for kind in KINDS:
            changes = by_kind.get(kind.name, [])
            creates = [kind.model(**_kwargs(kind, c.values, ids)) for c in changes if c.op == "create"]
            kind.model.objects.bulk_create(creates, batch_size=500)
            updates = [c for c in changes if c.op == "update"]
            if updates:
                current = _id_map(kind)
                by_fields: dict[tuple, list] = defaultdict(list)
                for c in updates:
                    obj = kind.model(id=current[c.key], updated_at=now(), **_kwargs(kind, c.values, ids))
                    attrs = tuple(sorted(kind.fields[n].attr for n in c.values)) + ("updated_at",)
                    by_fields[attrs].append(obj)
                for attrs, objs in by_fields.items():
                    kind.model.objects.bulk_update(objs, list(attrs), batch_size=500)
            if any(KIND[k].fields.get(f) and KIND[k].fields[f].ref == kind.name
                   for k in KIND for f in KIND[k].fields):
                ids[kind.name] = _id_map(kind)
        if plan.changes:
            topology_changed()  # placement's cached topology is stale once this commits
    return plan.summary()
