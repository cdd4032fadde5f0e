"""VPCs, subnets and ports through the API: IPAM, tenant isolation (404), bad input writes nothing (RW-047)."""
import pytest

from apps.audit.models import AuditEvent
from apps.networking.models import IpAllocation, Port, SecurityGroup, Subnet, Vpc

from .helpers import vpc_with_subnet

pytestmark = pytest.mark.django_db


def _vpc(tenant, cidr="10.0.0.0/16", name="vpc1"):
    return tenant.client.post("/api/v1/vpcs", {"project": str(tenant.project.pk), "name": name, "cidr": cidr},
                              format="json")


def test_vpc_create_makes_default_group_with_egress_and_intra_group_rules(tenant_a):
    r = _vpc(tenant_a)
    assert r.status_code == 201, r.json()
    assert r.json()["cidr"] == "10.0.0.0/16"
    sg = SecurityGroup.objects.get(vpc_id=r.json()["id"])
    assert sg.is_default and sg.name == "default"
    rules = sorted((x.direction, x.protocol, x.remote_ip_prefix, x.remote_group_id) for x in sg.rules.all())
    assert rules == [("egress", "", "", None), ("ingress", "", "", sg.pk)]
    assert AuditEvent.objects.filter(action="networking.vpc.create", target_id=r.json()["id"]).count() == 1


def test_same_cidr_in_two_projects_is_fine(tenant_a, tenant_b):
    assert _vpc(tenant_a, "10.0.0.0/24").status_code == 201
    assert _vpc(tenant_b, "10.0.0.0/24").status_code == 201     # RW-047: B's 10.0.0.0/24 accepted


@pytest.mark.parametrize("cidr, code", [
    ("8.8.8.0/24", "vpc_cidr_not_allowed"), ("10.0.0.5/24", "invalid_cidr"), ("10.0.0.0", "invalid_cidr"),
    ("fd00::/48", "invalid_cidr"), ("10.0.0.0/7", "vpc_cidr_too_large"),
    # a VPC that can never hold a subnet (the smallest is a /29)
    ("10.0.0.0/31", "vpc_cidr_too_small"), ("10.0.0.1/32", "vpc_cidr_too_small"), ("10.0.0.0/30", "vpc_cidr_too_small"),
])
def test_bad_vpc_cidr_is_400_and_writes_nothing(tenant_a, cidr, code):
    before = AuditEvent.objects.count()
    r = _vpc(tenant_a, cidr)
    assert r.status_code == 400
    assert r.json()["code"] == code
    assert Vpc.objects.count() == 0 and SecurityGroup.objects.count() == 0
    assert AuditEvent.objects.count() == before


def test_operator_allowed_range(tenant_a, settings):
    settings.NETWORKING_ALLOWED_VPC_CIDRS = ["100.64.0.0/10"]
    assert _vpc(tenant_a, "100.64.0.0/16").status_code == 201
    assert _vpc(tenant_a, "100.128.0.0/16", name="v2").json()["code"] == "vpc_cidr_not_allowed"


def test_overlapping_subnets_in_one_vpc_rejected_naming_the_other(tenant_a):
    """RW-047: tenant A adds 10.0.0.128/25 beside 10.0.0.0/24 in the same VPC (one router) → 400."""
    vpc = Vpc.objects.get(pk=_vpc(tenant_a, "10.0.0.0/16").json()["id"])
    r1 = tenant_a.client.post("/api/v1/subnets", {"vpc": str(vpc.pk), "name": "a", "cidr": "10.0.0.0/24"})
    assert r1.status_code == 201
    r2 = tenant_a.client.post("/api/v1/subnets", {"vpc": str(vpc.pk), "name": "b", "cidr": "10.0.0.128/25"})
    assert r2.status_code == 400
    body = r2.json()
    assert body["code"] == "subnet_overlap"
    assert "'a'" in body["detail"] and "10.0.0.0/24" in body["detail"] and "10.0.0.128/25" in body["detail"]
    assert Subnet.objects.filter(vpc=vpc).count() == 1


