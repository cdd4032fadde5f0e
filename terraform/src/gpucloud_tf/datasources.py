"""Data sources: the catalog and the tenant's limits, read through the public API (GET only)."""
from __future__ import annotations

import uuid

from tf import schema, types

from .client import ApiError, ApiResponse, Unreachable, problem_summary
from .framework import Ctx, Object
from .resources import MAX_CLUSTER_SIZE

S, N, B = types.String(), types.Number(), types.Bool()

FLAVOR = {"id": S, "name": S, "description": S, "kind": S, "vcpus": N, "memory_mib": N, "disk_gib": N,
          "gpu_form": S, "gpu_model": S, "gpu_count": N, "mig_profile": S, "vgpu_type": S, "share_milli": N,
          "hugepages": B, "is_active": B}
IMAGE = {"id": S, "name": S, "os": S, "os_version": S, "arch": S, "disk_format": S, "min_disk_gib": N,
         "is_active": B}
REGION = {"id": S, "name": S, "description": S, "zones": types.List(S)}
QUOTA = {"id": S, "scope": S, "resource": S, "limit": N, "usage": N, "project": S, "organization": S}
PRICE = {"id": S, "book": S, "sku": S, "sla_tier": S, "pricing_model": S, "currency": S, "unit": S,
         "unit_price": S, "billing_increment_seconds": N, "minimum_seconds": N, "effective_from": S}
BUCKET = {"gpu_model": S, "zone": S, "start": S, "end": S, "free_gpus": N, "free_hosts": N, "total_gpus": N}
#: What each field of a calendar bucket means (`GET /api/v1/capacity/`, the API's ``CapacityBucket``).
BUCKET_DOC = {
    "gpu_model": "GPU model.",
    "zone": "Zone name.",
    "start": "RFC 3339 start of the bucket.",
    "end": "RFC 3339 end of the bucket (`start` + `step_s`).",
    "free_gpus": "Exclusive-mode GPUs that nothing holds at any instant of the bucket, less the operator's "
                 "on-demand reserve (what the token could reserve).",
    "free_hosts": "Hosts with none of those GPUs held in the bucket.",
    "total_gpus": "Every exclusive-mode GPU of the model in the zone. Staff only: the API omits it for a tenant "
                  "token, so it is always null there.",
}


def _pick(obj: dict, shape: dict) -> dict:
    return {k: obj.get(k) for k in shape}


def _attr(name, t, kind="optional", description=None, sensitive=False):
    return schema.Attribute(name, t, description=description or None, required=kind == "required",
                            optional=kind == "optional", computed=kind == "computed")


class _Base:
    name = ""
    description = ""
    inputs: list = []
    outputs: list = []
    #: per list-of-objects output: what each field of its objects means (the docs pages list them)
    field_docs: dict[str, dict[str, str]] = {}

    def __init__(self, provider):
        self.provider = provider

    @classmethod
    def get_name(cls):
        return cls.name

    @classmethod
    def get_schema(cls):
        return schema.Schema(description=cls.description, attributes=[
            _attr("id", S, "computed"), *cls.inputs, *cls.outputs])

    def validate(self, diags, type_name, config):
        pass

    def project_id(self, ctx: Ctx, config: dict) -> str | None:
        """The id of the configured `project` (an id, slug or name, resolved as the provider's own setting), else
        the provider's project ("" when neither is set); None after an error on `project`."""
        if not config.get("project"):
            return self.provider.project
        return self.provider.resolve_project(config["project"], ctx.diagnostics, f"gpucloud_{self.name}: project",
                                             "`project`")

    def list(self, ctx: Ctx, path: str, params: dict) -> list[dict] | None:
        client = self.provider.client
        try:
            return client.list_all(path, {k: v for k, v in params.items() if v not in (None, "")})
        except Unreachable as exc:
            ctx.diagnostics.add_error(f"gpucloud API unreachable at {client.endpoint}", str(exc))
        except ApiError as exc:
            summary, detail = problem_summary(exc.response, f"Reading data source gpucloud_{self.name}")
            ctx.diagnostics.add_error(summary, detail)
        return None


