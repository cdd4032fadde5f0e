"""Every unique constraint a tenant can reach through a create holds under concurrency: N identical creates sent
at the same moment give exactly one 201/202 and N-1 answers of 409 with the service's own code (what a later
duplicate gets), never a 500 or a second object; creates whose unique value the service allocates (public IP
addresses, fixed IPs, P_Keys) all succeed with distinct values.

The list is checked against the models: every unique constraint (or unique field) of a tenant-owned model (one
with a `project` or `organization`) is either covered by a case here or named in `NOT_A_TENANT_CREATE` with the
reason, so a new constraint fails `test_every_tenant_unique_constraint_is_covered` until it gets a case. Real
threads, each with its own PostgreSQL connection (`tests.parallel`)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.db.models import UniqueConstraint

from apps.networking import services as net
from apps.tenancy.models import OrgRole, Quota
from tests.compute.conftest import ED25519, gpu_host
from tests.compute.test_clusters import _cabled_hosts
from tests.networking.helpers import ib_fabric
from tests.parallel import outcome, post_parallel
from tests.storage.conftest import storage_driver  # noqa: F401  (a fixture the storage cases ask for)
from tests.tenancy.helpers import client_for, make_user, member, token_for

N = 6


@dataclass(frozen=True)
class Case:
    """`setup(world) -> (client, path, body or list of N bodies)`; `constraints`: the (model label, constraint)
    pairs it holds; `success` and `code`: the winner's status and the losers' 409 code."""

    setup: Callable
    constraints: tuple[tuple[str, str], ...]
    success: int = 201
    code: str = "name_taken"
    fixtures: tuple[str, ...] = ()  # what the winner's operation needs to run (the tests run tasks eagerly)


def _vpc(w, name="v", cidr="10.0.0.0/16"):
    return net.vpc_create(actor=None, project=w.project_a, name=name, cidr=cidr)


def _subnet(w):
    return net.subnet_create(actor=None, vpc=_vpc(w), name="s", cidr="10.0.1.0/24")


def _owner(w):
    owner = make_user("owner@compute-a.test")
    member(owner, w.org_a, OrgRole.OWNER)
    return client_for(token_for(owner, organization=w.org_a))


def _ssh_key(w):
    return w.client_a, "/api/v1/ssh-keys/", {"project": str(w.project_a.pk), "name": "k", "public_key": ED25519}


def _instance(w):
    gpu_host()
    return w.client_a, "/api/v1/instances/", {"project": str(w.project_a.pk), "name": "vm", "flavor": str(w.cpu.pk),
                                              "image": str(w.image.pk)}


def _cluster(w):
    _cabled_hosts(2)
    return w.client_a, "/api/v1/clusters/", {"project": str(w.project_a.pk), "name": "c", "flavor": str(w.cpu.pk),
                                             "image": str(w.image.pk), "size": 2}


def _vpc_body(w):
    return w.client_a, "/api/v1/vpcs/", {"project": str(w.project_a.pk), "name": "net", "cidr": "10.9.0.0/16"}


def _subnet_body(w):
    # one name, different CIDRs: an identical CIDR is refused first, as 400 `subnet_overlap` (sequentially too)
    vpc = str(_vpc(w).pk)
    return w.client_a, "/api/v1/subnets/", [{"vpc": vpc, "name": "a", "cidr": f"10.0.{5 + i}.0/24"} for i in range(N)]


def _security_group(w):
    return w.client_a, "/api/v1/security-groups/", {"vpc": str(_vpc(w).pk), "name": "web"}


def _ib_partition(w):
    return w.client_a, "/api/v1/ib-partitions/", {"project": str(w.project_a.pk), "fabric": ib_fabric().name,
                                                  "name": "p"}


def _port_mac(w):
    return w.client_a, "/api/v1/ports/", {"subnet": str(_subnet(w).pk), "mac_address": "fa:16:3e:00:00:42"}


def _port_ip(w):
    return w.client_a, "/api/v1/ports/", {"subnet": str(_subnet(w).pk), "ip_addresses": ["10.0.1.50"]}


def _project(w):
    return _owner(w), "/api/v1/projects/", {"organization": str(w.org_a.pk), "slug": "ml", "name": "ML"}


def _service_account(w):
    return _owner(w), "/api/v1/service-accounts/", {"organization": str(w.org_a.pk), "name": "ci"}


def _volume_type():
    from apps.storage.models import VolumeType

    return VolumeType.objects.create(name="ssd", pool="ssd", pool_target_path="/srv/ssd")


def _volume(w):
    return w.client_a, "/api/v1/volumes/", {"project": str(w.project_a.pk), "name": "data", "size_gib": 10,
                                            "volume_type": str(_volume_type().pk)}


def _snapshot(w):
    from apps.storage.models import Volume

    volume = Volume.objects.create(project=w.project_a, name="data", size_gib=10, volume_type=_volume_type(),
                                   status="available")
    return w.client_a, "/api/v1/snapshots/", {"volume": str(volume.pk), "name": "nightly"}


IDENTICAL = {
    "ssh_key": Case(_ssh_key, (("compute.SshKey", "compute_sshkey_project_name"),
                               ("compute.SshKey", "compute_sshkey_project_fp")), code="ssh_key_exists"),
    "instance": Case(_instance, (("compute.Instance", "compute_instance_project_name_live"),), success=202),
    "cluster": Case(_cluster, (("compute.Cluster", "compute_cluster_project_name_live"),)),
    "vpc": Case(_vpc_body, (("networking.Vpc", "networking_vpc_name_uniq"),)),
    "subnet": Case(_subnet_body, (("networking.Subnet", "networking_subnet_name_uniq"),)),
    "security_group": Case(_security_group, (("networking.SecurityGroup", "networking_sg_name_uniq"),)),
    "ib_partition": Case(_ib_partition, (("networking.IbPartition", "networking_ibp_name_uniq"),)),
    "port_mac": Case(_port_mac, (("networking.Port", "mac_address"),), code="mac_in_use"),
    "port_ip": Case(_port_ip, (("networking.IpAllocation", "networking_ip_subnet_uniq"),), code="ip_in_use"),
    "project": Case(_project, (("tenancy.Project", "project_slug_unique_in_org"),), code="slug_taken"),
    "service_account": Case(_service_account, (("identity.ServiceAccount", "service_account_name_unique"),)),
    "volume": Case(_volume, (("storage.Volume", "storage_volume_project_name_live"),), success=202,
                   fixtures=("storage_driver",)),
    "snapshot": Case(_snapshot, (("storage.Snapshot", "storage_snapshot_project_name_live"),), success=202,
                     fixtures=("storage_driver",)),
}


def _public_ips(w):
    net.public_ip_pool_create(actor=None, name="ext", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                              last_ip="203.0.113.40", gateway_ip="203.0.113.1")
    vpcs = [_vpc(w, f"v{i}", f"10.{i}.0.0/16") for i in range(N)]
    return w.client_a, "/api/v1/public-ips/", [{"vpc": str(v.pk), "pool": "ext"} for v in vpcs], "address"


def _ports_auto_ip(w):
    subnet = _subnet(w)
    return w.client_a, "/api/v1/ports/", [{"subnet": str(subnet.pk), "name": f"p{i}"} for i in range(N)], "fixed_ips"


def _ib_partitions_auto_pkey(w):
    fabric = ib_fabric()
    return w.client_a, "/api/v1/ib-partitions/", [{"project": str(w.project_a.pk), "fabric": fabric.name,
                                                   "name": f"p{i}"} for i in range(N)], "pkey"


#: Creates whose unique value the service chooses: N different creates at once all succeed, values distinct.
ALLOCATED = {
    "public_ip_address": (_public_ips, (("networking.PublicIp", "networking_pip_pool_address_uniq"),)),
    "port_fixed_ip": (_ports_auto_ip, (("networking.IpAllocation", "networking_ip_subnet_uniq"),
                                       ("networking.Port", "mac_address"))),
    "ib_partition_pkey": (_ib_partitions_auto_pkey, (("networking.IbPartition", "networking_ibp_fabric_pkey_uniq"),)),
}

#: Unique constraints of tenant-owned models that no tenant create body can collide on, and why.
NOT_A_TENANT_CREATE = {
    ("identity.ApiToken", "prefix"): "random prefix the service generates (collision retried there)",
    ("identity.ServiceAccount", "user"): "the service account's own user, created with it",
    ("tenancy.Membership", "membership_unique_org"): "written by accepting an invitation (a user joins once)",
    ("tenancy.Membership", "membership_unique_project"): "written by accepting an invitation",
    ("tenancy.Quota", "quota_unique_org_resource"): "limits are set (PUT), never created by a tenant",
    ("tenancy.Quota", "quota_unique_project_resource"): "limits are set (PUT), never created by a tenant",
    ("reservations.InstanceTerms", "instance"): "one per instance, written by the instance's own create",
    ("reservations.QueuedRequest", "instance"): "one per instance, written when it joins the queue",
    ("reservations.QueuedRequest", "cluster"): "one per cluster, written when it joins the queue",
    ("reservations.QueuePriority", "project"): "set by staff per project",
    ("networking.IbPartitionMember", "networking_ibm_partition_guid_uniq"): "written by the attach workflow",
    ("networking.SecurityGroup", "networking_sg_one_default"): "the default group, written by the VPC create",
    ("networking.Subnet", "baremetal_vlan"): "allocated by the service on a subnet's first bare-metal port (lowest "
                                             "free id, serialized by an advisory lock)",
    ("networking.PublicIp", "networking_pip_one_gateway_per_vpc"): "the router's address, written by the service",
    ("networking.PublicIp", "port"): "set by associating (an update), not by a create",
    ("networking.PublicIpHolding", "networking_piph_one_open"): "billing history the service writes",
    ("billing.SlaReport", "billing_slareport_unique"): "written by the SLA job",
    ("billing.UsageRecord", "source_key"): "written by metering",
    ("billing.Invoice", "billing_invoice_one_per_period"): "written by invoice runs (staff)",
    ("billing.Invoice", "number"): "numbered by the invoice run",
    ("billing.CreditNote", "number"): "numbered by the service (staff creates)",
    ("billing.BillingAccount", "organization"): "one per organization, written by the service",
    ("storage.VolumeUsage", "storage_usage_one_open"): "billing history the service writes",
    ("health.HealthEventImpact", "health_impact_once"): "written by health ingest (agent or staff), not tenants",
    ("health.Remediation", "health_remediation_one_open"): "opened by health ingest for a failed device's VMs",
    ("health.RemediationPolicy", "project"): "set (PUT, one row per project), never created by a tenant",
    ("baremetal.ExitReceipt", "instance_id"): "one per instance, signed by the bare-metal delete workflow",
}


def _tenant_unique_constraints() -> set[tuple[str, str]]:
    found = set()
    for model in apps.get_models():
        if not model.__module__.startswith("apps."):
            continue
        names = {f.name for f in model._meta.fields}
        if not names & {"project", "organization"}:
            continue
        found |= {(model._meta.label, c.name) for c in model._meta.constraints if isinstance(c, UniqueConstraint)}
        found |= {(model._meta.label, f.name) for f in model._meta.fields if f.unique and not f.primary_key}
    return found


def test_every_tenant_unique_constraint_is_covered():
    covered = {c for case in IDENTICAL.values() for c in case.constraints}
    covered |= {c for _setup, constraints in ALLOCATED.values() for c in constraints}
    covered |= set(NOT_A_TENANT_CREATE)
    assert sorted(_tenant_unique_constraints() - covered) == []
    assert sorted(covered - _tenant_unique_constraints()) == []      # no stale entry


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(IDENTICAL))
def test_parallel_identical_creates_make_one(world, name, request):
    case = IDENTICAL[name]
    for fixture in case.fixtures:
        request.getfixturevalue(fixture)
    Quota.objects.filter(organization=world.org_a).update(limit=10**9)
    client, path, body = case.setup(world)
    bodies = body if isinstance(body, list) else [body] * N
    responses = post_parallel(client, path, bodies)
    assert outcome(responses) == {(case.success, None): 1, (409, case.code): N - 1}
    loser = next(i for i, r in enumerate(responses) if r.status_code == 409)
    again = client.post(path, bodies[loser], format="json")        # what a later duplicate gets: the same
    assert (again.status_code, again.json().get("code")) == (409, case.code)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("name", sorted(ALLOCATED))
def test_parallel_creates_get_distinct_allocated_values(world, name):
    setup, _constraints = ALLOCATED[name]
    Quota.objects.filter(organization=world.org_a).update(limit=10**9)
    client, path, bodies, member_name = setup(world)
    responses = post_parallel(client, path, bodies)
    assert outcome(responses) == {(201, None): N}
    values = [str(r.json()[member_name]) for r in responses]
    assert len(set(values)) == N, values
