"""Compare-and-set state transitions driven by per-model tables.

A table maps an action to (allowed source states, target state)::

    TRANSITIONS = {"stop": ({"active"}, "stopping"), ...}

`transition()` issues one `UPDATE ... WHERE id = %s AND <field> IN (sources)`: of two racing callers exactly
one updates the row; the other gets `InvalidState` (HTTP 409) listing the allowed states.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.db import models

from .clock import now
from .errors import InvalidState

TransitionTable = Mapping[str, tuple[Iterable[str], str]]


def allowed_sources(table: TransitionTable, action: str) -> list[str]:
    sources, _ = table[action]
    return sorted(sources)


def transition(obj: models.Model, action: str, table: TransitionTable, *, field: str = "status",
               extra: Mapping[str, object] | None = None) -> str:
    """Apply `action` to `obj` with a compare-and-set UPDATE; returns the previous state.

    Updates `obj` in memory on success (field, `updated_at` if the model has it, and `extra` fields).
    Raises `InvalidState` (409, code `invalid_state`, members `current_state` and `allowed_states`) when the row
    is not in one of the action's source states, including when a concurrent caller moved it first.
    """
    if action not in table:
        raise KeyError(f"unknown action {action!r} for {type(obj).__name__}")
    sources, target = table[action]
    sources = set(sources)
    values: dict[str, object] = {field: target, **(extra or {})}
    if any(f.name == "updated_at" for f in obj._meta.concrete_fields):
        values["updated_at"] = now()
    model = type(obj)
    # Read the state the row held just before the update within the same statement's snapshot.
    current = model.objects.filter(pk=obj.pk).values_list(field, flat=True).first()
    updated = model.objects.filter(pk=obj.pk, **{f"{field}__in": sources}).update(**values)
    if updated != 1:
        current = model.objects.filter(pk=obj.pk).values_list(field, flat=True).first()
        raise InvalidState(
            f"Cannot {action} while {field} is {current!r}; allowed: {', '.join(sorted(sources))}.",
            current_state=current, allowed_states=sorted(sources), action=action,
        )
    for key, value in values.items():
        setattr(obj, key, value)
    return current