class Flavors(_Base):
    name = "flavors"
    description = "Flavors visible to the token, filtered by GPU model, MIG (slice) profile, GPU form or count."
    inputs = [_attr("gpu_model", S), _attr("mig_profile", S), _attr("gpu_form", S), _attr("gpu_count", N),
              _attr("name", S)]
    outputs = [_attr("flavors", types.List(Object(FLAVOR)), "computed")]

    def matches(self, ctx, config):
        items = self.list(ctx, "flavors", {"gpu_model": config.get("gpu_model"), "name": config.get("name"),
                                           "mig_profile": config.get("mig_profile"),
                                           "gpu_form": config.get("gpu_form")})
        if items is None:
            return None
        count = config.get("gpu_count")
        if count is not None:
            items = [f for f in items if f.get("gpu_count") == count]
        return sorted((_pick(f, FLAVOR) for f in items if f.get("is_active", True)), key=lambda f: f["name"])

    def read(self, ctx, config):
        items = self.matches(ctx, config)
        if items is None:
            return None
        return {**config, "id": "flavors", "flavors": items}


class Flavor(Flavors):
    name = "flavor"
    description = "Exactly one flavor by name, or by GPU model + MIG profile / GPU count; an error otherwise."
    outputs = [_attr(k, t, "computed") for k, t in FLAVOR.items() if k not in ("id", "name", "gpu_model",
                                                                               "mig_profile", "gpu_form",
                                                                               "gpu_count")]

    @classmethod
    def get_schema(cls):
        inputs = [_attr(a.name, a.type, "optional") for a in cls.inputs]
        for a in inputs:
            a.computed = True
        return schema.Schema(description=cls.description, attributes=[_attr("id", S, "computed"), *inputs,
                                                                      *cls.outputs])

    def read(self, ctx, config):
        items = self.matches(ctx, config)
        if items is None:
            return None
        asked = ", ".join(f"{k}={v}" for k, v in config.items() if v is not None) or "no filter"
        if len(items) != 1:
            every = self.list(ctx, "flavors", {}) or []
            names = ", ".join(sorted(f["name"] for f in every)) or "none"
            ctx.diagnostics.add_error(
                f"gpucloud_flavor: {'no flavor matches' if not items else f'{len(items)} flavors match'} ({asked})",
                f"Matching: {', '.join(f['name'] for f in items) or 'none'}. Flavors visible: {names}.")
            return None
        return dict(items[0])


class Images(_Base):
    name = "images"
    description = "Images visible to the token (filter by name, os, arch)."
    inputs = [_attr("name", S), _attr("os", S), _attr("arch", S)]
    outputs = [_attr("images", types.List(Object(IMAGE)), "computed")]

    def read(self, ctx, config):
        items = self.list(ctx, "images", {k: config.get(k) for k in ("name", "os", "arch")})
        if items is None:
            return None
        return {**config, "id": "images", "images": sorted((_pick(i, IMAGE) for i in items),
                                                           key=lambda i: i["name"])}


class Regions(_Base):
    name = "regions"
    description = "Regions and their zones the token can launch into."
    outputs = [_attr("regions", types.List(Object(REGION)), "computed")]

    def read(self, ctx, config):
        regions = self.list(ctx, "regions", {})
        zones = self.list(ctx, "zones", {})
        if regions is None or zones is None:
            return None
        out = []
        for r in sorted(regions, key=lambda r: r["name"]):
            z = sorted(x["name"] for x in zones if x.get("region") in (r["id"], r["name"]))
            out.append({**_pick(r, REGION), "zones": z})
        return {"id": "regions", "regions": out}


class Quotas(_Base):
    name = "quotas"
    description = "Quotas (limit and usage) of a project (default: the provider's) and its organization."
    inputs = [_attr("project", S, description="The project's id, slug or name (as the provider's `project`); "
                                              "default: the provider's.")]
    outputs = [_attr("quotas", types.List(Object(QUOTA)), "computed")]

    def read(self, ctx, config):
        project = self.project_id(ctx, config)
        if project is None:
            return None
        items = self.list(ctx, "quotas", {"project": project})
        if items is None:
            return None
        return {**config, "id": f"quotas-{project or 'all'}",
                "quotas": sorted((_pick(q, QUOTA) for q in items), key=lambda q: (q["scope"], q["resource"]))}


