"""One engine for every gpucloud resource: a resource is a declaration (`Field`s, a collection path, how it is
waited for); create/read/update/delete/import and plan are written once, here.

Rules every resource follows (docs/adr/0900-terraform-provider.md):

- Create: `POST /api/v1/<collection>/` with `Idempotency-Key: tf-<sha256>` over the resource type, the request
  body and a creation nonce; the nonce is kept in private state. The same configuration applied again after a
  killed run sends the same key, so the API answers the first create (`Idempotent-Replayed: true`) and the
  provider adopts that object instead of making a second one. When a replayed answer names an object that is
  already gone (destroyed since), the nonce is bumped and the create sent again with the new key.
- Long actions wait on the API's Operation (`GET /api/v1/operations/{id}`) or the object's status, with
  backoff (0.5 s doubling to 5 s), within the resource's timeout; a failed operation is an error carrying its
  `error_code` and `error_detail`, and the created object stays in state tainted (the next apply replaces it).
- Ctrl-C: Terraform's StopProvider ends every wait at once; the create answers the object it made (with an
  error, so Terraform keeps it tainted) instead of the plugin dying with the object unrecorded.
- Read: 404, or a terminal status (`deleted`, `cancelled` ...) → gone (Terraform plans a create). The ETag of
  the answer is kept in private state.
- Update: `PATCH` with `If-Match: <ETag from the last refresh>` for fields the API can change; every other
  argument forces replacement.
- Import by id: the same read, all arguments filled from the API (create-only ones included), so the next plan
  is empty.
"""
from __future__ import annotations

import hashlib
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tf import schema, types
from tf.types import Unknown

from .client import ApiResponse, Unreachable, problem_summary
from .framework import STOP, Ctx, SingleBlock

GONE_STATUSES = {"deleted", "cancelled", "ended", "rejected"}
# Check codes not reported at plan time: the name may be held by the object an interrupted apply of this same
# configuration created, which the create adopts (its Idempotency-Key replays); if not, the create fails at once.
ADOPTABLE = {"name_taken", "slug_taken", "conflict"}
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


def log(msg: str) -> None:
    """Provider log line on stderr (never stdout: Terraform reads the handshake there). Visible with TF_LOG."""
    print(f"[gpucloud] {msg}", file=sys.stderr, flush=True)


def parse_duration(value: str | None, default: float) -> float:
    """`"30m"`, `"1h30m"`, `"90s"` → seconds; None → default. ValueError on anything else."""
    if not value:
        return default
    m = _DURATION.match(value.strip())
    if not m or not any(m.groups()):
        raise ValueError(f"invalid duration {value!r}: use e.g. 90s, 30m, 1h30m")
    h, mi, s = (int(x or 0) for x in m.groups())
    return h * 3600 + mi * 60 + s


@dataclass
class Field:
    """One attribute. `kind`: required | optional | computed | optional_computed.
    `create`: sent in the create body; `update`: PATCHable (else a change forces replacement for arguments);
    `api`: the API's member name (default: same); `read`: fn(obj) → value (default obj[api]); `write`:
    fn(value) → API value; `type`: str | int | bool | list | set | map."""

    name: str
    kind: str = "optional"
    type: str = "str"
    create: bool = True
    update: bool = False
    api: str | None = None
    read: Callable[[dict], Any] | None = None
    write: Callable[[Any], Any] | None = None
    sensitive: bool = False
    description: str = ""
    keep_prior: bool = False   # the API never answers it (write-only): keep what state had
    volatile: bool = False     # computed, may change on update (unknown in an update plan)

    @property
    def api_name(self) -> str:
        return self.api or self.name

    @property
    def argument(self) -> bool:
        return self.kind != "computed"

    def tf_type(self):
        return {"str": types.String(), "int": types.Number(), "bool": types.Bool(),
                "list": types.List(types.String()), "set": types.Set(types.String()),
                "map": types.Map(types.String())}[self.type]

    def attribute(self) -> schema.Attribute:
        return schema.Attribute(
            self.name, self.tf_type(), description=self.description or None,
            required=self.kind == "required", optional=self.kind in ("optional", "optional_computed"),
            computed=self.kind in ("computed", "optional_computed"), sensitive=self.sensitive,
            requires_replace=self.argument and not self.update)

    def from_api(self, obj: dict):
        value = self.read(obj) if self.read else obj.get(self.api_name)
        if self.type == "int" and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        if self.type in ("list", "set") and value is None:
            value = []
        if self.type in ("list", "set"):
            value = [str(v) for v in value]
        if self.type == "set":
            value = sorted(value)
        return value


