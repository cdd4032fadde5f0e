"""Export the inventory as an explicit fleet document (no templates) that re-imports with no change."""
from __future__ import annotations

import yaml

from .schema import COLLECTIONS, KIND, NESTED
from .sync import existing_rows


def _plain(kind_name: str, rec: dict) -> dict:
    kind = KIND[kind_name]
    out = {}
    for name, f in kind.fields.items():
        if name == kind.parent or name in kind.create_only:
            continue
        value = rec[name]
        if f.type == "ref":
            if value is None:
                continue
            value = value[-1] if f.scope or len(value) == 1 else list(value)
        elif value in (None, "") and not f.required:
            continue
        out[f.yaml or name] = value
    return out


def fleet_export_document() -> dict:
    """The whole inventory as a fleet document (`dict`), sorted by natural key."""
    rows = {name: existing_rows(KIND[name]) for name in KIND}
    children: dict[str, dict[tuple, dict[str, list]]] = {}
    for parent, nested in NESTED.items():
        children[parent] = {}
        for coll, child in nested.items():
            for _key, rec in sorted(rows[child].items(), key=lambda kv: str(kv[0])):
                slot = children[parent].setdefault(rec[KIND[child].parent], {})
                slot.setdefault(coll, []).append(_plain(child, rec))
    doc: dict = {"version": 1}
    for coll, kind_name in COLLECTIONS.items():
        items = []
        for key, rec in sorted(rows[kind_name].items(), key=lambda kv: str(kv[0])):
            item = _plain(kind_name, rec)
            if kind_name == "link":
                item = {"a": f"{rec['a_switch'][0]}:{rec['a_port']}", "b": f"{rec['b_switch'][0]}:{rec['b_port']}"}
            item.update(children.get(kind_name, {}).get(key, {}))
            items.append(item)
        doc[coll] = items
    return doc


def fleet_export_yaml() -> str:
    return yaml.safe_dump(fleet_export_document(), sort_keys=False, default_flow_style=None, width=120)
