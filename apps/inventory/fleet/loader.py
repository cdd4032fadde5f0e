"""Parse a fleet YAML document (docs/fleet-format.md) into flat, explicit records that remember their line.

Two layers: `parse_yaml()` builds dicts/lists that carry the 1-based line of their YAML node (`line_of(x)`);
`expand()` turns `host_sets` / `link_sets` (templates with ranges) into explicit host and link records, so the
rest of the import sees one shape. Errors are collected as `FleetError(line, message)`, never raised one by one.
"""
from __future__ import annotations

import ast
import itertools
import operator
import string
from dataclasses import dataclass

import yaml


@dataclass(frozen=True, order=True)
class FleetError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


class LineDict(dict):
    """A mapping that remembers its YAML line and the line of each key's value (`key_lines`)."""

    line = 0
    key_lines: dict = {}


class LineList(list):
    line = 0


class _Loader(yaml.SafeLoader):
    pass


def _mapping(loader, node):
    loader.flatten_mapping(node)
    value = LineDict((loader.construct_object(k, deep=True), loader.construct_object(v, deep=True))
                     for k, v in node.value)
    value.line = node.start_mark.line + 1
    value.key_lines = {loader.construct_object(k, deep=True): v.start_mark.line + 1 for k, v in node.value
                       if isinstance(k, yaml.ScalarNode)}
    return value