class Prices(_Base):
    name = "prices"
    description = ("The price list that applies to the token's organization: the prices in force now at its "
                   "currency and default SLA tier (a staff token: every price of every book). Filter by flavor "
                   "(id), resource (SKU kind), sku, pricing_model, sla_tier.")
    inputs = [_attr("flavor", S), _attr("resource", S), _attr("sku", S), _attr("pricing_model", S),
              _attr("sla_tier", S)]
    outputs = [_attr("prices", types.List(Object(PRICE)), "computed")]

    def read(self, ctx, config):
        items = self.list(ctx, "prices", {k: config.get(k)
                                          for k in ("flavor", "resource", "sku", "pricing_model", "sla_tier")})
        if items is None:
            return None
        return {**config, "id": "prices", "prices": [_pick(p, PRICE) for p in items]}


class Capacity(_Base):
    name = "capacity"
    description = (
        "Whether a flavor can be placed now, and when it will fit (`flavor`, `instance_count`); and/or free capacity over "
        "time (the capacity calendar: `start`, `end`), in buckets of `step_s` seconds. The placement answer is "
        "the API's launch check, the create's own decision rolled back (`POST /api/v1/instances/check/` for one "
        "instance; `POST /api/v1/clusters/check/` for `instance_count` > 1: that many instances of the flavor on one fabric, "
        "all or nothing, as a `gpucloud_cluster` of that size would be placed). Nothing is created.")
    inputs = [
        _attr("start", S, description="RFC 3339 start of the calendar (with `end`)."),
        _attr("end", S, description="RFC 3339 end of the calendar."),
        _attr("step_s", N, description="Calendar bucket length in seconds."),
        _attr("gpu_model", S, description="Calendar: only this GPU model."),
        _attr("zone", S, description="Calendar: only this zone."),
        _attr("flavor", S, description="Flavor id to check (see `gpucloud_flavor`): fills `placeable` .. "
                                       "`earliest_start`."),
        _attr("instance_count", N, description=f"How many instances of `flavor`: 1 (the default) to "
                                               f"{MAX_CLUSTER_SIZE}; more than 1 is checked as a cluster of that "
                                               "size (one fabric, all or nothing), whose size the API caps at "
                                               f"{MAX_CLUSTER_SIZE}."),
        _attr("image", S, description="Image id; needed when `instance_count` > 1 (a cluster's check takes its image)."),
        _attr("project", S, description="The project whose quota the check counts: its id, slug or name (as the "
                                        "provider's `project`); default: the provider's."),
    ]
    outputs = [
        _attr("buckets", types.List(Object(BUCKET)), "computed",
              description="The calendar (with `start` and `end`; else empty). `total_gpus` is staff only: "
                          "null for a tenant token."),
        _attr("placeable", B, "computed", description="`flavor` × `instance_count` would be placed right now (null "
                                                      "without `flavor`)."),
        _attr("code", S, "computed", description="Why not: the create's error code (`unplaceable`, "
                                                 "`capacity_unavailable`, `quota_exceeded` ...); null when placeable."),
        _attr("detail", S, "computed", description="The create's error detail, or why it would wait."),
        _attr("reason", S, "computed", description="The constraint that failed (placement reason or quota key)."),
        _attr("earliest_start", S, "computed", description="RFC 3339 instant it would first fit (capacity "
                                                           "calendar); null when it fits now or nothing known ends."),
    ]
    field_docs = {"buckets": BUCKET_DOC}

    def validate(self, diags, type_name, config):
        count = config.get("instance_count")
        if isinstance(count, int | float) and count < 1:
            diags.add_error("Invalid instance_count", f"instance_count is {count}: at least 1.", path=["instance_count"])
        if isinstance(count, int | float) and count > MAX_CLUSTER_SIZE:
            diags.add_error("Invalid instance_count", f"instance_count is {count}: at most {MAX_CLUSTER_SIZE} (the "
                            "largest cluster the API places).", path=["instance_count"])

    #: the API's field names in a check's per-field errors -> this data source's attributes
    API_FIELDS = {"size": "instance_count"}

    def _request(self, ctx: Ctx, method: str, path: str, what: str, **kw):
        client = self.provider.client
        try:
            r = client.request(method, path, **kw)
        except Unreachable as exc:
            ctx.diagnostics.add_error(f"gpucloud API unreachable at {client.endpoint}", str(exc))
            return None
        if not r.ok:
            body = r.body if isinstance(r.body, dict) else {}
            errors = body.get("errors") if isinstance(body.get("errors"), dict) else {}
            errors = {self.API_FIELDS.get(k, k): v for k, v in errors.items()}
            if errors:  # the detail names this data source's attributes too, not the API's fields
                r = ApiResponse(r.status, {**body, "errors": errors}, r.headers)
            summary, detail = problem_summary(r, what)
            for attr, msgs in errors.items():
                text = "; ".join(map(str, msgs)) if isinstance(msgs, list) else str(msgs)
                if attr in ("flavor", "instance_count", "image", "project"):
                    ctx.diagnostics.add_error(f"{what}: {attr}: {text}", detail, path=[attr])
                else:
                    ctx.diagnostics.add_error(f"{what}: {attr}: {text}", detail)
            if not errors:
                ctx.diagnostics.add_error(summary, detail)
            return None
        return r

    def read(self, ctx, config):
        what = "Reading data source gpucloud_capacity"
        state = {**config, "buckets": [], "placeable": None, "code": None, "detail": None, "reason": None,
                 "earliest_start": None}
        if config.get("start") is None and config.get("end") is None and config.get("flavor") is None:
            ctx.diagnostics.add_error(f"{what}: set `flavor` (placeable now?) or `start` and `end` (calendar)")
            return None
        if config.get("start") is not None or config.get("end") is not None:
            params = {k: config.get(k) for k in ("start", "end", "step_s", "gpu_model", "zone")}
            r = self._request(ctx, "GET", "capacity", what,
                              params={k: v for k, v in params.items() if v is not None})
            if r is None:
                return None
            state["buckets"] = [_pick(b, BUCKET) for b in r.body]
        if config.get("flavor") is not None:
            answer = self.check(ctx, config, what)
            if answer is None:
                return None
            state.update({k: answer.get(k) for k in ("placeable", "code", "detail", "reason", "earliest_start")})
        state["id"] = "capacity-" + "-".join(str(config.get(k)) for k in ("flavor", "instance_count", "start")
                                             if config.get(k) is not None)
        return state

    def check(self, ctx, config, what) -> dict | None:
        project = self.project_id(ctx, config)
        if project is None:
            return None
        if not project:
            ctx.diagnostics.add_error(f"{what}: `flavor` needs a project",
                                      "Set `project`, or the provider's `project` (GPUCLOUD_PROJECT).",
                                      path=["project"])
            return None
        count = int(config.get("instance_count") or 1)
        body = {"project": project, "flavor": config["flavor"]}
        if config.get("image"):
            body["image"] = config["image"]
        if count == 1:
            path = "instances/check"
        else:
            if not config.get("image"):
                ctx.diagnostics.add_error(f"{what}: `instance_count` > 1 needs `image`",
                                          "More than one instance is checked as a cluster, whose check takes "
                                          "the image.", path=["image"])
                return None
            # a cluster's check needs a name; one no cluster has (nothing is created, the name is not kept)
            path, body = "clusters/check", {**body, "size": count, "name": f"capacity-{uuid.uuid4().hex[:12]}"}
        r = self._request(ctx, "POST", path, what, body=body)
        return None if r is None else (r.body if isinstance(r.body, dict) else {})


DATA_SOURCES = [Flavors, Flavor, Images, Regions, Quotas, Prices, Capacity]
