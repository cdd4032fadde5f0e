"""RW-048: security-group rule validation edge cases and canonical storage, through the API."""
import pytest

from apps.networking.models import SecurityGroupRule
from apps.networking.sg_rules import CanonicalRule, ovn_match

from .helpers import vpc_with_subnet

pytestmark = pytest.mark.django_db


@pytest.fixture
def sg(tenant_a):
    vpc, _ = vpc_with_subnet(tenant_a)
    return vpc.security_groups.get(is_default=True)


def _post(tenant, sg, **rule):
    return tenant.client.post("/api/v1/security-group-rules",
                              {"security_group": str(sg.pk), "direction": "ingress", **rule}, format="json")


@pytest.mark.parametrize("case, rule, field", [
    ("a", {"protocol": "tcp", "port_range_min": 0, "port_range_max": 0}, "port_range_min"),
    ("b", {"protocol": "tcp", "port_range_min": 443, "port_range_max": 80}, "port_range_min"),
    ("d", {"protocol": "gre", "port_range_min": 22, "port_range_max": 22}, "port_range_min"),
    ("e", {"protocol": "icmp", "icmp_type": 8, "icmp_code": 256}, "icmp_code"),
    ("f", {"protocol": "icmp", "icmp_code": 0}, "icmp_code"),
    ("g", {"ethertype": "IPv4", "remote_ip_prefix": "::/0"}, "remote_ip_prefix"),
    ("-", {"protocol": "udp", "port_range_min": 1, "port_range_max": 65536}, "port_range_max"),
    ("-", {"protocol": "tcp", "remote_ip_prefix": "10.0.0.0/8", "remote_group": "self"}, "remote_group"),
    ("-", {"protocol": "bogus"}, "protocol"),
    ("-", {"ethertype": "IPv4", "protocol": "ipv6-icmp"}, "protocol"),
])
def test_invalid_rules_are_400_and_write_nothing(tenant_a, sg, case, rule, field):
    if rule.get("remote_group") == "self":
        rule["remote_group"] = str(sg.pk)
    before = SecurityGroupRule.objects.count()
    r = _post(tenant_a, sg, **rule)
    assert r.status_code == 400, (case, r.json())
    assert r.json()["code"] == "invalid_security_group_rule"
    assert field in r.json()["errors"]
    assert SecurityGroupRule.objects.count() == before


@pytest.mark.parametrize("case, rule, stored", [
    ("c", {"protocol": "tcp", "port_range_min": 1, "port_range_max": 65535, "remote_ip_prefix": "0.0.0.0/0"},
     {"protocol": "tcp", "port_range_min": None, "port_range_max": None, "remote_ip_prefix": ""}),
    ("h", {"protocol": "tcp", "port_range_min": 22, "remote_ip_prefix": "192.168.1.10"},
     {"protocol": "tcp", "port_range_min": 22, "port_range_max": 22, "remote_ip_prefix": "192.168.1.10/32"}),
    ("i", {"ethertype": "IPv6", "protocol": "icmp"}, {"ethertype": "IPv6", "protocol": "ipv6-icmp"}),
    ("j", {"protocol": "any"}, {"protocol": ""}),
    ("-", {"protocol": "6", "port_range_min": 80, "port_range_max": 80}, {"protocol": "tcp"}),
    ("-", {"protocol": "icmp", "icmp_type": 8}, {"protocol": "icmp", "icmp_type": 8, "icmp_code": None}),
    ("-", {"protocol": "udp", "remote_ip_prefix": "10.1.2.3/16"}, {"remote_ip_prefix": "10.1.0.0/16"}),
])
def test_rules_are_stored_canonically(tenant_a, sg, case, rule, stored):
    r = _post(tenant_a, sg, **rule)
    assert r.status_code == 201, (case, r.json())
    body = r.json()
    for key, value in stored.items():
        assert body[key] == value, (case, key, body)


def test_duplicate_rule_is_409(tenant_a, sg):
    assert _post(tenant_a, sg, protocol="tcp", port_range_min=22).status_code == 201
    r = _post(tenant_a, sg, protocol="TCP", port_range_min=22, port_range_max=22)
    assert r.status_code == 409 and r.json()["code"] == "duplicate_rule"


@pytest.mark.parametrize("ethertype, everywhere", [("IPv4", "0.0.0.0/0"), ("IPv6", "::/0")])
def test_a_whole_family_prefix_is_the_same_rule_as_no_prefix(tenant_a, sg, ethertype, everywhere):
    """0.0.0.0/0 (or ::/0) and no remote both mean any address: stored once, the second is a duplicate."""
    rule = {"ethertype": ethertype, "protocol": "tcp", "port_range_min": 8080}
    first = _post(tenant_a, sg, **rule)
    assert first.status_code == 201 and first.json()["remote_ip_prefix"] == ""
    r = _post(tenant_a, sg, **rule, remote_ip_prefix=everywhere)
    assert r.status_code == 409 and r.json()["code"] == "duplicate_rule", r.json()
    assert sg.rules.filter(protocol="tcp", port_range_min=8080).count() == 1
    sg.rules.filter(protocol="tcp").delete()
    assert _post(tenant_a, sg, **rule, remote_ip_prefix=everywhere).status_code == 201
    r = _post(tenant_a, sg, **rule)
    assert r.status_code == 409 and r.json()["code"] == "duplicate_rule"


