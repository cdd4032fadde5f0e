"""What the provider adds to `tf` 1.2.0 (the Python plugin framework) to be a well-behaved Terraform provider.

`tf`'s own servicer plans a create without calling the resource, drops private state on every RPC and does not
pass the configuration to plan or apply. `Servicer` (a subclass) keeps `tf`'s wire handling (msgpack, schema,
handshake) and changes only the three lifecycle RPCs:

- PlanResourceChange: a create plan is handed to `resource.plan_create(ctx, config, planned)` (plan-time checks,
  diagnostics on an attribute); an update plan to `resource.plan_update(...)` (requires-replace paths and
  computed values that become unknown); a destroy plan is accepted as proposed. Under `terraform destroy` (or
  `plan`/`apply -destroy`) Terraform first runs a normal plan of the whole configuration to refresh the state
  (its "pre-destroy refresh"), whose errors fail the destroy; the protocol does not say so, so the provider reads
  the command that started it (`destroying()`) and runs no create or update checks then (`ctx.checks`);
- ApplyResourceChange: `ctx.private` (a dict) carries the planned private state in and the new one out;
- ReadResource: private state survives a refresh (the resource may update it, e.g. its ETag).

Also: `Object` (a cty object type, for data sources that return lists of records) and `SingleBlock` (a
`timeouts { ... }` block).
"""
from __future__ import annotations

import json
import os
import shlex
import threading
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from msgpack import ExtType
from tf import provider as tf_provider
from tf import utils as tf_utils
from tf.gen import tfplugin_pb2 as pb
from tf.schema import Block, NestedBlock, NestMode
from tf.types import TfType, Unknown
from tf.utils import Diagnostics, _to_attribute_path, read_dynamic_value

_decode_state = tf_provider._decode_state
_encode_state = tf_provider._encode_state

# Set by the StopProvider RPC (Terraform's answer to Ctrl-C): waits end at once and applies return what they
# created, so Terraform records it in state (tainted) instead of losing it.
STOP = threading.Event()


def _to_pb_unique(self) -> list:
    """Each diagnostic once: a failing field found by two checks (or twice by one) is one message to the user."""
    out, seen = [], set()
    for d in self.diagnostics:
        msg = d.to_pb()
        key = msg.SerializeToString(deterministic=True)
        if key not in seen:
            seen.add(key)
            out.append(msg)
    return out


Diagnostics.to_pb = _to_pb_unique


def _msgpack_ext_hook(code: int, data: bytes):
    """cty's msgpack extensions: code 0 is an unknown value, code 12 an unknown value with refinements (Terraform
    >= 1.6 knows e.g. the prefix of `"big-${...}"`, or that a value is not null). Both are `Unknown` here; `tf`
    1.2.0 knows only the first and hands the second on as raw bytes."""
    if code in (0, 12):
        return Unknown
    return ExtType(code, data)


tf_utils._msgpack_ext_hook = _msgpack_ext_hook


def destroying(cmdline: list[str] | None = None, env: dict | None = None) -> bool:
    """Whether the Terraform command that started this plugin (its parent process) destroys: `terraform destroy`,
    or `terraform plan|apply -destroy` (flags also from TF_CLI_ARGS / TF_CLI_ARGS_<command>). False when that
    cannot be read (not Linux, not Terraform)."""
    if cmdline is None:
        try:
            with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
                cmdline = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            return False
    env = os.environ if env is None else env
    args = cmdline[1:]
    command = next((a for a in args if not a.startswith("-")), "")
    try:
        args = args + shlex.split(env.get("TF_CLI_ARGS", "")) + shlex.split(env.get(f"TF_CLI_ARGS_{command}", ""))
    except ValueError:
        pass
    return command == "destroy" or (command in ("plan", "apply") and
                                    any(a in ("-destroy", "--destroy", "-destroy=true") for a in args))


DESTROYING = destroying()


class Object(TfType):
    """A cty object with fixed attribute types, e.g. `Object({"id": String(), "gpu_count": Number()})`."""

    def __init__(self, attrs: dict[str, TfType]):
        self.attrs = attrs

    def encode(self, value):
        if value in (None, Unknown):
            return value
        return {k: t.encode(value.get(k)) for k, t in self.attrs.items()}

    def decode(self, value):
        if value in (None, Unknown):
            return value
        return {k: t.decode(value.get(k)) for k, t in self.attrs.items()}

    def tf_type(self) -> bytes:
        inner = ",".join(f'{json.dumps(k)}:{t.tf_type().decode()}' for k, t in self.attrs.items())
        return f'["object",{{{inner}}}]'.encode()


