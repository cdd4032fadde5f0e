"""The record kinds of a fleet document and how each maps onto a model (natural key, fields, references).

A reference is stored as the flattened natural key of its target: a zone is `("eu-west-a",)`, a scalable unit
`("eu-west-a", "su1")`, a GPU `("a-su1-n01", 0)`. `scope` says which sibling reference a short name is
relative to (a host's `rack: r01` means the rack `r01` of the host's zone).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import models as m
from ..states import FabricKind, GpuMode, ProvisioningKind, SubnetManagerRole, SwitchRole


@dataclass(frozen=True)
class Field:
    attr: str                       # model attribute (without _id for refs)
    type: str = "str"               # str | int | choice | ref
    required: bool = False
    default: object = ""
    null: bool = False              # int/ref may be null
    choices: tuple = ()
    ref: str = ""                   # target kind name
    scope: tuple[str, ...] = ()     # record fields whose key prefixes a short ref name
    yaml: str = ""                  # YAML key when it differs from attr


@dataclass(frozen=True)
class Kind:
    name: str
    model: type
    key: tuple[str, ...]
    fields: dict[str, Field] = field(default_factory=dict)
    create_only: tuple[str, ...] = ()
    unique: tuple[str, ...] = ()    # fields unique fleet-wide (serials, GUIDs, MACs)
    parent: str = ""                # nested under this kind's record in YAML


def _s(attr, **kw):
    return Field(attr, **kw)


def _i(attr, default=0, **kw):
    return Field(attr, type="int", default=default, **kw)


def _c(attr, choices, default="", **kw):
    return Field(attr, type="choice", choices=tuple(choices), default=default, **kw)


def _r(attr, ref, **kw):
    return Field(attr, type="ref", ref=ref, **kw)


def _n(attr, **kw):
    return Field(attr, type="int", null=True, default=None, **kw)


KINDS: list[Kind] = [
    Kind("region", m.Region, ("name",), {"name": _s("name", required=True), "description": _s("description")}),
    Kind("zone", m.Zone, ("name",), {"name": _s("name", required=True), "region": _r("region", "region", required=True),
                                     "description": _s("description")}),
    Kind("scalable_unit", m.ScalableUnit, ("zone", "name"),
         {"zone": _r("zone", "zone", required=True), "name": _s("name", required=True)}),
    Kind("rack", m.Rack, ("zone", "name"),
         {"zone": _r("zone", "zone", required=True), "name": _s("name", required=True),
          "scalable_unit": _r("scalable_unit", "scalable_unit", null=True, scope=("zone",))}),
    Kind("fabric", m.Fabric, ("name",),
         {"name": _s("name", required=True), "kind": _c("kind", FabricKind.values, required=True),
          "region": _r("region", "region", required=True), "purpose": _s("purpose"),
          "description": _s("description")}),
    Kind("subnet_manager", m.SubnetManager, ("fabric", "name"),
         {"fabric": _r("fabric", "fabric", required=True), "name": _s("name", required=True),
          "role": _c("role", SubnetManagerRole.values, required=True), "priority": _i("priority"),
          "address": _s("address"), "port_guid": _s("port_guid")}, parent="fabric"),
    Kind("switch", m.Switch, ("name",),
         {"name": _s("name", required=True), "fabric": _r("fabric", "fabric", required=True),
          "role": _c("role", SwitchRole.values, required=True), "zone": _r("zone", "zone", null=True),
          "scalable_unit": _r("scalable_unit", "scalable_unit", null=True, scope=("zone",)),
          "rack": _r("rack", "rack", null=True, scope=("zone",)), "rail": _n("rail"), "model": _s("model"),
          "port_count": _i("port_count", 64, yaml="ports"), "node_guid": _s("node_guid")}, unique=()),
    Kind("link", m.SwitchLink, ("a_switch", "a_port"),
         {"a_switch": _r("a_switch", "switch", required=True), "a_port": _i("a_port", required=True),
          "b_switch": _r("b_switch", "switch", required=True), "b_port": _i("b_port", required=True)}),
    Kind("host", m.Host, ("name",),
         {"name": _s("name", required=True), "zone": _r("zone", "zone", required=True),
          "scalable_unit": _r("scalable_unit", "scalable_unit", null=True, scope=("zone",)),
          "rack": _r("rack", "rack", null=True, scope=("zone",)), "rack_unit": _n("rack_unit"),
          "vendor": _s("vendor"), "model": _s("model"), "serial": _s("serial", required=True),
          "bmc_address": _s("bmc_address"), "bmc_credentials_ref": _s("bmc_credentials_ref"),
          "cpu_sockets": _i("cpu_sockets", 1), "cpu_cores": _i("cpu_cores", 1), "cpu_threads": _i("cpu_threads", 1),
          "memory_mib": _i("memory_mib"), "numa_nodes": _i("numa_nodes", 1),
          "provisioning_kind": _c("provisioning_kind", ProvisioningKind.values, "hypervisor"),
          "libvirt_uri": _s("libvirt_uri"), "nvswitch_system": _s("nvswitch_system"),
          "driver_version": _s("driver_version"),
          "state": _c("state", ("enrolling", "available"), "enrolling")},
         create_only=("state",), unique=("serial",)),
    Kind("gpu", m.Gpu, ("host", "index"),
         {"host": _r("host", "host", required=True), "index": _i("index", required=True),
          "model": _s("model", required=True), "uuid": _s("uuid", required=True), "serial": _s("serial", required=True),
          "pci_address": _s("pci_address", required=True), "numa_node": _i("numa_node"),
          "nvlink_domain": _s("nvlink_domain"), "mode": _c("mode", GpuMode.values, "exclusive")},
         unique=("uuid", "serial"), parent="host"),
    Kind("hca_port", m.HcaPort, ("host", "device", "port_number"),
         {"host": _r("host", "host", required=True), "device": _s("device", required=True),
          "port_number": _i("port_number", 1), "port_guid": _s("port_guid", required=True), "lid": _n("lid"),
          "fabric": _r("fabric", "fabric", required=True), "rail": _n("rail"),
          "leaf_switch": _r("leaf_switch", "switch", null=True), "leaf_port": _n("leaf_port"),
          "rate_gbps": _i("rate_gbps", 400), "pci_address": _s("pci_address"), "numa_node": _i("numa_node"),
          "max_vfs": _i("max_vfs")}, unique=("port_guid",), parent="host"),
    Kind("nic", m.Nic, ("host", "name"),
         {"host": _r("host", "host", required=True), "name": _s("name", required=True),
          "mac_address": _s("mac_address", required=True), "fabric": _r("fabric", "fabric", null=True),
          "speed_gbps": _i("speed_gbps"), "pci_address": _s("pci_address"), "numa_node": _i("numa_node"),
          "switch": _r("switch", "switch", null=True), "switch_port": _n("switch_port")},
         unique=("mac_address",), parent="host"),
]
KIND = {k.name: k for k in KINDS}
#: YAML top-level collection -> kind (device kinds are nested under hosts, subnet managers under fabrics)
COLLECTIONS = {"regions": "region", "zones": "zone", "scalable_units": "scalable_unit", "racks": "rack",
               "fabrics": "fabric", "switches": "switch", "links": "link", "hosts": "host"}
NESTED = {"host": {"gpus": "gpu", "hca_ports": "hca_port", "nics": "nic"}, "fabric": {"subnet_managers": "subnet_manager"}}


def key_paths(kind: Kind, prefix: str = "") -> list[str]:
    """ORM lookup paths whose values, in order, form `kind`'s flattened natural key."""
    paths: list[str] = []
    for name in kind.key:
        f = kind.fields[name]
        if f.type == "ref":
            paths += key_paths(KIND[f.ref], f"{prefix}{f.attr}__")
        else:
            paths.append(f"{prefix}{f.attr}")
    return paths