def test_security_group_with_nested_rules(tenant_a, sg):
    r = tenant_a.client.post("/api/v1/security-groups", {"vpc": str(sg.vpc_id), "name": "web", "rules": [
        {"direction": "ingress", "protocol": "tcp", "port_range_min": 443, "port_range_max": 443},
        {"direction": "egress"}]}, format="json")
    assert r.status_code == 201, r.json()
    # the nested egress rule is the default IPv4 egress rule, not a second one (nor a 409)
    assert sorted((x["direction"], x["ethertype"], x["protocol"]) for x in r.json()["rules"]) == [
        ("egress", "IPv4", ""), ("egress", "IPv6", ""), ("ingress", "IPv4", "tcp")]
    bad = tenant_a.client.post("/api/v1/security-groups", {"vpc": str(sg.vpc_id), "name": "bad", "rules": [
        {"direction": "ingress", "protocol": "tcp", "port_range_min": 0}]}, format="json")
    assert bad.status_code == 400
    assert not sg.vpc.security_groups.filter(name="bad").exists()


def test_ovn_matches():
    rule = CanonicalRule("ingress", "IPv4", "tcp", 8000, 8080, None, None, "10.0.0.0/8")
    assert ovn_match(rule, port_group="pg_x", remote_group_pg=None) == \
        "outport == @pg_x && ip4 && ip4.src == 10.0.0.0/8 && tcp && tcp.dst >= 8000 && tcp.dst <= 8080"
    rule = CanonicalRule("egress", "IPv6", "ipv6-icmp", None, None, 128, 0, "")
    assert ovn_match(rule, port_group="pg_x", remote_group_pg="pg_y") == \
        "inport == @pg_x && ip6 && ip6.dst == $pg_y_ip6 && icmp6 && icmp6.type == 128 && icmp6.code == 0"
    rule = CanonicalRule("ingress", "IPv4", "gre", None, None, None, None, "")
    assert ovn_match(rule, port_group="pg_x", remote_group_pg=None) == "outport == @pg_x && ip4 && ip.proto == 47"


def _egress_any(rules) -> list[tuple]:
    return sorted((x["direction"], x["ethertype"], x["protocol"], x["port_range_min"], x["port_range_max"],
                   x["remote_ip_prefix"], x["remote_group"]) for x in rules)


def test_a_new_group_gets_the_default_egress_rules_which_the_tenant_may_delete(tenant_a, sg):
    """As in Neutron: IPv4 and IPv6 egress, any protocol, to anywhere; no ingress. Deleting one closes it."""
    r = tenant_a.client.post("/api/v1/security-groups", {"vpc": str(sg.vpc_id), "name": "web"}, format="json")
    assert r.status_code == 201, r.json()
    expected = [("egress", "IPv4", "", None, None, "", None), ("egress", "IPv6", "", None, None, "", None)]
    assert _egress_any(r.json()["rules"]) == expected
    listed = tenant_a.client.get("/api/v1/security-group-rules", {"security_group": r.json()["id"]}).json()["results"]
    assert _egress_any(listed) == expected
    v6 = next(x for x in listed if x["ethertype"] == "IPv6")
    assert tenant_a.client.delete(f"/api/v1/security-group-rules/{v6['id']}").status_code == 204
    after = tenant_a.client.get(f"/api/v1/security-groups/{r.json()['id']}").json()["rules"]
    assert _egress_any(after) == expected[:1]
    # and it can be put back like any rule
    again = tenant_a.client.post("/api/v1/security-group-rules", {"security_group": r.json()["id"],
                                                                  "direction": "egress", "ethertype": "IPv6"},
                                 format="json")
    assert again.status_code == 201, again.json()


def test_a_bad_nested_rule_writes_no_default_rules_either(tenant_a, sg):
    before = SecurityGroupRule.objects.count()
    r = tenant_a.client.post("/api/v1/security-groups", {"vpc": str(sg.vpc_id), "name": "bad", "rules": [
        {"direction": "egress", "protocol": "udp", "port_range_min": 70000}]}, format="json")
    assert r.status_code == 400 and r.json()["code"] == "invalid_security_group_rule", r.json()
    assert SecurityGroupRule.objects.count() == before


def test_every_bad_field_of_a_rule_is_named_at_once(tenant_a, sg):
    """A bad port range and a bad prefix are one answer naming both, not one after the other is fixed."""
    before = SecurityGroupRule.objects.count()
    r = _post(tenant_a, sg, protocol="tcp", port_range_min=0, port_range_max=70000, remote_ip_prefix="10.0.0.300/8")
    assert r.status_code == 400 and r["Content-Type"] == "application/problem+json"
    body = r.json()
    assert (body["code"], body["errors"]) == ("invalid_security_group_rule", {
        "port_range_min": ["The first port must be a port from 1 to 65535."],
        "port_range_max": ["The last port must be a port from 1 to 65535."],
        "remote_ip_prefix": ["'10.0.0.300/8' is not an IP prefix."]})
    assert body["detail"] == ("The first port must be a port from 1 to 65535. The last port must be a port from 1 "
                              "to 65535. '10.0.0.300/8' is not an IP prefix.")
    assert SecurityGroupRule.objects.count() == before


def test_a_bad_protocol_is_named_beside_bad_ports_and_a_prefix_of_the_other_family(tenant_a, sg):
    """The ports' own range is still checked when the protocol is unknown (whether ports apply to it cannot be)."""
    r = _post(tenant_a, sg, protocol="bogus", port_range_min=22, port_range_max=0, icmp_type=300,
              remote_ip_prefix="::/0", remote_group=str(sg.pk))
    assert r.status_code == 400
    assert (r.json()["code"], r.json()["errors"]) == ("invalid_security_group_rule", {
        "protocol": ["Unknown protocol 'bogus'."],
        "port_range_max": ["The last port must be a port from 1 to 65535."],
        "icmp_type": ["The ICMP type must be from 0 to 255."],
        "remote_ip_prefix": ["The remote prefix ::/0 is not an IPv4 prefix (the rule's ethertype)."],
        "remote_group": ["Give a remote prefix or a remote group, not both."]})