class SingleBlock(NestedBlock):
    """A nested block that appears at most once (`timeouts { create = "30m" }`); its value is a dict or None."""

    def __init__(self, type_name: str, block: Block):
        super().__init__(type_name, NestMode.Single, block)

    def encode(self, value: Any) -> Any:
        if value in (None, Unknown):
            return value
        return {a.name: a.type.encode(value.get(a.name)) for a in self.block.attributes}

    def decode(self, value: Any) -> Any:
        if value in (None, Unknown):
            return value
        return {a.name: a.type.decode(value.get(a.name)) for a in self.block.attributes}

    def semantically_equal(self, a, b) -> bool:
        return a == b


@dataclass
class Ctx:
    """What a lifecycle call gets: diagnostics, the resource type, its configuration (None when unknown to the
    call), private state (a dict, read and written)."""

    diagnostics: Diagnostics
    type_name: str
    config: dict | None = None
    private: dict = field(default_factory=dict)
    # False in the plan Terraform runs before a destroy (`destroying()`): no create or update checks then, so a
    # configuration that can no longer be created (an unplaceable instance) never blocks destroying the rest.
    checks: bool = True


def _private_in(raw: bytes) -> dict:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
        return value if isinstance(value, dict) else {}
    except ValueError:
        return {}


def _private_out(value: dict) -> bytes:
    return json.dumps(value, sort_keys=True).encode() if value else b""