ID = Field("id", "computed", description="The object's id (UUID).")


def timeouts_block(fields: tuple[str, ...]) -> SingleBlock:
    return SingleBlock("timeouts", schema.Block(attributes=[
        schema.Attribute(f, types.String(), optional=True,
                         description=f"How long {f} may take (e.g. `30m`, `1h`); the resource's default when unset.")
        for f in fields]))


class ApiResource:
    """Base of every resource. Subclasses set `name`, `collection`, `fields`, `defaults` (timeouts, seconds),
    and override the hooks (`created`, `wait_create`, `wait_delete`, `gone`, `check_path`) they need."""

    name: str = ""
    collection: str = ""
    fields: list[Field] = []
    description: str = ""
    defaults = {"create": 300.0, "update": 300.0, "delete": 300.0}
    project_field: str | None = None   # filled from the provider's `project` when unset
    # name -> same(a, b): values the API normalizes (stores in another spelling); equal ones are no change, and
    # the configured or prior spelling is kept in state (see `equivalent_values`, `to_state`).
    equivalent: dict = {}
    check_path: str | None = None      # plan-time placement check (POST <collection>/check/)

    def __init__(self, provider):
        self.provider = provider

    # --- schema -------------------------------------------------------------------------------------------
    @classmethod
    def get_name(cls) -> str:
        return cls.name

    @classmethod
    def timeout_ops(cls) -> tuple[str, ...]:
        """The operations a `timeouts` block can set: those with a default, `update` only where an argument is
        updated in place (where every change replaces the object, an update timeout would never apply)."""
        return tuple(k for k in ("create", "update", "delete") if k in cls.defaults
                     and (k != "update" or any(f.update and f.argument for f in cls.fields)))

    @classmethod
    def get_schema(cls) -> schema.Schema:
        ops = cls.timeout_ops()
        return schema.Schema(version=0, description=cls.description or None,
                             attributes=[ID.attribute()] + [f.attribute() for f in cls.fields],
                             block_types=[timeouts_block(ops)])

    @classmethod
    def _fields(cls) -> dict[str, Field]:
        return {f.name: f for f in cls.fields}

    # --- validation and plan ------------------------------------------------------------------------------
    def validate(self, diags, type_name, config):
        t = config.get("timeouts")
        if isinstance(t, dict):
            for k, v in t.items():
                if v not in (None, Unknown):
                    try:
                        parse_duration(v, 0)
                    except ValueError as exc:
                        diags.add_error(f"Invalid timeouts.{k}", str(exc), path=["timeouts", k])
        self.validate_config(diags, config)

    def validate_config(self, diags, config) -> None:
        """Static checks on known values (a hook)."""

    def plan_create(self, ctx: Ctx, planned: dict) -> dict:
        """Fill the provider's project, then (not before a destroy: `ctx.checks`) the resource's own plan checks
        (`check_plan`) and, when they pass and every argument the create sends is known, the API's dry run
        (`check_path`). An argument still unknown (a reference to an object this apply creates) skips the dry run:
        a body without it would be judged as if the user had left it out (ADR 0900)."""
        if self.project_field and (ctx.config or {}).get(self.project_field) is None and self.provider.project:
            planned[self.project_field] = self.provider.project
        if not ctx.checks:
            return planned
        before = len(ctx.diagnostics.diagnostics)
        self.check_plan(ctx, None, planned)
        if len(ctx.diagnostics.diagnostics) > before:
            return planned
        if self.check_path and self.provider.configured and self.create_known(ctx, planned):
            self.placement_check(ctx, planned)
        return planned

    def create_known(self, ctx: Ctx, planned: dict) -> bool:
        """Whether every argument the create would send is known: its configured value (`ctx.config`; an unset
        optional-computed argument is planned unknown but sent as absent) and its planned one."""
        config = ctx.config or {}
        for f in self.fields:
            if not (f.create and f.argument) or config.get(f.name) is None:
                continue   # absent from the body, or the provider's own value (its project)
            if not (_all_known(config[f.name]) and _all_known(planned.get(f.name))):
                return False
        return True

    def check_plan(self, ctx: Ctx, prior: dict | None, planned: dict) -> None:
        """Checks of known planned values that need the time or the prior state, for a create (`prior` None) and
        an update alike, as errors on the attribute (`attribute_error`). A hook; static ones are `validate_config`."""

    def attribute_error(self, ctx: Ctx, name: str, message: str, detail: str = "") -> None:
        """An error on argument `name`, worded as the API's own field errors are (`<type> is invalid: <attr>: ...`)."""
        ctx.diagnostics.add_error(f"{self.type_name} is invalid: {name}: {message}", detail, path=[name])

    def replaces(self, name: str, old, new) -> bool:
        """Whether changing argument `name` from `old` to `new` forces replacement although the argument is
        updated in place (a hook: a volume's size grows in place, a shrink replaces it)."""
        return False

    def plan_update(self, ctx: Ctx, prior: dict, proposed: dict, changed: set, replacing: bool) -> dict:
        if self.project_field and proposed.get(self.project_field) is None:
            proposed[self.project_field] = prior.get(self.project_field)
        if changed and ctx.checks:
            self.check_plan(ctx, None if replacing else prior, proposed)
        if changed and not replacing:
            for f in self.fields:
                if f.volatile:
                    proposed[f.name] = Unknown
        return proposed

    def placement_check(self, ctx: Ctx, planned: dict) -> None:
        """`POST <collection>/check/` with the create body: an answer `placeable: false` (or a 400 on a field)
        is an error at plan time, on the attribute the API names. An API without the endpoint (404/405) is
        skipped: the create then fails at once with the same explanation."""
        try:
            r = self.client.request("POST", self.check_path, self.create_body(planned))
        except Unreachable:
            return   # plan goes on; apply reports the endpoint
        if r.status in (404, 405):
            return
        body = r.body if isinstance(r.body, dict) else {}
        if r.status == 400:
            self._field_errors(ctx, r, f"{self.type_name} is invalid")
            return
        if not r.ok:
            self.fail(ctx, r, f"Checking {self.type_name}")
            return
        if body.get("placeable") is not False:
            return
        from .client import explain
        parts = [f"reason: {body['reason']}"] if body.get("reason") else []
        if body.get("explanation"):
            parts.append("explanation: " + explain(body["explanation"]))
        code = body.get("code")
        if body.get("earliest_start") or code in ("unplaceable", "capacity_unavailable"):
            parts.append(f"earliest_start: {body.get('earliest_start') or 'none known'}")
        if code in ADOPTABLE:
            return   # maybe what an interrupted apply created: the create's Idempotency-Key replay adopts it
        if code:
            ctx.diagnostics.add_error(f"{self.type_name} cannot be created: {code}: {body.get('detail') or ''}",
                                      "\n".join(parts))
        else:   # it would wait (the on-demand queue): not an error
            ctx.diagnostics.add_warning(f"{self.type_name} would wait for capacity: {body.get('detail') or ''}",
                                        "\n".join(parts))

    # --- helpers --------------------------------------------------------------------------------------------
    @property
    def client(self):
        return self.provider.client

    @property
    def type_name(self) -> str:
        return "gpucloud_" + self.name

    def path(self, oid: str) -> str:
        return f"{self.collection}/{oid}"

    def create_body(self, planned: dict) -> dict:
        body = {}
        for f in self.fields:
            if not f.create or not f.argument:
                continue
            value = planned.get(f.name)
            if value is None or value is Unknown:
                continue
            body[f.api_name] = f.write(value) if f.write else value
        return body

    def equivalent_values(self, name: str, a, b) -> bool:
        """Whether two known values of attribute `name` are the same object to the API (it normalizes them)."""
        same = self.equivalent.get(name)
        if same is None or a in (None, Unknown) or b in (None, Unknown):
            return False
        try:
            return bool(same(a, b))
        except (TypeError, ValueError):
            return False

    def unchanged(self, name: str, prior: dict, value) -> bool:
        """Whether the configured `value` of argument `name` is what the object in state (`prior`) already has
        although the two differ: an equivalent spelling (`equivalent`), or a hook's comparison (a create-only
        value the API answers only as a digest). The prior value is then kept in state."""
        return self.equivalent_values(name, prior.get(name), value)

    def to_state(self, obj: dict, prior: dict | None) -> dict:
        state = self._to_state(obj, prior)
        for name in self.equivalent:
            old = (prior or {}).get(name)
            if self.equivalent_values(name, old, state.get(name)):
                state[name] = old
        return state

    def _to_state(self, obj: dict, prior: dict | None) -> dict:
        state = {"id": str(obj["id"])}
        for f in self.fields:
            if f.keep_prior:
                state[f.name] = (prior or {}).get(f.name)
                if state[f.name] is Unknown:
                    state[f.name] = None
            else:
                state[f.name] = f.from_api(obj)
        state["timeouts"] = (prior or {}).get("timeouts")
        if state["timeouts"] is Unknown:
            state["timeouts"] = None
        return state

    def timeout(self, state: dict, op: str) -> float:
        t = state.get("timeouts") or {}
        try:
            return parse_duration(t.get(op) if isinstance(t, dict) else None, self.defaults.get(op, 300.0))
        except ValueError:
            return self.defaults.get(op, 300.0)

    def call(self, ctx: Ctx, method: str, path: str, body=None, *, headers=None,
             what: str = "") -> ApiResponse | None:
        try:
            return self.client.request(method, path, body, headers=headers)
        except Unreachable as exc:
            ctx.diagnostics.add_error(f"gpucloud API unreachable at {self.client.endpoint}",
                                      f"{exc}\nCheck the provider's `endpoint` (or GPUCLOUD_ENDPOINT).")
            return None

    def fail(self, ctx: Ctx, r: ApiResponse, what: str) -> None:
        self._field_errors(ctx, r, what)

    def _field_errors(self, ctx: Ctx, r: ApiResponse, what: str) -> None:
        """One diagnostic per attribute the problem's `errors` names (on that attribute), else one for all. The
        API's member names that Terraform spells otherwise (a lease's `count` is `quantity`) are the attribute's
        names throughout the diagnostic."""
        renamed = {f.api_name: f.name for f in self.fields if f.api_name != f.name}

        def words(text: str) -> str:
            for api, attr in renamed.items():
                text = re.sub(rf"\b{re.escape(api)}\b", attr, text)
            return text

        summary, detail = (words(t) for t in problem_summary(r, what))
        body = r.body if isinstance(r.body, dict) else {}
        errors = body.get("errors") if isinstance(body.get("errors"), dict) else {}
        by_api = {f.api_name: f.name for f in self.fields}
        placed = False
        for k, msgs in errors.items():
            attr = by_api.get(k)
            if attr is None:
                continue
            text = words("; ".join(map(str, msgs)) if isinstance(msgs, list) else str(msgs))
            ctx.diagnostics.add_error(f"{what}: {attr}: {text}", detail, path=[attr])
            placed = True
        if not placed:
            ctx.diagnostics.add_error(summary, detail)

    # --- lifecycle -------------------------------------------------------------------------------------------
    def idempotency_key(self, body: dict, nonce: int) -> str:
        canon = json.dumps({"type": self.type_name, "body": body, "nonce": nonce}, sort_keys=True, default=str)
        return "tf-" + hashlib.sha256(canon.encode()).hexdigest()

    secret_field: str | None = None   # a secret the create alone answers (a replay answers it as null)

    def create(self, ctx: Ctx, planned: dict) -> dict | None:
        """See the module docstring. A replayed create of an object with a one-time secret answers the secret
        as null (never stored): that object is deleted and created anew (nonce + 1), so the state always holds
        a usable secret."""
        state = self._create(ctx, planned)
        for _ in range(3):
            if state is None or not self.secret_field or state.get(self.secret_field):
                return state
            log(f"{self.type_name}: replayed create has no secret; deleting {state['id']} and creating anew")
            self.client.request("DELETE", self.path(state["id"]))
            ctx.private["nonce"] = int(ctx.private.get("nonce", 0)) + 1
            state = self._create(ctx, planned)
        return state

    def _create(self, ctx: Ctx, planned: dict) -> dict | None:
        body = self.create_body(planned)
        nonce = int(ctx.private.get("nonce", 0))
        for _ in range(20):
            key = self.idempotency_key(body, nonce)
            r = self.call(ctx, "POST", self.collection, body, headers={"Idempotency-Key": key})
            if r is None:
                return None
            if not r.ok:
                self.fail(ctx, r, f"Creating {self.type_name}")
                return None
            obj, op = self.created(r.body)
            if r.replayed:
                log(f"{self.type_name}: create replayed (Idempotency-Key {key}); adopting {obj.get('id')}")
                current = self.call(ctx, "GET", self.path(obj["id"]))
                if current is None:
                    return None
                if current.status == 404 or (current.ok and self.gone(current.body)):
                    nonce += 1   # what that key created is gone: a new creation
                    continue
            break
        else:
            ctx.diagnostics.add_error(f"Creating {self.type_name}: too many replayed creates")
            return None
        ctx.private.update({"nonce": nonce, "idempotency_key": key})
        state = self.to_state(obj, planned)
        final = self.wait_create(ctx, obj, op, self.timeout(planned, "create"))
        if final is None:   # failed or timed out: keep it in state (tainted), so it is replaced, not leaked
            return state
        ctx.private["etag"] = final[1]
        done = self.to_state(final[0], planned)
        if self.secret_field:   # only the create's answer carries it
            done[self.secret_field] = state.get(self.secret_field)
        return done

    def created(self, body: dict) -> tuple[dict, dict | None]:
        """(object, operation or None) from a create's answer."""
        return body, None

    def wait_create(self, ctx: Ctx, obj: dict, op: dict | None, timeout: float):
        """Wait until the object is ready; (object, etag) or None after an error diagnostic."""
        return self.get(ctx, obj["id"])

    def get(self, ctx: Ctx, oid: str):
        r = self.call(ctx, "GET", self.path(oid))
        if r is None:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Reading {self.type_name} {oid}")
            return None
        return r.body, r.etag

    def gone(self, obj: dict) -> bool:
        return obj.get("status") in GONE_STATUSES

    def read(self, ctx: Ctx, current: dict) -> dict | None:
        r = self.call(ctx, "GET", self.path(current["id"]))
        if r is None:
            return None
        if r.status == 404:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Reading {self.type_name} {current['id']}")
            return None
        if self.gone(r.body):
            return None
        ctx.private["etag"] = r.etag
        return self.to_state(r.body, current)

    def update(self, ctx: Ctx, prior: dict, planned: dict) -> dict | None:
        patch = {}
        for f in self.fields:
            if f.update and f.argument and planned.get(f.name) != prior.get(f.name):
                value = planned.get(f.name)
                patch[f.api_name] = f.write(value) if (f.write and value is not None) else value
        if not patch:
            state = dict(planned)
            for f in self.fields:
                if state.get(f.name) is Unknown:
                    state[f.name] = prior.get(f.name)
            return state
        etag = ctx.private.get("etag")
        if not etag:
            got = self.get(ctx, prior["id"])
            if got is None:
                return prior
            etag = got[1]
        r = self.call(ctx, "PATCH", self.path(prior["id"]), patch, headers={"If-Match": etag} if etag else None)
        if r is None:
            return prior
        if r.status == 412:
            ctx.diagnostics.add_error(
                f"Updating {self.type_name} {prior['id']}: it changed since it was last read (HTTP 412)",
                "Someone else changed the object after this plan's refresh; run `terraform plan` again.")
            return prior
        if not r.ok:
            self.fail(ctx, r, f"Updating {self.type_name} {prior['id']}")
            return prior
        final = self.wait_update(ctx, r, prior, self.timeout(planned, "update"))
        if final is None:
            return prior
        ctx.private["etag"] = final[1]
        state = self.to_state(final[0], planned)
        return state

    def wait_update(self, ctx: Ctx, r: ApiResponse, prior: dict, timeout: float):
        return (r.body, r.etag) if isinstance(r.body, dict) and "id" in r.body else self.get(ctx, prior["id"])

    def delete(self, ctx: Ctx, current: dict):
        r = self.call(ctx, "DELETE", self.path(current["id"]))
        if r is None:
            return current
        if r.status == 404:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Deleting {self.type_name} {current['id']}")
            return current
        if not self.wait_delete(ctx, current, r, self.timeout(current, "delete")):
            return current
        return None

    def wait_delete(self, ctx: Ctx, current: dict, r: ApiResponse, timeout: float) -> bool:
        return True

    def import_(self, ctx: Ctx, oid: str) -> dict | None:
        r = self.call(ctx, "GET", self.path(oid))
        if r is None:
            return None
        if r.status == 404:
            ctx.diagnostics.add_error(f"Cannot import {self.type_name} {oid}: not found (HTTP 404)",
                                      "No object with this id is visible to the provider's token.")
            return None
        if not r.ok:
            self.fail(ctx, r, f"Importing {self.type_name} {oid}")
            return None
        ctx.private["etag"] = r.etag
        return self.import_state(ctx, r.body)

    def import_state(self, ctx: Ctx, obj: dict) -> dict:
        return self.to_state(obj, None)

    # --- waiting ---------------------------------------------------------------------------------------------
    def wait_operation(self, ctx: Ctx, op_id: str, timeout: float, what: str) -> dict | None:
        """Poll `GET /api/v1/operations/{id}` until succeeded (the operation), failed/cancelled (error with
        `error_code` and `error_detail`), or `timeout` seconds (error)."""
        def check():
            r = self.call(ctx, "GET", f"operations/{op_id}")
            if r is None:
                return False
            if not r.ok:
                self.fail(ctx, r, f"{what}: reading operation {op_id}")
                return False
            body = r.body
            if body["status"] == "succeeded":
                return body
            if body["status"] in ("failed", "cancelled"):
                extra = body.get("error_extra") or {}
                detail = [body.get("error_detail") or ""]
                if extra.get("explanation"):
                    from .client import explain
                    detail.append("explanation: " + explain(extra["explanation"]))
                if "earliest_start" in extra:
                    detail.append(f"earliest_start: {extra.get('earliest_start') or 'none known'}")
                ctx.diagnostics.add_error(
                    f"{what}: operation {op_id} {body['status']}: {body.get('error_code') or 'error'}",
                    "\n".join(d for d in detail if d))
                return False
            return None
        return self.poll(ctx, check, timeout, f"{what}: operation {op_id}")

    def wait_status(self, ctx: Ctx, oid: str, ready: set, timeout: float, what: str,
                    failed: tuple = ("error",)) -> tuple | None:
        def check():
            r = self.call(ctx, "GET", self.path(oid))
            if r is None:
                return False
            if r.status == 404:
                return (None, None) if "__404__" in ready else self._missing(ctx, oid, what)
            if not r.ok:
                self.fail(ctx, r, what)
                return False
            st = r.body.get("status")
            if st in ready:
                return r.body, r.etag
            if st in failed:
                ctx.diagnostics.add_error(
                    f"{what}: {self.type_name} {oid} went to {st}: {r.body.get('error_code') or 'error'}",
                    r.body.get("error_reason") or r.body.get("reason") or "")
                return False
            return None
        return self.poll(ctx, check, timeout, what)

    def _missing(self, ctx, oid, what):
        ctx.diagnostics.add_error(f"{what}: {self.type_name} {oid} disappeared (HTTP 404)")
        return False

    def poll(self, ctx: Ctx, check, timeout: float, what: str):
        """`check()` → truthy: done (returned); False: failed (diagnostic added); None: not yet. Backoff 0.5 s
        doubling to 5 s; a timeout is an error naming the limit."""
        deadline = time.monotonic() + timeout
        delay = 0.5
        while True:
            result = check()
            if result is False:
                return None
            if result:
                return result
            if STOP.is_set():
                ctx.diagnostics.add_error(f"{what}: interrupted (Terraform asked the provider to stop)",
                                          "The object was created and is kept in state (tainted): the next apply "
                                          "replaces it, `terraform destroy` deletes it.")
                return None
            if time.monotonic() + delay > deadline:
                ctx.diagnostics.add_error(f"{what}: not done after {timeout:.0f} s (the timeout)",
                                          "Raise it with a `timeouts { ... }` block, or look at the object "
                                          "in the API.")
                return None
            STOP.wait(delay)
            delay = min(delay * 2, 5.0)


def _all_known(value) -> bool:
    if value is Unknown:
        return False
    if isinstance(value, dict):
        return all(_all_known(v) for v in value.values())
    if isinstance(value, list):
        return all(_all_known(v) for v in value)
    return True
