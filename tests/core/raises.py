"""What an API operation can answer, read from the code: the HTTP statuses of the `DomainError`s its view method
can construct, following calls into `apps.*` functions (a static over-approximation: every branch counts).

`statuses(view_class, action)` -> {status: {code, ...}}. Calls are followed through names the function's module
binds (functions, `module.function`, `self.method`), and through functions passed as arguments. Used by tests/core/test_schema_statuses.py to hold the
committed schema to the code: an operation that can answer 409 or 410 declares it.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import textwrap
import types

from apps.core.errors import DomainError

MAX_DEPTH = 8


def _resolve(node: ast.AST, scope: dict, owner: type | None):
    """The object an expression names (a Name or an attribute chain), or None."""
    if isinstance(node, ast.Name):
        if node.id in scope:
            return scope[node.id]
        return getattr(builtins, node.id, None)
    if isinstance(node, ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and owner is not None:
            return inspect.getattr_static(owner, node.attr, None) and getattr(owner, node.attr, None)
        base = _resolve(node.value, scope, owner)
        if base is None or not isinstance(base, types.ModuleType | type):
            return None
        return getattr(base, node.attr, None)
    return None


def _ours(fn) -> bool:
    return isinstance(fn, types.FunctionType) and (fn.__module__ or "").startswith("apps.")


def _unwrap(obj):
    """A bound method's function; a decorator's wrapper stays (its own code is read, and it calls the wrapped)."""
    return getattr(obj, "__func__", obj)


def _domain_status(node: ast.Call, cls, scope: dict) -> tuple[int, str | None]:
    status, code = cls.status, cls.code
    for kw in node.keywords:
        if kw.arg == "status" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, int):
            status = kw.value.value
        if kw.arg == "code":
            value = kw.value.value if isinstance(kw.value, ast.Constant) else _resolve(kw.value, scope, None)
            code = getattr(value, "value", value) if isinstance(value, str) else None
    return status, code


@functools.cache
def _function_raises(fn, owner: type | None, depth: int) -> frozenset[tuple[int, str | None]]:
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn.__code__)))  # the code object: never unwrapped
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    scope = {**fn.__globals__, **dict(zip(fn.__code__.co_freevars,
                                          (c.cell_contents for c in fn.__closure__ or ()), strict=False))}
    found: set[tuple[int, str | None]] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        candidates = [node.func] + [a for a in node.args if isinstance(a, ast.Name | ast.Attribute)]
        for expr in candidates:
            target = _unwrap(_resolve(expr, scope, owner))
            if isinstance(target, type) and issubclass(target, DomainError) and expr is node.func:
                found.add(_domain_status(node, target, scope))
            elif _ours(target) and depth < MAX_DEPTH:
                nested_owner = owner if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) \
                    and expr.value.id in ("self", "cls") else None
                found |= _function_raises(target, nested_owner, depth + 1)
    return frozenset(found)


def statuses(view_class: type, action: str) -> dict[int, set[str | None]]:
    """{HTTP status: {error code, ...}} the view's `action` can answer through a DomainError (None: a code the
    source computes, not a constant)."""
    method = _unwrap(getattr(view_class, action, None))
    if not _ours(method):
        return {}
    out: dict[int, set[str]] = {}
    for status, code in _function_raises(method, view_class, 0):
        out.setdefault(status, set()).add(code)
    return out
