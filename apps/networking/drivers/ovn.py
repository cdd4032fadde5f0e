"""OVN adapter through ovsdbapp: diff the northbound database against an `OvnTopology` and repair it.

Only rows whose `external_ids` carry `gpucloud:managed=1` (routers, switches, port groups) are ours; their
ports, NAT rules, routes and ACLs are owned through them. One `sync` reads the IDL replica (free), computes
what differs and writes it in at most two transactions (deletes, creates and updates of rows; then port-group
members, ACLs, NAT rules, routes and gateway chassis, because ovsdbapp's `pg_acl_add`/`lr_nat_add` read the
parent row's column, which a row inserted in the same transaction does not have yet). Nothing differs →
no transaction at all, which is how idempotency is tested.
"""
from __future__ import annotations

import json
import re
import threading

from apps.core.drivers import DriverError, DriverTransientError

from .base import (
    OWNER_KEY,
    DhcpOptions,
    LogicalRouter,
    LogicalSwitch,
    LogicalSwitchPort,
    OvnTopology,
    PortGroup,
    SyncResult,
)

OWNED = {OWNER_KEY: "1"}
_class_lock = threading.Lock()


def _api_class():
    """A fresh subclass per driver: ovsdbapp keeps one connection per API *class*, and tests run several
    OVN databases in one process."""
    from ovsdbapp.schema.ovn_northbound import impl_idl

    with _class_lock:
        return type("GpucloudOvnNb", (impl_idl.OvnNbApiIdlImpl,), {"_ovsdb_connection": None})


class _StreamJsonParser:
    """Drop-in for `ovs.json.Parser` (feed / is_done / finish) that finds the end of one JSON-RPC message by
    scanning only quotes, backslashes and brackets, then decodes it with the standard library's C-accelerated
    `json` module. The `ovs` wheel on PyPI has no C extension, and its character-by-character Python parser was
    half of a bulk OVN sync's time (measured with cProfile)."""

    _SPECIAL = re.compile(r'["\\{}\[\]]')

    def __init__(self, check_trailer=False):
        self.done = False
        self._buf: list[str] = []
        self._offset = 0
        self._depth = 0
        self._in_string = False
        self._skip = -1

    def feed(self, s: str) -> int:
        if self.done:
            return 0
        skip = self._skip
        for m in self._SPECIAL.finditer(s):
            i = m.start()
            if self._offset + i == skip:
                continue
            c = s[i]
            if self._in_string:
                if c == "\\":
                    skip = self._offset + i + 1
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    self._buf.append(s[:i + 1])
                    self.done = True
                    return i + 1
        self._skip = skip
        self._buf.append(s)
        self._offset += len(s)
        return len(s)

    def is_done(self) -> bool:
        return self.done

    def finish(self):
        try:
            return json.loads("".join(self._buf))
        except ValueError as exc:       # ovs.json.Parser reports errors as a string
            return f"JSON parse error: {exc}"


def _use_fast_json() -> None:
    import ovs.json

    if ovs.json.PARSER == ovs.json.PARSER_PY and ovs.json.Parser is not _StreamJsonParser:
        ovs.json.Parser = _StreamJsonParser


def _idl_class():
    from ovsdbapp.backend.ovs_idl import connection

    class Idl(connection.OvsdbIdl):
        def cooperative_yield(self):
            """ovsdbapp sleeps(0) per received row to yield to eventlet; we run a plain thread, and on a busy
            machine those sleeps cost ~20% of a bulk sync."""

    return Idl