def _sequence(loader, node):
    value = LineList(loader.construct_object(v, deep=True) for v in node.value)
    value.line = node.start_mark.line + 1
    return value


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def parse_yaml(text: str):
    """YAML text -> LineDict/LineList tree. Raises FleetError-carrying ValueError on a syntax error, and on a
    character YAML does not allow in a document (a control character such as BEL), with its line."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise FleetSyntaxError(FleetError(mark.line + 1 if mark else 0, f"YAML syntax: {exc.problem}")) from exc
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise FleetSyntaxError(FleetError(line, f"YAML syntax: character #x{exc.character:04x} is not allowed"
                                                f" in a YAML document")) from exc


class FleetSyntaxError(ValueError):
    def __init__(self, error: FleetError):
        super().__init__(str(error))
        self.error = error


def line_of(value, default: int = 0) -> int:
    return getattr(value, "line", default) or default


# --- safe arithmetic for `let:` and templated integers ------------------------------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod}


def _eval(node, env: dict) -> int:
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in env:
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    raise ValueError("only integers, loop variables and + - * // % are allowed")


def arith(expr, env: dict) -> int:
    """Evaluate an integer expression such as `(n - 1) // 4 + 1` over loop variables."""
    if isinstance(expr, int):
        return expr
    return _eval(ast.parse(str(expr), mode="eval"), env)


class _Formatter(string.Formatter):
    """`str.format` whose fields may be integer expressions over the loop variables: `{port0 + i}`."""

    def get_field(self, field_name, args, kwargs):
        if field_name in kwargs:
            return kwargs[field_name], field_name
        try:
            return arith(field_name, kwargs), field_name
        except (ValueError, SyntaxError) as exc:
            raise KeyError(field_name) from exc


_FMT = _Formatter()


def render(value, env: dict):
    """Render templates recursively: strings are `str.format` templates over `env`; lists indexed by `i` stay."""
    if isinstance(value, str):
        if "{" not in value:
            return value
        return _FMT.vformat(value, (), env)
    if isinstance(value, dict):
        out = LineDict({k: render(v, env) for k, v in value.items()})
        out.line = line_of(value)
        out.key_lines = getattr(value, "key_lines", {})
        return out
    if isinstance(value, list):
        out = LineList(render(v, env) for v in value)
        out.line = line_of(value)
        return out
    return value


def _range(spec, env: dict) -> list[int]:
    if isinstance(spec, list):
        return [arith(x, env) for x in spec]
    if isinstance(spec, int):
        return [spec]
    text = str(spec)
    if ".." in text:
        lo, hi = text.split("..", 1)
        return list(range(arith(lo, env), arith(hi, env) + 1))
    return [arith(text, env)]


def loop_envs(block: dict) -> list[dict]:
    """Cartesian product of `for: {var: range}` (ranges `1..32` or lists), then `let: {var: expr}` per env."""
    loops = block.get("for") or {}
    names = list(loops)
    envs = []
    for combo in itertools.product(*[_range(loops[n], {}) for n in names]):
        env = dict(zip(names, combo, strict=True))
        for var, expr in (block.get("let") or {}).items():
            env[var] = arith(expr, env)
        envs.append(env)
    return envs


DEVICE_KEYS = ("gpus", "hca_ports", "nics")
#: collection -> its templated variant (`for` / `let` / str.format values)
SETS = {"scalable_units": "scalable_unit_sets", "racks": "rack_sets", "switches": "switch_sets",
        "links": "link_sets"}


def _devices(spec, env: dict, line: int) -> list:
    """Device list: explicit list, or `{count: N, ...}` where list values are indexed by the device index `i`."""
    if spec is None:
        return []
    if isinstance(spec, list):
        return [render(d, env) for d in spec]
    count = arith(spec.get("count", 0), env)
    out = []
    for i in range(count):
        denv = {**env, "i": i, "i1": i + 1}
        item = LineDict()
        for key, value in spec.items():
            if key == "count":
                continue
            if isinstance(value, list):
                value = value[i % len(value)]
            item[key] = render(value, denv)
        item.line = line_of(spec, line)
        item.key_lines = getattr(spec, "key_lines", {})
        out.append(item)
    return out


def expand(doc: dict) -> tuple[dict, list[FleetError]]:
    """Return `doc` with `host_sets` folded into `hosts` and `link_sets` into `links` (explicit records).
    Raises ValueError when the document is not a mapping (e.g. a bare list or scalar)."""
    if not isinstance(doc, dict):
        raise ValueError("line 1: the fleet document must be a mapping (zones:, hosts:, ...).")
    errors: list[FleetError] = []
    templates = doc.get("host_templates") or {}
    hosts = LineList(doc.get("hosts") or [])
    hosts.line = line_of(doc.get("hosts"))
    for host in list(hosts):
        for key in DEVICE_KEYS:
            if isinstance(host.get(key), dict):
                host[key] = _devices(host[key], {"host": host.get("name", "")}, line_of(host))
    for hset in doc.get("host_sets") or []:
        line = line_of(hset)
        template = templates.get(hset.get("template")) if hset.get("template") else {}
        if template is None:
            errors.append(FleetError(line, f"unknown host template {hset.get('template')!r}"))
            continue
        try:
            envs = loop_envs(hset)
        except (ValueError, SyntaxError, KeyError) as exc:
            errors.append(FleetError(line, f"bad for/let: {exc}"))
            continue
        for env in envs:
            merged = {**template, **{k: v for k, v in hset.items() if k not in ("for", "let", "template")}}
            try:
                host = LineDict({k: render(v, env) for k, v in merged.items() if k not in DEVICE_KEYS})
                host.line = line
                env = {**env, "host": host.get("name", "")}
                for key in DEVICE_KEYS:
                    host[key] = _devices(merged.get(key), env, line)
            except (KeyError, IndexError, ValueError) as exc:
                errors.append(FleetError(line, f"template value refers to unknown variable {exc}"))
                break
            hosts.append(host)
    out = LineDict(doc)
    for coll, set_key in SETS.items():
        items = LineList(doc.get(coll) or [])
        items.line = line_of(doc.get(coll))
        for tset in doc.get(set_key) or []:
            line = line_of(tset)
            try:
                for env in loop_envs(tset):
                    item = LineDict({k: render(v, env) for k, v in tset.items() if k not in ("for", "let")})
                    item.line = line
                    items.append(item)
            except (KeyError, IndexError, ValueError, SyntaxError) as exc:
                errors.append(FleetError(line, f"bad {set_key} entry: {exc}"))
        out[coll] = items
        out.pop(set_key, None)
    out.line = line_of(doc)
    out["hosts"] = hosts
    out.pop("host_sets", None)
    out.pop("host_templates", None)
    return out, errors
