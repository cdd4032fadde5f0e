"""The gpucloud resources: each a declaration on `engine.ApiResource` (fields, collection, waiting, timeouts).

Update in place exists where the API PATCHes (vpc description, public IP port, lease name/window/count, project
name/description, volume name/description) and a volume's growing size (its extend action); every other argument
forces replacement. Docs: terraform/docs/resources/<name>.md.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import re
import time

from tf.types import Unknown

from .client import ApiResponse
from .engine import GONE_STATUSES, ApiResource, Field, log
from .framework import Ctx

MIN = 60.0


def _same_instant(a, b) -> bool:
    try:
        return _instant(a) == _instant(b)
    except (TypeError, ValueError):
        return a == b


def _instant(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def _rfc3339(value) -> dt.datetime | None:
    """An RFC 3339 instant with its offset (`2030-01-07T00:00:00Z`, `...+02:00`), else None."""
    if not isinstance(value, str) or not _RFC3339.match(value.strip()):
        return None
    try:
        return _instant(value.strip().upper())
    except ValueError:
        return None


def _check_positive(diags, config: dict, name: str, what: str) -> None:
    v = config.get(name)
    if _known(v) and int(v) < 1:
        diags.add_error(f"Invalid {name}", f"{name} is {v}: {what}.", path=[name])


def _known(v) -> bool:
    return v is not None and v is not Unknown


def _check_cidr(diags, config: dict, name: str) -> None:
    v = config.get(name)
    if isinstance(v, str) and _known(v):
        try:
            ipaddress.ip_network(v, strict=True)
        except ValueError as exc:
            diags.add_error(f"Invalid {name} {v!r}", f"{exc}: a CIDR such as 10.10.0.0/16 with no host bits set.",
                            path=[name])


def _same_network(a, b) -> bool:
    """CIDRs the API stores normalized (ipaddress' compressed, lowercase spelling)."""
    return ipaddress.ip_network(str(a).strip(), strict=False) == ipaddress.ip_network(str(b).strip(), strict=False)


def _same_text(a, b) -> bool:
    """Text the API stores without surrounding whitespace (a public key file's trailing newline)."""
    return str(a).strip() == str(b).strip()




class SshKey(ApiResource):
    name, collection = "ssh_key", "ssh-keys"
    description = "An SSH public key of a project, installed into instances through cloud-init."
    project_field = "project"
    fields = [
        Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
        Field("name", "required", description="Name, unique in the project."),
        Field("public_key", "required", description="OpenSSH public key line (ssh-ed25519, ssh-rsa, ecdsa-...)."),
        Field("fingerprint", "computed", description="SHA256 fingerprint as `ssh-keygen -lf` prints it."),
        Field("created_at", "computed"),
    ]
    equivalent = {"public_key": _same_text}


class Vpc(ApiResource):
    name, collection = "vpc", "vpcs"
    description = "A tenant's virtual private cloud (an OVN logical router)."
    project_field = "project"
    fields = [
        Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
        Field("name", "required"),
        Field("cidr", "required", description="IPv4 CIDR of the VPC, e.g. 10.10.0.0/16."),
        Field("ipv6_cidr", "optional_computed", description="Optional IPv6 CIDR."),
        Field("description", "optional_computed", update=True, description="Free text; updated in place."),
        Field("created_at", "computed"),
    ]

    equivalent = {"cidr": _same_network, "ipv6_cidr": _same_network}

    def validate_config(self, diags, config):
        _check_cidr(diags, config, "cidr")
        if config.get("ipv6_cidr"):
            _check_cidr(diags, config, "ipv6_cidr")


class Subnet(ApiResource):
    name, collection = "subnet", "subnets"
    description = "An IP subnet of a VPC (an OVN logical switch)."
    fields = [
        Field("vpc", "required", description="VPC id."),
        Field("name", "required"),
        Field("cidr", "required", description="CIDR inside the VPC's, e.g. 10.10.1.0/24."),
        Field("gateway_ip", "optional_computed", description="Default: the first address."),
        Field("dhcp_start", "optional_computed"),
        Field("dhcp_end", "optional_computed"),
        Field("enable_dhcp", "optional_computed", type="bool", description="Default true."),
        Field("dns_nameservers", "optional_computed", type="list"),
        Field("project", "computed"),
        Field("ip_version", "computed", type="int", read=lambda o: int(o["ip_version"])),
    ]

    equivalent = {"cidr": _same_network, "gateway_ip": _same_text}

    def validate_config(self, diags, config):
        _check_cidr(diags, config, "cidr")


class SecurityGroup(ApiResource):
    name, collection = "security_group", "security-groups"
    description = ("A security group of a VPC; its rules are `gpucloud_security_group_rule` resources. A new group "
                   "starts with the API's default egress rules (IPv4 and IPv6, any protocol, to anywhere) and no "
                   "ingress; they are not in this resource's state. Declaring a rule equal to one of them answers "
                   "409 `duplicate_rule`: import that rule (`terraform import gpucloud_security_group_rule.x <id>`) "
                   "to manage it, or delete it through the API to start from no egress.")
    fields = [
        Field("vpc", "required", description="VPC id."),
        Field("name", "required"),
        Field("description", "optional_computed"),
        Field("project", "computed"),
        Field("is_default", "computed", type="bool"),
    ]


def _same_prefix(a: str, b: str) -> bool:
    """The API answers "any address" as an empty prefix."""
    anyaddr = {"", "0.0.0.0/0", "::/0"}
    a, b = str(a or "").strip(), str(b or "").strip()
    return a == b or (a in anyaddr and b in anyaddr) or (a not in anyaddr and b not in anyaddr
                                                         and _same_network(a, b))


class SecurityGroupRule(ApiResource):
    name, collection = "security_group_rule", "security-group-rules"
    description = "One rule of a security group (stateful; ingress or egress)."
    fields = [
        Field("security_group", "required", description="Security group id."),
        Field("direction", "required", description="`ingress` or `egress`."),
        Field("ethertype", "optional_computed", description="`IPv4` (default) or `IPv6`."),
        Field("protocol", "optional_computed", description="`tcp`, `udp`, `icmp`, ... ; unset: any."),
        Field("port_range_min", "optional", type="int"),
        Field("port_range_max", "optional", type="int"),
        Field("icmp_type", "optional", type="int"),
        Field("icmp_code", "optional", type="int"),
        Field("remote_ip_prefix", "optional_computed", description="CIDR the rule admits, e.g. 0.0.0.0/0.",
              read=lambda o: o.get("remote_ip_prefix") or (
                  None if o.get("remote_group") else ("::/0" if o.get("ethertype") == "IPv6" else "0.0.0.0/0"))),
        Field("remote_group", "optional", description="Security group id the rule admits."),
        Field("description", "optional_computed"),
    ]

    equivalent = {"remote_ip_prefix": _same_prefix}

    def validate_config(self, diags, config):
        if config.get("remote_ip_prefix"):
            _check_cidr(diags, config, "remote_ip_prefix")


class PublicIp(ApiResource):
    name, collection = "public_ip", "public-ips"
    description = "A public IPv4 address from an operator's pool, NATed to a port (updated in place)."
    fields = [
        Field("vpc", "required", description="VPC id."),
        Field("pool", "required", description="Public IP pool name."),
        Field("port", "optional", update=True, description="Port id to NAT to; unset: allocated, unattached."),
        Field("address", "computed"),
        Field("kind", "computed"),
        Field("project", "computed"),
    ]


# --- compute ------------------------------------------------------------------------------------------------
def _net(key):
    return lambda o: (o.get("network") or {}).get(key)


_COMPUTE_FIELDS = [
    Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
    Field("name", "required"),
    Field("flavor", "required", description="Flavor id (see data source `gpucloud_flavor`)."),
    Field("image", "required", description="Image id (see data source `gpucloud_images`)."),
    Field("ssh_keys", "optional_computed", type="list", description="SSH key ids."),
    Field("subnet_id", "optional_computed", read=_net("subnet"), description="Subnet for the first NIC."),
    Field("security_group_ids", "optional_computed", type="set", read=_net("security_groups")),
    Field("ib_partition_id", "optional_computed", read=_net("ib_partition"),
          description="InfiniBand partition the HCAs join as full members."),
    Field("user_data", "optional_computed", keep_prior=True, description=(
        "cloud-init user data (<= 16 KiB). The API never answers it, only its digest (`user_data_sha256`): after "
        "an import it is null in state, and a configured value whose SHA-256 equals the API's is no change; "
        "another value forces replacement.")),
    Field("user_data_sha256", "computed",
          description="Hex SHA-256 of the user data the API holds (of the empty string when none was given)."),
]


def _sha256(text: str) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()


def _ib_guids(instance: dict) -> list[str]:
    """The instance's own InfiniBand GUIDs, once each, from its `ib_partitions` (what joined with it)."""
    out = []
    for p in instance.get("ib_partitions") or []:
        for m in p.get("members") or []:
            if m.get("guid") and m["guid"] not in out:
                out.append(m["guid"])
    return out


class _Compute(ApiResource):
    """An instance or a cluster: what both do with create-only `user_data`."""

    def unchanged(self, name, prior, value):
        """Imported (`user_data` null in state, the API's digest beside it): a configured user data with that
        digest is what the object was created with: no change, so an import round-trips."""
        if name == "user_data" and prior.get("user_data") is None and isinstance(value, str) \
                and prior.get("user_data_sha256"):
            return _sha256(value) == prior["user_data_sha256"]
        return super().unchanged(name, prior, value)


class Instance(_Compute):
    name, collection = "instance", "instances"
    description = "A GPU virtual machine (whole GPUs, a MIG slice, or a vGPU, as its flavor says)."
    project_field = "project"
    check_path = "instances/check"
    defaults = {"create": 20 * MIN, "delete": 20 * MIN}
    fields = _COMPUTE_FIELDS + [
        Field("status", "computed"),
        Field("cluster", "computed"),
        Field("ip_address", "computed", read=lambda o: next(
            (ip.get("ip_address") if isinstance(ip, dict) else ip
             for p in o.get("ports") or [] for ip in p.get("fixed_ips") or []), None),
              description="The first fixed IP of the first port."),
        Field("port_ids", "computed", type="list", read=lambda o: [p["id"] for p in o.get("ports") or []]),
        Field("ib_guids", "computed", type="list", read=lambda o: _ib_guids(o),
              description="InfiniBand port GUIDs of the instance (HCA ports or VF GUIDs in its partitions), for "
                          "`gpucloud_ib_partition_member`."),
        Field("launched_at", "computed"),
        Field("sla_tier", "optional_computed", description=(
            "SLA tier code it is bought at (its usage is priced and credited at it); default: the organization's "
            "default tier. A change forces replacement.")),
    ]

    def created(self, body):
        op = body.get("operation")
        return body["instance"], ({"id": op} if isinstance(op, str) else op)

    def wait_create(self, ctx, obj, op, timeout):
        if op and not self.wait_operation(ctx, op["id"], timeout, f"Creating {self.type_name} {obj['id']}"):
            return None
        return self.wait_status(ctx, obj["id"], {"active"}, 60, f"Creating {self.type_name} {obj['id']}")

    def wait_delete(self, ctx, current, r: ApiResponse, timeout):
        return bool(self.wait_status(ctx, current["id"], {"deleted", "__404__"}, timeout,
                                     f"Deleting {self.type_name} {current['id']}", failed=()))


#: The most instances a cluster has: the API's limit on a cluster create's `size` (`ClusterCreate`).
MAX_CLUSTER_SIZE = 256


class Cluster(_Compute):
    name, collection = "cluster", "clusters"
    description = "N instances of one flavor placed together (all or nothing), deleted together."
    project_field = "project"
    check_path = "clusters/check"
    defaults = {"create": 30 * MIN, "delete": 30 * MIN}
    fields = _COMPUTE_FIELDS + [
        Field("size", "required", type="int",
              description=f"Number of instances (nodes): 1 to {MAX_CLUSTER_SIZE}."),
        Field("status", "computed"),
        Field("members", "computed", type="list", description="Instance ids of the members."),
        Field("ib_guids", "computed", type="list", read=lambda o: [],
              description="InfiniBand port GUIDs of every member, in member order (for "
                          "`gpucloud_ib_partition_member`)."),
        Field("sla_tier", "optional_computed", description=(
            "SLA tier code it is bought at (its usage is priced and credited at it); default: the organization's "
            "default tier. A change forces replacement.")),
    ]

    def validate_config(self, diags, config):
        _check_positive(diags, config, "size", "a cluster has at least 1 instance")
        size = config.get("size")
        if _known(size) and int(size) > MAX_CLUSTER_SIZE:
            diags.add_error("Invalid size", f"size is {size}: a cluster has at most {MAX_CLUSTER_SIZE} instances.",
                            path=["size"])

    def wait_create(self, ctx, obj, op, timeout):
        """The cluster `active` and every member instance `active` (a member still provisioning, or one gone to
        `error`, is not a usable cluster)."""
        what = f"Creating {self.type_name} {obj['id']}"
        deadline = time.monotonic() + timeout
        got = self.wait_status(ctx, obj["id"], {"active"}, timeout, what)
        if got is None:
            return None
        members = Instance(self.provider)
        for m in got[0].get("members") or []:
            if members.wait_status(ctx, m, {"active"}, max(1.0, deadline - time.monotonic()),
                                   f"{what}: member") is None:
                return None
        return self.get(ctx, obj["id"])

    def wait_delete(self, ctx, current, r, timeout):
        return bool(self.wait_status(ctx, current["id"], {"deleted", "__404__"}, timeout,
                                     f"Deleting {self.type_name} {current['id']}", failed=()))

    def to_state(self, obj, prior):
        """The cluster's answer lacks the members' launch arguments: they come from its first member; `ib_guids`
        from every member, in member order."""
        state = super().to_state(obj, prior)
        guids = []
        for i, m in enumerate(obj.get("members") or []):
            try:
                r = self.client.request("GET", f"instances/{m}")
            except Exception:  # noqa: BLE001 - the cluster's own fields are still right; the next read fills these
                continue
            if not r.ok:
                continue
            if i == 0:
                for f in _COMPUTE_FIELDS:
                    if f.name in ("ssh_keys", "subnet_id", "security_group_ids", "ib_partition_id",
                                  "user_data_sha256"):
                        state[f.name] = f.from_api(r.body)
            guids += [g for g in _ib_guids(r.body) if g not in guids]
        state["ib_guids"] = guids
        return state


class IbPartition(ApiResource):
    name, collection = "ib_partition", "ib-partitions"
    description = ("An InfiniBand partition (P_Key) of a project; instances join it with `ib_partition_id`, "
                   "and `members` lists the HCA port GUIDs in it.")
    project_field = "project"
    fields = [
        Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
        Field("fabric", "required", description="Fabric name, e.g. ib-compute."),
        Field("name", "required"),
        Field("pkey", "optional_computed", read=lambda o: o.get("pkey_hex"),
              description="P_Key as 4 hex digits (0x0100); default: the next free in the project's pool."),
        Field("ipoib", "optional_computed", type="bool"),
        Field("mtu", "optional_computed", type="int"),
        Field("rate_gbps", "optional_computed", type="int"),
        Field("sl", "optional_computed", type="int"),
        Field("index0", "optional_computed", type="bool"),
        Field("members", "computed", type="list",
              read=lambda o: [f"{m['guid']}:{m.get('membership', '')}" for m in o.get("members") or []],
              description="`<port GUID>:<full|limited>` of every member."),
    ]


def _guid_int(value) -> int:
    return int(str(value).strip().lower().replace(":", "").removeprefix("0x"), 16)


def _same_guid(a, b) -> bool:
    """The API stores a GUID as `0x` + 16 lower-case hex digits; it accepts `0c:42:a1:...` and upper case."""
    return _guid_int(a) == _guid_int(b)


class IbPartitionMember(ApiResource):
    name, collection = "ib_partition_member", "ib-partitions"
    description = (
        "One more InfiniBand partition for a port GUID of the project's own instances (`POST /api/v1/ib-partitions/"
        "{id}/members`): a GUID already in one of the project's partitions on the same fabric (an instance that "
        "launched with `ib_partition_id`; its `ib_guids`) joins another one, as a limited (default) or full "
        "member. The membership leaves with the instance. Its id is `<partition_id>/<guid>` (what `terraform "
        "import` takes); every argument forces replacement.")
    api_doc = ("`POST /api/v1/ib-partitions/{id}/members`, `DELETE /api/v1/ib-partitions/{id}/members/{guid}`, "
               "read through `GET /api/v1/ib-partitions/{id}/`")
    defaults = {"create": 5 * MIN, "delete": 5 * MIN}
    import_id = "<partition_id>/<guid>"
    id_doc = "`<partition_id>/<guid>`"
    fields = [
        Field("partition_id", "required", description="Partition id (a `gpucloud_ib_partition` of the project)."),
        Field("guid", "required", description="Port GUID, `0x0c42a10300aa0001` or `0c:42:a1:03:00:aa:00:01`: one "
                                              "of an instance's `ib_guids` (or a cluster's)."),
        Field("membership", "optional_computed", description="`limited` (default: talks only to full members) or "
                                                             "`full`."),
        Field("instance_id", "computed", description="The instance the GUID belongs to."),
    ]
    equivalent = {"guid": _same_guid}

    @staticmethod
    def split_id(oid: str) -> tuple[str, str] | None:
        parts = str(oid).split("/")
        return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None

    def _state(self, partition: dict, guid: str, prior: dict | None) -> dict | None:
        try:
            member = next((m for m in partition.get("members") or [] if _same_guid(m.get("guid"), guid)), None)
        except ValueError:
            member = None
        if member is None:
            return None
        t = (prior or {}).get("timeouts")
        kept = (prior or {}).get("guid")
        guid = kept if _known(kept) and _same_guid(kept, member["guid"]) else member["guid"]
        return {"id": f"{partition['id']}/{guid}", "partition_id": str(partition["id"]), "guid": guid,
                "membership": member.get("membership"), "instance_id": member.get("instance_id"),
                "timeouts": None if t is Unknown else t}

    def validate_config(self, diags, config):
        guid = config.get("guid")
        if isinstance(guid, str) and _known(guid):
            try:
                _guid_int(guid)
            except ValueError:
                diags.add_error(f"Invalid guid {guid!r}", "A port GUID: 0x + 16 hex digits, or 8 colon-separated "
                                                          "bytes.", path=["guid"])
        m = config.get("membership")
        if isinstance(m, str) and _known(m) and m not in ("limited", "full"):
            diags.add_error(f"Invalid membership {m!r}", "`limited` or `full`.", path=["membership"])

    def create(self, ctx, planned):
        """The API's add is idempotent (the same GUID and membership again answers the member), so an apply run
        again after a killed one adopts it without an `Idempotency-Key`."""
        pid, guid = str(planned["partition_id"]), str(planned["guid"])
        body = {"guid": guid}
        if _known(planned.get("membership")):
            body["membership"] = planned["membership"]
        r = self.call(ctx, "POST", f"ib-partitions/{pid}/members", body)
        if r is None:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Adding {guid} to InfiniBand partition {pid}")
            return None
        state = self._state(r.body, guid, planned)
        if state is None:
            ctx.diagnostics.add_error(f"Adding {guid} to InfiniBand partition {pid}: not in its answer")
        return state

    def read(self, ctx, current):
        ids = self.split_id(current["id"])
        if ids is None:
            ctx.diagnostics.add_error(f"Invalid {self.type_name} id {current['id']!r}",
                                      "Expected `<partition_id>/<guid>`.")
            return None
        r = self.call(ctx, "GET", self.path(ids[0]))
        if r is None or r.status == 404:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Reading {self.type_name} {current['id']}")
            return None
        return self._state(r.body, ids[1], current)

    def delete(self, ctx, current):
        pid, guid = str(current["partition_id"]), str(current["guid"])
        r = self.call(ctx, "DELETE", f"ib-partitions/{pid}/members/{guid}")
        if r is None:
            return current
        if r.status == 404 or r.ok:
            return None
        self.fail(ctx, r, f"Removing {guid} from InfiniBand partition {pid}")
        return current

    def import_(self, ctx, oid):
        ids = self.split_id(oid)
        if ids is None:
            ctx.diagnostics.add_error(f"Cannot import {self.type_name} {oid!r}", "The id is `<partition_id>/<guid>`.")
            return None
        r = self.call(ctx, "GET", self.path(ids[0]))
        if r is None:
            return None
        state = self._state(r.body, ids[1], None) if r.ok else None
        if state is None:
            ctx.diagnostics.add_error(f"Cannot import {self.type_name} {oid}: not found",
                                      f"Partition {ids[0]} is not visible to the provider's token or {ids[1]} is "
                                      "not its member.")
        return state


class Lease(ApiResource):
    name, collection = "lease", "leases"
    description = "A reservation of GPUs or hosts for a time window (the capacity calendar)."
    project_field = "project"
    check_path = "leases/check"
    defaults = {"create": 5 * MIN, "update": 5 * MIN, "delete": 5 * MIN}
    fields = [
        Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
        Field("name", "required", update=True),
        Field("start", "required", update=True, description=(
            "Start of the window, RFC 3339 with its offset (`2030-01-07T00:00:00Z`, `2030-01-07T02:00:00+02:00`); "
            "not in the past when it is set or changed. The API also takes `YYYY-MM-DD HH:MM` in `time_zone` and "
            "`now`; the provider does not, as they would not compare equal to the instant the API answers.")),
        Field("end", "required", update=True, description="End of the window (exclusive), RFC 3339 as `start`; "
                                                           "after `start`."),
        Field("time_zone", "optional_computed"),
        Field("kind", "required", description="`hosts`, `gpus`, `mig` ..."),
        Field("gpu_model", "required"),
        Field("quantity", "required", type="int", update=True, api="count",
              description="How many hosts / GPUs / slices (`count` in the API; `count` is Terraform's own)."),
        Field("mig_profile", "optional_computed"),
        Field("share_milli", "optional_computed", type="int"),
        Field("sla_tier", "optional_computed", description=(
            "SLA tier code it is bought at (its usage is priced and credited at it); default: the organization's "
            "default tier. A change forces replacement.")),
        Field("zone", "optional_computed"),
        Field("max_leaves_per_rail", "optional", type="int"),
        Field("end_action", "optional_computed", description="`stop` (default) or `delete`."),
        Field("notice_s", "optional_computed", type="int"),
        Field("status", "computed", volatile=True),
        Field("reason", "computed", volatile=True),
    ]
    equivalent = {"start": _same_instant, "end": _same_instant}

    def validate_config(self, diags, config):
        """Static: `quantity` >= 1; `start` and `end` RFC 3339 instants, `end` after `start`."""
        _check_positive(diags, config, "quantity", "a lease reserves at least 1")
        window = {}
        for name in ("start", "end"):
            v = config.get(name)
            if not _known(v):
                continue
            window[name] = _rfc3339(v)
            if window[name] is None:
                diags.add_error(f"Invalid {name} {v!r}", f"{name} is an RFC 3339 instant with its offset, e.g. "
                                "2030-01-07T00:00:00Z or 2030-01-07T02:00:00+02:00.", path=[name])
        if window.get("start") and window.get("end") and window["end"] <= window["start"]:
            diags.add_error("Invalid end", f"end {config['end']} is not after start {config['start']} (the window "
                            "is [start, end)).", path=["end"])

    def check_plan(self, ctx, prior, planned):
        """The window against the clock, for a create and an update alike (the API's rules, RW-032): a start set
        or moved into the past, an end moved into the past; a started lease's start cannot move, nor its
        quantity shrink."""
        now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
        started = bool(prior) and prior.get("status") in ("active", "ending")
        for name in ("start", "end"):
            new = _rfc3339(planned.get(name))
            if new is None or (prior and _same_instant(prior.get(name), planned.get(name))):
                continue
            if started and name == "start":
                self.attribute_error(ctx, "start", "the start of a started lease cannot change",
                                     f"It started at {prior.get('start')}.")
            elif new < now:
                self.attribute_error(ctx, name, f"{planned[name]} is in the past",
                                     f"A lease's {name} is not earlier than the current minute ({now:%Y-%m-%dT%H:%MZ}).")
        new_q, old_q = planned.get("quantity"), (prior or {}).get("quantity")
        if started and _known(new_q) and _known(old_q) and int(new_q) < int(old_q):
            self.attribute_error(ctx, "quantity", f"a started lease cannot give capacity back ({old_q} -> {new_q})",
                                 "Shrink its end or cancel it instead.")

    def wait_create(self, ctx, obj, op, timeout):
        return self.wait_status(ctx, obj["id"], {"confirmed", "active"}, timeout,
                                f"Creating {self.type_name} {obj['id']}", failed=("rejected",))


class ApiToken(ApiResource):
    name, collection = "api_token", "tokens"
    description = "An API token bound to a project or an organization; `token` (the secret) is known at create only."
    defaults = {"create": 5 * MIN, "delete": 5 * MIN}
    fields = [
        Field("name", "required"),
        Field("scope", "optional_computed", description="`read` (default) or `write`."),
        Field("project", "optional_computed",
              description="Project id the token is bound to; the provider's `project` when neither this nor "
                          "`organization` is set."),
        Field("organization", "optional", description="Organization id the token is bound to (instead of a project)."),
        Field("expires_at", "optional_computed", description="RFC 3339 expiry; unset: the API's default."),
        Field("token", "computed", sensitive=True, keep_prior=True,
              description="The secret, answered by the create only (sensitive)."),
        Field("prefix", "computed"),
    ]

    def to_state(self, obj, prior):
        state = super().to_state(obj, prior)
        if obj.get("token"):
            state["token"] = obj["token"]
        if prior and _known(prior.get("expires_at")) and state.get("expires_at") \
                and _same_instant(prior["expires_at"], state["expires_at"]):
            state["expires_at"] = prior["expires_at"]
        return state

    secret_field = "token"

    def plan_create(self, ctx: Ctx, planned):
        """A token is bound to a project or an organization (the API answers 400 token_binding_required
        otherwise): with neither configured, the provider's `project`; with no provider project either, an error
        at plan time. An organization-bound token has no project (null, not "known after apply")."""
        config = ctx.config or {}
        if config.get("project") is None:
            if config.get("organization") is not None:
                planned["project"] = Unknown if config["organization"] is Unknown else None
            elif self.provider.project:
                planned["project"] = self.provider.project
            elif ctx.checks:
                ctx.diagnostics.add_error(
                    f"{self.type_name} needs a binding: set `project` or `organization`",
                    "A gpucloud API token is bound to a project or an organization: set one of them, or the "
                    "provider's `project` (GPUCLOUD_PROJECT) to bind it to that project.", path=["project"])
        return super().plan_create(ctx, planned)

    def gone(self, obj):
        return bool(obj.get("revoked_at"))


class WebhookEndpoint(ApiResource):
    name, collection = "webhook_endpoint", "webhooks"
    description = "An HTTPS endpoint of an organization that receives lease and spot events."
    fields = [
        Field("organization", "optional_computed",
              description="Organization id; the organization of the provider's `project` when unset."),
        Field("url", "required"),
        Field("events", "optional_computed", type="set", description="Event names; unset: all."),
        Field("is_active", "computed", type="bool"),
        Field("secret", "computed", sensitive=True, keep_prior=True,
              description="The signing secret, answered by the create only (sensitive)."),
    ]
    secret_field = "secret"

    def to_state(self, obj, prior):
        state = super().to_state(obj, prior)
        if obj.get("secret"):
            state["secret"] = obj["secret"]
        return state

    def plan_create(self, ctx: Ctx, planned):
        if (ctx.config or {}).get("organization") is None and self.provider.project and self.provider.configured:
            org = self.provider.organization_of_project(ctx)
            if org:
                planned["organization"] = org
        return super().plan_create(ctx, planned)

    def plan_update(self, ctx, prior, proposed, changed, replacing):
        if proposed.get("organization") is None:
            proposed["organization"] = prior.get("organization")
        return super().plan_update(ctx, prior, proposed, changed, replacing)


class Project(ApiResource):
    name, collection = "project", "projects"
    description = "A project of an organization (needs an organization-bound token)."
    fields = [
        Field("organization", "required"),
        Field("slug", "required", description="Unique in the organization."),
        Field("name", "required", update=True),
        Field("description", "optional_computed", update=True),
        Field("created_at", "computed"),
    ]




# --- storage ------------------------------------------------------------------------------------------------
def _accepted(body: dict, key: str = "volume") -> tuple[dict, dict | None]:
    """A storage action's 202 answer: `{"volume": ..., "operation": ...}` (the operation as an id or object)."""
    op = body.get("operation")
    return body[key], ({"id": op} if isinstance(op, str) else op)


def _volume_gone(obj: dict) -> bool:
    return obj.get("status") in GONE_STATUSES or bool(obj.get("deleted_at"))


class Volume(ApiResource):
    name, collection = "volume", "volumes"
    description = ("A block storage volume of a project (docs/storage.md). Growing `size_gib` extends it in place "
                   "(`POST /api/v1/volumes/{id}/extend/`, `available` or attached: `in-use`); a smaller size replaces "
                   "it: volumes never shrink.")
    project_field = "project"
    defaults = {"create": 10 * MIN, "update": 10 * MIN, "delete": 10 * MIN}
    api_doc = ("`POST/GET/DELETE /api/v1/volumes/`, `PATCH` (with `If-Match`) and `POST /api/v1/volumes/{id}/extend/` "
               "for a larger `size_gib`")
    fields = [
        Field("project", "optional_computed", description="Project id; the provider's `project` when unset."),
        Field("name", "required", update=True, description="Name, unique in the project."),
        Field("volume_type", "required", description="Volume type id (`GET /api/v1/volume-types/`)."),
        Field("size_gib", "required", type="int", update=True,
              description="Size in GiB; a larger value extends the volume in place, a smaller one replaces it."),
        Field("description", "optional_computed", update=True),
        Field("zone", "optional_computed", description="Zone name; default: the type's first zone."),
        Field("delete_on_termination", "optional_computed", type="bool", update=True,
              description="Deleted with the instance it is attached to (default false)."),
        Field("status", "computed", volatile=True,
              description="`creating`, `available`, `in-use` (attached), `extending`, `error` ..."),
        Field("created_at", "computed"),
    ]

    def replaces(self, name, old, new):
        return name == "size_gib" and _known(old) and _known(new) and int(new) < int(old)

    def validate_config(self, diags, config):
        size = config.get("size_gib")
        if _known(size) and int(size) < 1:
            diags.add_error("Invalid size_gib", f"size_gib is {size}: a volume has at least 1 GiB.",
                            path=["size_gib"])

    def gone(self, obj):
        return _volume_gone(obj)

    def created(self, body):
        return _accepted(body)

    def wait_create(self, ctx, obj, op, timeout):
        what = f"Creating {self.type_name} {obj['id']}"
        if op and not self.wait_operation(ctx, op["id"], timeout, what):
            return None
        return self.wait_status(ctx, obj["id"], {"available", "in-use"}, 60, what)

    def update(self, ctx, prior, planned):
        """A larger `size_gib` is `POST volumes/{id}/extend/` (waited on), then the PATCHable fields."""
        new, old = planned.get("size_gib"), prior.get("size_gib")
        if _known(new) and _known(old) and int(new) > int(old):
            what = f"Extending {self.type_name} {prior['id']} to {new} GiB"
            r = self.call(ctx, "POST", f"{self.path(prior['id'])}/extend", {"size_gib": int(new)})
            if r is None:
                return prior
            if not r.ok:
                self.fail(ctx, r, what)
                return prior
            _, op = _accepted(r.body)
            timeout = self.timeout(planned, "update")
            if op and not self.wait_operation(ctx, op["id"], timeout, what):
                return prior
            got = self.wait_status(ctx, prior["id"], {"available", "in-use"}, 60, what)
            if got is None:
                return prior
            ctx.private["etag"] = got[1]
            prior = {**prior, "size_gib": new}
            if not any(f.update and f.name != "size_gib" and planned.get(f.name) != prior.get(f.name)
                       for f in self.fields):
                return self.to_state(got[0], planned)
        return super().update(ctx, prior, planned)

    def wait_delete(self, ctx, current, r, timeout):
        return bool(self.wait_status(ctx, current["id"], {"deleted", "__404__"}, timeout,
                                     f"Deleting {self.type_name} {current['id']}", failed=("error",)))


class VolumeAttachment(ApiResource):
    name, collection = "volume_attachment", "volumes"
    description = ("A volume attached to an instance of its project (`POST /api/v1/volumes/{id}/attach/`; destroy "
                   "detaches it). Its id is `<volume_id>/<instance_id>`, which is also what `terraform import` "
                   "takes. Both arguments force replacement (a detach and an attach).")
    defaults = {"create": 10 * MIN, "delete": 10 * MIN}
    api_doc = "`POST /api/v1/volumes/{id}/attach/` and `/detach/` (each waited on through its operation)"
    import_id = "<volume_id>/<instance_id>"
    id_doc = "`<volume_id>/<instance_id>`"
    fields = [
        Field("volume_id", "required", description="Volume id."),
        Field("instance_id", "required", description="Instance id (`active` or `stopped`, in the volume's project)."),
        Field("device", "computed", description="Guest device name (`vdb` .. `vdq`)."),
        Field("status", "computed", description="`attaching`, `attached` or `detaching`."),
    ]

    @staticmethod
    def split_id(oid: str) -> tuple[str, str] | None:
        parts = str(oid).split("/")
        return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None

    def _attachment(self, volume: dict, instance_id: str) -> dict | None:
        return next((a for a in volume.get("attachments") or [] if str(a.get("instance")) == instance_id), None)

    def _state(self, volume: dict, instance_id: str, prior: dict | None) -> dict | None:
        att = self._attachment(volume, instance_id)
        if att is None or _volume_gone(volume):
            return None
        t = (prior or {}).get("timeouts")
        return {"id": f"{volume['id']}/{instance_id}", "volume_id": str(volume["id"]), "instance_id": instance_id,
                "device": att.get("device"), "status": att.get("status"),
                "timeouts": None if t is Unknown else t}

    def _wait_attachment(self, ctx, vid, iid, want: str | None, timeout, what):
        """Poll the volume until the attachment of `iid` has status `want` (None: until it is gone)."""
        def check():
            r = self.call(ctx, "GET", f"volumes/{vid}")
            if r is None:
                return False
            if r.status == 404:
                return (None, None) if want is None else self._missing(ctx, vid, what)
            if not r.ok:
                self.fail(ctx, r, what)
                return False
            att = self._attachment(r.body, iid)
            if want is None:
                return (r.body, r.etag) if att is None else None
            if att is None:
                ctx.diagnostics.add_error(f"{what}: the attachment is gone",
                                          r.body.get("error_reason") or r.body.get("error_code") or "")
                return False
            return (r.body, r.etag) if att.get("status") == want else None
        return self.poll(ctx, check, timeout, what)

    def create(self, ctx, planned):
        vid, iid = str(planned["volume_id"]), str(planned["instance_id"])
        what = f"Attaching volume {vid} to instance {iid}"
        timeout = self.timeout(planned, "create")
        r = self.call(ctx, "POST", f"volumes/{vid}/attach", {"instance": iid})
        if r is None:
            return None
        body = r.body if isinstance(r.body, dict) else {}
        if r.status == 409 and body.get("code") == "already_attached":
            log(f"{self.type_name}: {vid} is already attached to {iid}; adopting that attachment")
        elif not r.ok:
            self.fail(ctx, r, what)
            return None
        else:
            _, op = _accepted(body)
            if op and not self.wait_operation(ctx, op["id"], timeout, what):
                got = self.call(ctx, "GET", f"volumes/{vid}")
                return self._state(got.body, iid, planned) if got is not None and got.ok else None
        got = self._wait_attachment(ctx, vid, iid, "attached", timeout, what)
        if got is None:
            return None
        return self._state(got[0], iid, planned)

    def read(self, ctx, current):
        ids = self.split_id(current["id"])
        if ids is None:
            ctx.diagnostics.add_error(f"Invalid {self.type_name} id {current['id']!r}",
                                      "Expected `<volume_id>/<instance_id>`.")
            return None
        r = self.call(ctx, "GET", f"volumes/{ids[0]}")
        if r is None or r.status == 404:
            return None
        if not r.ok:
            self.fail(ctx, r, f"Reading {self.type_name} {current['id']}")
            return None
        return self._state(r.body, ids[1], current)

    def delete(self, ctx, current):
        vid, iid = str(current["volume_id"]), str(current["instance_id"])
        what = f"Detaching volume {vid} from instance {iid}"
        timeout = self.timeout(current, "delete")
        r = self.call(ctx, "POST", f"volumes/{vid}/detach", {"instance": iid})
        if r is None:
            return current
        body = r.body if isinstance(r.body, dict) else {}
        if r.status == 404 or (r.status == 409 and body.get("code") == "not_attached"):
            return None
        if not r.ok:
            self.fail(ctx, r, what)
            return current
        _, op = _accepted(body)
        if op and not self.wait_operation(ctx, op["id"], timeout, what):
            return current
        if self._wait_attachment(ctx, vid, iid, None, timeout, what) is None:
            return current
        return None

    def import_(self, ctx, oid):
        ids = self.split_id(oid)
        if ids is None:
            ctx.diagnostics.add_error(f"Cannot import {self.type_name} {oid!r}",
                                      "The id is `<volume_id>/<instance_id>`.")
            return None
        r = self.call(ctx, "GET", f"volumes/{ids[0]}")
        if r is None:
            return None
        state = self._state(r.body, ids[1], None) if r.ok else None
        if state is None:
            ctx.diagnostics.add_error(f"Cannot import {self.type_name} {oid}: not found",
                                      f"Volume {ids[0]} is not visible to the provider's token or is not "
                                      f"attached to instance {ids[1]}.")
        return state


RESOURCES = [SshKey, Vpc, Subnet, SecurityGroup, SecurityGroupRule, PublicIp, Instance, Cluster, IbPartition,
             IbPartitionMember, Lease,
             ApiToken, WebhookEndpoint, Project, Volume, VolumeAttachment]