def test_subnet_ipam_defaults_v4_and_v6(tenant_a):
    r = tenant_a.client.post("/api/v1/vpcs", {"project": str(tenant_a.project.pk), "name": "dual",
                                               "cidr": "10.1.0.0/16", "ipv6_cidr": "fd12:3456:789a::/48"})
    assert r.status_code == 201, r.json()
    v4 = tenant_a.client.post("/api/v1/subnets", {"vpc": r.json()["id"], "name": "v4", "cidr": "10.1.2.0/24",
                                                   "dns_nameservers": ["10.1.0.2"]}).json()
    assert (v4["gateway_ip"], v4["dhcp_start"], v4["dhcp_end"], v4["ip_version"]) == \
        ("10.1.2.1", "10.1.2.2", "10.1.2.254", 4)
    assert v4["dns_nameservers"] == ["10.1.0.2"]
    v6 = tenant_a.client.post("/api/v1/subnets", {"vpc": r.json()["id"], "name": "v6",
                                                   "cidr": "fd12:3456:789a:1::/64"}).json()
    assert (v6["gateway_ip"], v6["dhcp_start"], v6["ip_version"]) == \
        ("fd12:3456:789a:1::1", "fd12:3456:789a:1::2", 6)
    assert v6["dhcp_end"] == "fd12:3456:789a:1:ffff:ffff:ffff:ffff"


@pytest.mark.parametrize("extra, field", [
    ({"cidr": "10.9.0.0/24"}, "cidr"),                                       # outside the VPC
    ({"cidr": "10.0.1.0/30"}, "cidr"),                                       # too small
    ({"cidr": "10.0.1.0/24", "gateway_ip": "10.0.2.1"}, "gateway_ip"),
    ({"cidr": "10.0.1.0/24", "dhcp_start": "10.0.1.1"}, "gateway_ip"),       # range covers the gateway
    ({"cidr": "10.0.1.0/24", "dhcp_start": "10.0.1.200", "dhcp_end": "10.0.1.100"}, "dhcp_start"),
])
def test_bad_subnet_is_400(tenant_a, extra, field):
    vpc = _vpc(tenant_a).json()["id"]
    r = tenant_a.client.post("/api/v1/subnets", {"vpc": vpc, "name": "s", **extra})
    assert r.status_code == 400
    assert field in r.json()["errors"]
    assert Subnet.objects.count() == 0


def test_ports_get_lowest_free_address_and_unique_mac(tenant_a):
    vpc, sn = vpc_with_subnet(tenant_a, subnet="10.0.1.0/29")     # gateway .1, range .2-.6
    ips = []
    for _ in range(5):
        r = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk)}, format="json")
        assert r.status_code == 201, r.json()
        ips.append(r.json()["fixed_ips"][0]["ip_address"])
        assert r.json()["security_groups"] == [str(SecurityGroup.objects.get(vpc=vpc, is_default=True).pk)]
    assert ips == ["10.0.1.2", "10.0.1.3", "10.0.1.4", "10.0.1.5", "10.0.1.6"]
    r = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk)}, format="json")
    assert r.status_code == 409 and r.json()["code"] == "subnet_exhausted"
    macs = list(Port.objects.values_list("mac_address", flat=True))
    assert len(set(macs)) == 5 and all(m.startswith("0a:58:") for m in macs)


def test_fixed_ip_request_checks(tenant_a):
    _vpc_, sn = vpc_with_subnet(tenant_a)
    ok = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk), "ip_addresses": ["10.0.1.77"]}, format="json")
    assert ok.status_code == 201 and ok.json()["fixed_ips"][0]["ip_address"] == "10.0.1.77"
    dup = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk), "ip_addresses": ["10.0.1.77"]}, format="json")
    assert dup.status_code == 409 and dup.json()["code"] == "ip_in_use"
    for bad in ("10.0.1.1", "10.0.1.255", "10.0.2.5", "nonsense"):
        r = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk), "ip_addresses": [bad]}, format="json")
        assert r.status_code == 400, bad
    assert IpAllocation.objects.count() == 1