class OvnDriver:
    """`remote`: the NB database, e.g. `unix:/run/ovn/ovnnb_db.sock` or `tcp:127.0.0.1:6641`."""

    def __init__(self, remote: str, *, timeout: float = 120.0):
        self.remote = remote
        self.timeout = timeout
        self._api = None
        self._last: tuple | None = None     # (topology, IDL change_seqno) after our last complete sync

    @property
    def api(self):
        if self._api is None:
            try:
                from ovsdbapp.backend.ovs_idl import connection

                _use_fast_json()
                idl = _idl_class().from_server(self.remote, "OVN_Northbound")
                conn = connection.Connection(idl=idl, timeout=self.timeout)
                self._api = _api_class()(conn)
            except Exception as exc:  # connection refused, schema fetch timeout
                raise DriverTransientError(f"OVN NB at {self.remote} unreachable: {exc}")
        return self._api

    def close(self) -> None:
        self._last = None
        if self._api is not None:
            self._api.ovsdb_connection.stop()
            self._api = None

    # ----------------------------------------------------------------------------------------------- reading
    def _rows(self, table: str) -> list:
        return list(self.api.tables[table].rows.values())

    def _owned(self, table: str) -> dict:
        return {r.name: r for r in self._rows(table) if r.external_ids.get(OWNER_KEY) == "1"}

    # ----------------------------------------------------------------------------------------------- writing
    def sync(self, topology: OvnTopology) -> SyncResult:
        """Make NB equal to `topology` for gpucloud-owned objects. Raises `DriverError` on a failed commit.

        Shortcut: when the topology equals the one of our last complete sync and the IDL has received no change
        from the server since (its `change_seqno`, which counts every update, ours, northd's or an operator's),
        NB still holds it and the diff is skipped."""
        if self._last is not None and self._last == (topology, self.api.idl.change_seqno):
            return SyncResult()
        self._last = None
        result = self._sync(topology)
        self._last = (topology, self.api.idl.change_seqno)
        return result

    def _sync(self, topology: OvnTopology) -> SyncResult:
        result = SyncResult()
        first, second = [], []
        routers, switches, groups = self._owned("Logical_Router"), self._owned("Logical_Switch"), \
            self._owned("Port_Group")
        lsp_rows = {r.name: r for r in self._rows("Logical_Switch_Port")}
        self._plan_deletes(topology, routers, switches, groups, first, result)
        dhcp_refs = self._plan_dhcp(topology.dhcp_options, first, result)
        for sw in topology.switches:
            self._plan_switch(sw, switches.get(sw.name), lsp_rows, dhcp_refs, first, result)
        for rt in topology.routers:
            self._plan_router(rt, routers.get(rt.name), first, second, result)
        for pg in topology.port_groups:
            self._plan_port_group(pg, groups.get(pg.name), first, result)
        self._commit(first, result)
        # Memberships and ACLs refer to rows the first transaction may have created: plan them afresh.
        groups = self._owned("Port_Group")
        lsp_rows = {r.name: r for r in self._rows("Logical_Switch_Port")}
        for pg in topology.port_groups:
            self._plan_port_group_members(pg, groups.get(pg.name), lsp_rows, second, result)
        self._commit(second, result)
        return result

    def _commit(self, commands: list, result: SyncResult) -> None:
        if not commands:
            return
        try:
            with self.api.transaction(check_error=True) as txn:
                for cmd in commands:
                    txn.add(cmd)
        except DriverError:
            raise
        except Exception as exc:
            raise DriverError(f"OVN transaction failed: {exc}", code="ovn_transaction_failed")
        result.transactions += 1
        result.commands += len(commands)

    def _plan_deletes(self, topo: OvnTopology, routers, switches, groups, out: list, result: SyncResult) -> None:
        nb = self.api
        wanted_pg = {p.name for p in topo.port_groups}
        wanted_ls = {s.name for s in topo.switches}
        wanted_lr = {r.name for r in topo.routers}
        for name in sorted(set(groups) - wanted_pg):
            out.append(nb.pg_del(name, if_exists=True))
            result.deleted += 1
        for name in sorted(set(switches) - wanted_ls):
            out.append(nb.ls_del(name, if_exists=True))
            result.deleted += 1
        for name in sorted(set(routers) - wanted_lr):
            out.append(nb.lr_del(name, if_exists=True))
            result.deleted += 1

    DHCP_KEY = "gpucloud:dhcp"

    def _plan_dhcp(self, wanted: tuple[DhcpOptions, ...], out: list, result: SyncResult) -> dict:
        """Create, update or delete our DHCP_Options rows; returns key → row UUID or the create command (which
        ovsdbapp resolves to the new row inside the same transaction)."""
        nb = self.api
        have = {r.external_ids.get(self.DHCP_KEY): r for r in self._rows("DHCP_Options")
                if r.external_ids.get(OWNER_KEY) == "1"}
        refs: dict = {}
        for key, row in sorted(have.items(), key=lambda kv: str(kv[0])):
            if key not in {d.key for d in wanted}:
                out.append(nb.dhcp_options_del(row.uuid))
                result.deleted += 1
        for d in wanted:
            row = have.get(d.key)
            if row is None:
                cmd = nb.db_create("DHCP_Options", cidr=d.cidr, options=dict(d.options),
                                   external_ids={self.DHCP_KEY: d.key, **OWNED})
                out.append(cmd)
                refs[d.key] = cmd
                result.created += 1
                continue
            if row.cidr != d.cidr or dict(row.options) != dict(d.options):
                out.append(nb.db_set("DHCP_Options", row.uuid, ("cidr", d.cidr), ("options", dict(d.options))))
                result.updated += 1
            refs[d.key] = row.uuid
        return refs

    def _lsp_state(self, row) -> tuple:
        v4 = next((d.external_ids.get(self.DHCP_KEY, "") for d in row.dhcpv4_options), "")
        v6 = next((d.external_ids.get(self.DHCP_KEY, "") for d in row.dhcpv6_options), "")
        tag = next(iter(row.tag_request), None) if row.tag_request else None
        return (tuple(row.addresses), tuple(row.port_security), row.type, tuple(sorted(row.options.items())), v4, v6,
                tag)

    @staticmethod
    def _lsp_wanted(p: LogicalSwitchPort) -> tuple:
        return (tuple(p.addresses), tuple(p.port_security), p.type, tuple(sorted(p.options)), p.dhcpv4_options,
                p.dhcpv6_options, p.tag_request)

    def _plan_switch(self, sw: LogicalSwitch, row, lsp_rows: dict, dhcp_refs: dict, out: list,
                     result: SyncResult) -> None:
        nb = self.api
        ext = {**dict(sw.external_ids), **OWNED}
        if row is None:
            out.append(nb.ls_add(sw.name, other_config=dict(sw.other_config), external_ids=ext))
            result.created += 1
            current = {}
        else:
            if dict(row.other_config) != dict(sw.other_config) or dict(row.external_ids) != ext:
                out.append(nb.db_set("Logical_Switch", row.uuid, ("other_config", dict(sw.other_config)),
                                     ("external_ids", ext)))
                result.updated += 1
            current = {p.name: p for p in row.ports}
        wanted = {p.name: p for p in sw.ports}
        for name in sorted(set(current) - set(wanted)):
            out.append(nb.lsp_del(name, sw.name, if_exists=True))
            result.deleted += 1
        for name, port in wanted.items():
            have = current.get(name)
            if have is not None and self._lsp_state(have) == self._lsp_wanted(port):
                continue
            if have is not None:
                out.append(nb.lsp_del(name, sw.name, if_exists=True))
                result.updated += 1
            elif name in lsp_rows:      # on another switch: move it
                out.append(nb.lsp_del(name, if_exists=True))
                result.updated += 1
            else:
                result.created += 1
            extra = {f"dhcpv{v}_options": [dhcp_refs[key]]
                     for v, key in ((4, port.dhcpv4_options), (6, port.dhcpv6_options)) if key}
            if port.tag_request is not None:
                extra["tag_request"] = port.tag_request
            out.append(nb.lsp_add(sw.name, name, addresses=list(port.addresses),
                                  port_security=list(port.port_security), type=port.type,
                                  options=dict(port.options), **extra))

    def _plan_router(self, rt: LogicalRouter, row, out: list, gw_out: list, result: SyncResult) -> None:
        nb = self.api
        ext = {**dict(rt.external_ids), **OWNED}
        if row is None:
            out.append(nb.lr_add(rt.name, external_ids=ext))
            result.created += 1
            ports, nats, routes = {}, set(), set()
        else:
            ports = {p.name: p for p in row.ports}
            nats = {(n.type, n.external_ip, n.logical_ip) for n in row.nat}
            routes = {(r.ip_prefix, r.nexthop) for r in row.static_routes}
        wanted_ports = {p.name: p for p in rt.ports}
        for name in sorted(set(ports) - set(wanted_ports)):
            out.append(nb.lrp_del(name, rt.name, if_exists=True))
            result.deleted += 1
        for name, port in wanted_ports.items():
            have = ports.get(name)
            same = (have is not None and have.mac == port.mac and sorted(have.networks) == sorted(port.networks)
                    and dict(have.ipv6_ra_configs) == dict(port.ipv6_ra_configs))
            if not same:
                if have is not None:
                    out.append(nb.lrp_del(name, rt.name, if_exists=True))
                extra = {"ipv6_ra_configs": dict(port.ipv6_ra_configs)} if port.ipv6_ra_configs else {}
                out.append(nb.lrp_add(rt.name, name, port.mac, list(port.networks), **extra))
                result.created += 1
            has_gw = bool(same and have.gateway_chassis)
            if port.gateway_chassis and not has_gw:
                gw_out.append(nb.lrp_set_gateway_chassis(name, port.gateway_chassis, 1))
        wanted_nats = {(n.type, n.external_ip, n.logical_ip) for n in rt.nats}
        for nat_type, external_ip, logical_ip in sorted(nats - wanted_nats):
            match_ip = logical_ip if nat_type == "snat" else external_ip
            out.append(nb.lr_nat_del(rt.name, nat_type, match_ip, if_exists=True))
            result.deleted += 1
        for nat in sorted(wanted_nats - nats):      # second transaction: lr_nat_add reads lr.nat (pitfall 1)
            gw_out.append(nb.lr_nat_add(rt.name, *nat))
            result.created += 1
        wanted_routes = {(r.prefix, r.nexthop) for r in rt.routes}
        for prefix, nexthop in sorted(routes - wanted_routes):
            out.append(nb.lr_route_del(rt.name, prefix, if_exists=True, nexthop=nexthop))
            result.deleted += 1
        for prefix, nexthop in sorted(wanted_routes - routes):
            gw_out.append(nb.lr_route_add(rt.name, prefix, nexthop))
            result.created += 1

    def _plan_port_group(self, pg: PortGroup, row, out: list, result: SyncResult) -> None:
        ext = {**dict(pg.external_ids), **OWNED}
        if row is None:
            out.append(self.api.pg_add(pg.name, external_ids=ext))
            result.created += 1
        elif dict(row.external_ids) != ext:
            out.append(self.api.db_set("Port_Group", row.uuid, ("external_ids", ext)))
            result.updated += 1

    def _plan_port_group_members(self, pg: PortGroup, row, lsp_rows: dict, out: list, result: SyncResult) -> None:
        nb = self.api
        if row is None:
            raise DriverError(f"port group {pg.name} missing after create", code="ovn_inconsistent")
        have_ports = {p.name for p in row.ports}
        wanted_ports = {n for n in pg.ports if n in lsp_rows}
        add_ports, del_ports = sorted(wanted_ports - have_ports), have_ports - wanted_ports
        if add_ports:
            out.append(nb.pg_add_ports(row.uuid, [lsp_rows[n] for n in add_ports]))
            result.updated += 1
        if del_ports:
            out.append(nb.pg_del_ports(row.uuid, [p for p in row.ports if p.name in del_ports], if_exists=True))
            result.updated += 1
        have_acls = {(a.direction, a.priority, a.match, a.action) for a in row.acls}
        wanted_acls = {(a.direction, a.priority, a.match, a.action) for a in pg.acls}
        for acl in sorted(have_acls - wanted_acls):
            out.append(nb.pg_acl_del(row.uuid, acl[0], acl[1], acl[2]))
            result.deleted += 1
        for acl in sorted(wanted_acls - have_acls):
            out.append(nb.pg_acl_add(row.uuid, *acl))
            result.created += 1

