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


def _words(state) -> str:
    return str(state).replace("_", " ")


def refusal_text(name: str, action: str, current, sources: Iterable[str], target: str) -> str:
    """The 409's detail in words: ``"The host is already available."`` when the action's target is where the
    object is, else ``"A host that is draining cannot mark available: only one that is available or faulty can."``
    (`action` and states with underscores as spaces; `current_state`/`allowed_states` keep the raw values)."""
    if current == target:
        return f"The {name} is already {_words(target)}."
    article = "An" if name[:1].lower() in "aeiou" else "A"
    allowed = " or ".join(_words(x) for x in sorted(sources))
    return f"{article} {name} that is {_words(current)} cannot {_words(action)}: only one that is {allowed} can."


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
        raise InvalidState(refusal_text(model._meta.verbose_name, action, current, sources, target),
                           current_state=current, allowed_states=sorted(sources), action=action)
    for key, value in values.items():
        setattr(obj, key, value)
    return current