def test_other_tenant_sees_404_and_cannot_reference(tenant_a, tenant_b):
    vpc, sn = vpc_with_subnet(tenant_a)
    assert tenant_b.client.get(f"/api/v1/vpcs/{vpc.pk}").status_code == 404
    assert tenant_b.client.get(f"/api/v1/subnets/{sn.pk}").status_code == 404
    assert tenant_b.client.delete(f"/api/v1/vpcs/{vpc.pk}").status_code == 404
    assert tenant_b.client.get("/api/v1/vpcs").json()["results"] == []
    r = tenant_b.client.post("/api/v1/ports", {"subnet": str(sn.pk)}, format="json")
    assert r.status_code == 400 and r.json()["errors"]["subnet"] == ["Not found."]
    assert Port.objects.count() == 0


def test_viewer_cannot_write(tenant_a):
    from tests.tenancy.helpers import client_for, token_for

    viewer = client_for(token_for(tenant_a.viewer, organization=tenant_a.org))
    r = viewer.post("/api/v1/vpcs", {"project": str(tenant_a.project.pk), "name": "v", "cidr": "10.0.0.0/16"})
    assert r.status_code == 403
    assert Vpc.objects.count() == 0


def test_vpc_quota_is_422(tenant_a):
    tenant_a.quota("vpcs", 1)
    assert _vpc(tenant_a).status_code == 201
    r = _vpc(tenant_a, name="two")
    assert r.status_code == 422 and r.json()["code"] == "quota_exceeded" and r.json()["resource"] == "vpcs"


def test_delete_order_is_enforced(tenant_a):
    vpc, sn = vpc_with_subnet(tenant_a)
    port = tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk)}, format="json").json()
    assert tenant_a.client.delete(f"/api/v1/subnets/{sn.pk}").json()["code"] == "in_use"
    assert tenant_a.client.delete(f"/api/v1/vpcs/{vpc.pk}").json()["code"] == "in_use"
    assert tenant_a.client.delete(f"/api/v1/ports/{port['id']}").status_code == 204
    assert tenant_a.client.delete(f"/api/v1/subnets/{sn.pk}").status_code == 204
    assert tenant_a.client.delete(f"/api/v1/vpcs/{vpc.pk}").status_code == 204
    assert Vpc.objects.count() == SecurityGroup.objects.count() == 0


def test_list_query_count_is_bounded(tenant_a, django_assert_max_num_queries):
    vpc, sn = vpc_with_subnet(tenant_a)
    for _ in range(6):
        tenant_a.client.post("/api/v1/ports", {"subnet": str(sn.pk)}, format="json")
    with django_assert_max_num_queries(12):
        r = tenant_a.client.get("/api/v1/ports")
    assert len(r.json()["results"]) == 6


def test_demo_loader_is_idempotent(db):
    import io

    from apps.networking import demo
    from apps.networking.models import PublicIpPool
    from apps.tenancy import demo as tenancy_demo

    out = io.StringIO()
    tenancy_demo.load_demo(out)
    demo.load_demo(out)
    demo.load_demo(out)
    assert Vpc.objects.filter(name="demo").count() == 1
    assert PublicIpPool.objects.filter(name="public").count() == 1


def test_beat_runs_the_reconcilers():
    from gpucloud.celery import collect_beat_schedule

    schedule = collect_beat_schedule()
    assert schedule["networking-ovn-reconcile"]["task"] == "networking.ovn_reconcile_task"
    assert schedule["networking-ib-reconcile"]["task"] == "networking.ib_reconcile_all_task"
    assert {e["options"]["queue"] for k, e in schedule.items() if k.startswith("networking-")} == {"reconcile"}


def test_unconfigured_backends_are_skipped(db, settings):
    from apps.networking import tasks

    settings.NETWORKING_OVN_NB_DB = ""
    settings.NETWORKING_IB_FABRICS = {}
    assert "skipped" in tasks.ovn_reconcile_task.delay().get()
    assert tasks.ib_reconcile_all_task.delay().get() == {}