class Servicer(tf_provider.ProviderServicer):
    @tf_provider._log_errors
    def PlanResourceChange(self, request, context):
        type_name = request.type_name
        diags = Diagnostics()
        attrs, blocks = self._get_res_attrs(type_name), self._get_res_blocks(type_name)
        _, prior = _decode_state(diags, attrs, blocks, request.prior_state)
        proposed_enc, proposed = _decode_state(diags, attrs, blocks, request.proposed_new_state)
        _, config = _decode_state(diags, attrs, blocks, request.config)
        if diags.has_errors():
            return pb.PlanResourceChange.Response(diagnostics=diags.to_pb())
        if proposed is None:  # destroy
            return pb.PlanResourceChange.Response(planned_state=request.proposed_new_state,
                                                  planned_private=request.prior_private)
        inst = self.app.new_resource(self._get_res_cls(type_name))
        ctx = Ctx(diags, type_name, config, _private_in(request.prior_private), checks=not DESTROYING)
        if prior is None:
            planned = {}
            for k, v in proposed.items():
                if k in blocks or v is not None:
                    planned[k] = v
                else:
                    planned[k] = Unknown if attrs[k].computed else None
            planned = inst.plan_create(ctx, planned)
            return pb.PlanResourceChange.Response(
                planned_state=_encode_state(attrs, blocks, planned, proposed_enc),
                planned_private=_private_out(ctx.private), diagnostics=diags.to_pb())
        changed = {k for k in set(proposed) & set(prior) & set(attrs)
                   if not attrs[k].type.semantically_equal(prior[k], proposed[k])}
        # A value the API normalizes (a public key's trailing newline, a CIDR's spelling) that equals the prior
        # one after normalization is no change: the prior value stays (as an imported object's API spelling).
        # Terraform accepts a planned value that differs from the configuration only from a provider that
        # declares the legacy type system on that answer, as SDKv2's DiffSuppressFunc does.
        kept = {k for k in changed if inst.unchanged(k, prior, proposed[k])}
        for k in kept:
            proposed[k] = prior[k]
        changed -= kept
        replace = sorted(k for k in changed if attrs[k].requires_replace or inst.replaces(k, prior[k], proposed[k]))
        planned = inst.plan_update(ctx, deepcopy(prior), deepcopy(proposed), changed, bool(replace))
        return pb.PlanResourceChange.Response(
            planned_state=_encode_state(attrs, blocks, planned, proposed_enc),
            requires_replace=[_to_attribute_path([k]) for k in replace],
            planned_private=_private_out(ctx.private), diagnostics=diags.to_pb(), legacy_type_system=bool(kept))

    @tf_provider._log_errors
    def ApplyResourceChange(self, request, context):
        type_name = request.type_name
        diags = Diagnostics()
        attrs, blocks = self._get_res_attrs(type_name), self._get_res_blocks(type_name)
        _, prior = _decode_state(diags, attrs, blocks, request.prior_state)
        planned_enc, planned = _decode_state(diags, attrs, blocks, request.planned_state)
        _, config = _decode_state(diags, attrs, blocks, request.config)
        if diags.has_errors():
            return pb.ApplyResourceChange.Response(diagnostics=diags.to_pb())
        inst = self.app.new_resource(self._get_res_cls(type_name))
        ctx = Ctx(diags, type_name, config, _private_in(request.planned_private))
        if prior is None and planned is not None:
            new = inst.create(ctx, planned)
        elif planned is None:
            new = inst.delete(ctx, prior)
        else:
            new = inst.update(ctx, prior, planned)
        return pb.ApplyResourceChange.Response(
            new_state=_encode_state(attrs, blocks, new, old=planned_enc),
            private=_private_out(ctx.private) if new is not None else b"",
            diagnostics=diags.to_pb())

    def StopProvider(self, request, context):
        """Terraform's graceful stop (Ctrl-C): every wait in progress ends, its apply answers what it created."""
        STOP.set()
        return pb.StopProvider.Response()

    @tf_provider._log_errors
    def UpgradeResourceState(self, request, context):
        """State written by an older provider version: attributes it lacked are null (read fills them), ones it
        had that no longer exist are dropped, in a block too (a `timeouts` setting the resource no longer has)."""
        diags = Diagnostics()
        if len(request.raw_state.flatmap) != 0:
            diags.add_error("Cannot upgrade flatmap state", "State from Terraform < 0.12 is not supported.")
            return pb.UpgradeResourceState.Response(diagnostics=diags.to_pb())
        state = json.loads(request.raw_state.json)
        attrs, blocks = self._get_res_attrs(request.type_name), self._get_res_blocks(request.type_name)
        upgraded = {k: state.get(k) for k in (*attrs, *blocks)}
        for k, b in blocks.items():
            if isinstance(upgraded.get(k), dict):
                upgraded[k] = {a.name: upgraded[k].get(a.name) for a in b.block.attributes}
        return pb.UpgradeResourceState.Response(upgraded_state=tf_provider.to_dynamic_value(upgraded),
                                                diagnostics=diags.to_pb())

    @tf_provider._log_errors
    def ReadResource(self, request, context):
        type_name = request.type_name
        diags = Diagnostics()
        attrs, blocks = self._get_res_attrs(type_name), self._get_res_blocks(type_name)
        current_enc, current = _decode_state(diags, attrs, blocks, request.current_state)
        if diags.has_errors() or current is None:
            return pb.ReadResource.Response(diagnostics=diags.to_pb(), new_state=request.current_state,
                                            private=request.private)
        inst = self.app.new_resource(self._get_res_cls(type_name))
        ctx = Ctx(diags, type_name, None, _private_in(request.private))
        new = inst.read(ctx, current)
        if diags.has_errors():  # keep what Terraform had: an unreachable API is not a deleted resource
            return pb.ReadResource.Response(diagnostics=diags.to_pb(), new_state=request.current_state,
                                            private=request.private)
        return pb.ReadResource.Response(new_state=_encode_state(attrs, blocks, new, current_enc),
                                        private=_private_out(ctx.private), diagnostics=diags.to_pb())

    @tf_provider._log_errors
    def ImportResourceState(self, request, context):
        type_name = request.type_name
        diags = Diagnostics()
        attrs, blocks = self._get_res_attrs(type_name), self._get_res_blocks(type_name)
        inst = self.app.new_resource(self._get_res_cls(type_name))
        ctx = Ctx(diags, type_name, None, {})
        state = inst.import_(ctx, request.id)
        imported = []
        if state is not None and not diags.has_errors():
            imported.append(pb.ImportResourceState.ImportedResource(
                type_name=type_name, state=_encode_state(attrs, blocks, state, old=None),
                private=_private_out(ctx.private)))
        return pb.ImportResourceState.Response(imported_resources=imported, diagnostics=diags.to_pb())

    @tf_provider._log_errors
    def ReadDataSource(self, request, context):
        klass = self._get_ds_cls(request.type_name)
        schema = klass.get_schema()
        attrs = {a.name: a for a in schema.attributes}
        config = read_dynamic_value(request.config) or {}
        config = {k: (attrs[k].type.decode(v) if k in attrs else v) for k, v in config.items()}
        diags = Diagnostics()
        state = self.app.new_data_source(klass).read(Ctx(diags, request.type_name), config)
        encoded = None if state is None else {k: attrs[k].type.encode(state.get(k)) for k in attrs}
        return pb.ReadDataSource.Response(diagnostics=diags.to_pb(),
                                          state=tf_provider.to_dynamic_value(encoded))
