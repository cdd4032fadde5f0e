"""Data sources: the catalog and the tenant's limits, read through the public API (GET only)."""
from __future__ import annotations

from tf import schema, types

from .client import ApiError, Unreachable, problem_summary
from .framework import Ctx, Object

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


def _pick(obj: dict, shape: dict) -> dict:
    return {k: obj.get(k) for k in shape}


def _attr(name, t, kind="optional", description=None, sensitive=False):
    return schema.Attribute(name, t, description=description, required=kind == "required",
                            optional=kind == "optional", computed=kind == "computed")


class _Base:
    name = ""
    description = ""
    inputs: list = []
    outputs: list = []

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
    inputs = [_attr("project", S)]
    outputs = [_attr("quotas", types.List(Object(QUOTA)), "computed")]

    def read(self, ctx, config):
        project = config.get("project") or self.provider.project
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
    description = "Free capacity over time (the capacity calendar), in buckets of `step_s` seconds."
    inputs = [_attr("start", S, "required"), _attr("end", S, "required"), _attr("step_s", N),
              _attr("gpu_model", S), _attr("zone", S)]
    outputs = [_attr("buckets", types.List(Object(BUCKET)), "computed")]

    def read(self, ctx, config):
        client = self.provider.client
        params = {k: config.get(k) for k in ("start", "end", "step_s", "gpu_model", "zone")}
        try:
            r = client.request("GET", "capacity", params={k: v for k, v in params.items() if v is not None})
        except Unreachable as exc:
            ctx.diagnostics.add_error(f"gpucloud API unreachable at {client.endpoint}", str(exc))
            return None
        if not r.ok:
            ctx.diagnostics.add_error(*problem_summary(r, "Reading data source gpucloud_capacity"))
            return None
        return {**config, "id": f"capacity-{config.get('start')}", "buckets": [_pick(b, BUCKET) for b in r.body]}


DATA_SOURCES = [Flavors, Flavor, Images, Regions, Quotas, Prices, Capacity]