def test_public_ip_holdings_feed_billing(tenant_a):
    import datetime as dt

    import time_machine

    from apps.billing.registry import usage_sources
    from apps.networking import services

    vpc, sn = vpc_with_subnet(tenant_a)
    pool = services.public_ip_pool_create(actor=None, name="ext", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                                          last_ip="203.0.113.20", gateway_ip="203.0.113.1")
    t0 = dt.datetime(2026, 11, 2, 10, 0, tzinfo=dt.UTC)
    with time_machine.travel(t0, tick=False):
        pip = services.public_ip_create(actor=tenant_a.user, vpc=vpc, pool=pool)
    pip_id = str(pip.pk)
    with time_machine.travel(t0 + dt.timedelta(hours=3), tick=False):
        services.public_ip_delete(actor=tenant_a.user, public_ip=pip)
    source = usage_sources()["networking.public_ip"]
    [interval] = list(source(dt.datetime(2026, 11, 1, tzinfo=dt.UTC), dt.datetime(2026, 12, 1, tzinfo=dt.UTC)))
    assert (interval.start, interval.end, interval.sku, interval.resource_id) == \
        (t0, t0 + dt.timedelta(hours=3), "public_ip", pip_id)
    assert interval.project_id == tenant_a.project.pk and interval.pricing_model == "on_demand"
    assert list(source(dt.datetime(2026, 12, 1, tzinfo=dt.UTC), dt.datetime(2027, 1, 1, tzinfo=dt.UTC))) == []


def test_a_bad_name_and_a_bad_cidr_are_named_at_once(tenant_a):
    """Both fields in one 400 (the CIDR's checks run beside the name's), so the user fixes both in one go."""
    r = _vpc(tenant_a, "8.8.8.0/24", name="Not a slug!")
    assert r.status_code == 400 and r["Content-Type"] == "application/problem+json"
    body = r.json()
    assert (body["code"], body["detail"], body["errors"]) == ("validation_error", "Invalid input: cidr, name.", {
        "name": ['Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.'],
        "cidr": ["8.8.8.0/24 is not inside RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) or a range the "
                 "operator allows."]})
    assert Vpc.objects.count() == 0 and SecurityGroup.objects.count() == 0


def test_two_bad_cidrs_are_named_at_once_with_their_shared_code(tenant_a):
    r = tenant_a.client.post("/api/v1/vpcs", {"project": str(tenant_a.project.pk), "name": "v", "cidr": "8.8.8.0/24",
                                              "ipv6_cidr": "2001:db8::/48"}, format="json")
    assert r.status_code == 400
    body = r.json()
    assert (body["code"], body["errors"]) == ("vpc_cidr_not_allowed", {
        "cidr": ["8.8.8.0/24 is not inside RFC 1918 (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) or a range the "
                 "operator allows."],
        "ipv6_cidr": ["2001:db8::/48 is not inside fc00::/7 or a range the operator allows."]})
    assert body["detail"] == " ".join(body["errors"]["cidr"] + body["errors"]["ipv6_cidr"])
    assert Vpc.objects.count() == 0


def test_the_service_names_both_bad_cidrs_too(tenant_a):
    """Callers other than the API (the demo data, management commands) get the same one refusal."""
    from apps.core.errors import ValidationFailed
    from apps.networking.services import vpc_create

    with pytest.raises(ValidationFailed) as caught:
        vpc_create(actor=tenant_a.user, project=tenant_a.project, name="v", cidr="10.0.0.0/31",
                   ipv6_cidr="10.1.0.0/16")
    assert (caught.value.code, caught.value.errors) == ("validation_error", {
        "cidr": ["A VPC CIDR must be /29 or larger, to hold a subnet."],
        "ipv6_cidr": ["The IPv6 CIDR must be an IPv6 range."]})
    assert Vpc.objects.count() == 0
