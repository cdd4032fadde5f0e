"""OVN adapter contract: OVN NB/SB + ovn-northd on unix sockets, reconciled from the database through ovsdbapp,
checked with `ovn-trace` (logical flows, no hypervisor needed) and `ovn-nbctl`."""
import re

import pytest

from apps.networking import services
from apps.networking.desired import lsp_name, router_name, switch_name
from apps.networking.models import FabricSyncState, SecurityGroup
from apps.networking.services import reconcile
from tests.networking.fabrics import OvnCluster, require_ovn
from tests.networking.helpers import Tenant, vpc_with_subnet

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def ovn(settings):
    require_ovn()
    cluster = OvnCluster().start()
    settings.NETWORKING_OVN_NB_DB = cluster.nb
    yield cluster
    driver = reconcile._ovn_drivers.pop(cluster.nb, None)
    if driver is not None:
        driver.close()
    cluster.stop()


def _ip(port) -> str:
    return port.fixed_ips.get().address


def _flow(src, dst, *, dst_mac=None, tcp_dst=22) -> str:
    return (f'inport == "{lsp_name(src.pk)}" && eth.src == {src.mac_address} && eth.dst == {dst_mac or dst.mac_address} && '
            f"ip4.src == {_ip(src)} && ip4.dst == {_ip(dst)} && ip.ttl == 64 && tcp && tcp.dst == {tcp_dst}")


def _outputs(trace: str) -> list[str]:
    return re.findall(r'output\("([^"]+)"\)', trace)


def _reconcile() -> dict:
    result = reconcile.ovn_reconcile()
    return result


def test_two_tenants_same_cidr_isolated_and_sg_rule_changes_trace(ovn):
    a, b = Tenant("ovn-a"), Tenant("ovn-b")
    vpc_a, sn_a = vpc_with_subnet(a, cidr="10.0.0.0/16", subnet="10.0.1.0/24")
    vpc_b, sn_b = vpc_with_subnet(b, cidr="10.0.0.0/16", subnet="10.0.1.0/24")
    a1, a2 = (services.port_create(actor=a.user, subnet=sn_a) for _ in range(2))
    b1, b2 = (services.port_create(actor=b.user, subnet=sn_b) for _ in range(2))
    assert (_ip(a1), _ip(a2)) == (_ip(b1), _ip(b2)) == ("10.0.1.2", "10.0.1.3")     # same addresses
    ssh = services.security_group_create(actor=a.user, vpc=vpc_a, name="ssh", rules=[
        {"direction": "ingress", "protocol": "tcp", "port_range_min": 22, "port_range_max": 22,
         "remote_ip_prefix": "10.0.0.0/16"}])
    a3 = services.port_create(actor=a.user, subnet=sn_a, security_groups=[ssh])

    first = _reconcile()
    assert first["transactions"] >= 1 and first["commands"] > 0
    ovn.sync()
    ls_a = switch_name(sn_a.pk)

    # same tenant, same default group: intra-group traffic passes
    assert _outputs(ovn.trace(ls_a, _flow(a1, a2))) == [lsp_name(a2.pk)]
    # to the other tenant's port (same IP, its MAC): A's switch has no such port → dropped
    assert _outputs(ovn.trace(ls_a, _flow(a1, b2))) == []
    assert _outputs(ovn.trace(switch_name(sn_b.pk), _flow(b1, a2))) == []
    # allowed by the "ssh" group's rule; tcp/80 is not
    assert _outputs(ovn.trace(ls_a, _flow(a1, a3))) == [lsp_name(a3.pk)]
    assert _outputs(ovn.trace(ls_a, _flow(a1, a3, tcp_dst=80))) == []
    # spoofed source address: port security drops it
    spoof = _flow(a1, a2).replace(f"ip4.src == {_ip(a1)}", "ip4.src == 10.0.1.99")
    assert _outputs(ovn.trace(ls_a, spoof)) == []

    # OVN native DHCP answers a DISCOVER with the port's fixed address (the default drop group lets it pass)
    dhcp = ovn.trace(ls_a, f'inport == "{lsp_name(a1.pk)}" && eth.src == {a1.mac_address} && '
                           "eth.dst == ff:ff:ff:ff:ff:ff && ip4.src == 0.0.0.0 && ip4.dst == 255.255.255.255 && "
                           "ip.ttl == 1 && udp.src == 68 && udp.dst == 67")
    assert "offerip = 10.0.1.2" in dhcp and _outputs(dhcp) == [lsp_name(a1.pk)], dhcp

    second = _reconcile()
    assert (second["transactions"], second["commands"]) == (0, 0)     # idempotent: no transaction at all
    assert _reconcile()["transactions"] == 0

    # drift made by hand is repaired by the next reconcile
    ovn.nbctl("lsp-del", lsp_name(a2.pk))
    ovn.nbctl("acl-del", f"pg_{ssh.pk.hex}")
    repaired = _reconcile()
    # the LSP and the group's three ACLs (the ssh rule and the default IPv4 and IPv6 egress rules)
    assert repaired["transactions"] >= 1 and repaired["created"] == 4
    assert lsp_name(a2.pk) in ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch_Port").split()
    ovn.sync()
    assert _outputs(ovn.trace(ls_a, _flow(a1, a3))) == [lsp_name(a3.pk)]

    services.security_group_rule_delete(actor=a.user, rule=ssh.rules.get(direction="ingress"))
    third = _reconcile()
    assert third["transactions"] >= 1 and third["deleted"] == 1
    ovn.sync()
    assert _outputs(ovn.trace(ls_a, _flow(a1, a3))) == []          # the rule is gone: dropped now
    assert _outputs(ovn.trace(ls_a, _flow(a1, a2))) == [lsp_name(a2.pk)]
    assert (_reconcile()["transactions"]) == 0
    assert FabricSyncState.objects.get(key="ovn").last_error == ""


def test_public_ip_nat_and_cleanup(ovn):
    t = Tenant("ovn-nat")
    vpc, sn = vpc_with_subnet(t)
    port = services.port_create(actor=t.user, subnet=sn)
    pool = services.public_ip_pool_create(actor=None, name="ext", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                                          last_ip="203.0.113.20", gateway_ip="203.0.113.1")
    pip = services.public_ip_create(actor=t.user, vpc=vpc, pool=pool, port=port)
    assert pip.address == "203.0.113.11"          # .10 went to the router's SNAT address
    _reconcile()
    assert ovn.nbctl("--bare", "--columns=cidr", "list", "DHCP_Options").split() == ["10.0.1.0/24"]
    nat = ovn.nbctl("lr-nat-list", router_name(vpc.pk))
    assert re.search(r"dnat_and_snat\s+203\.0\.113\.11\s+10\.0\.1\.2", nat), nat
    assert re.search(r"snat\s+203\.0\.113\.10\s+10\.0\.0\.0/16", nat), nat
    assert "0.0.0.0/0" in ovn.nbctl("lr-route-list", router_name(vpc.pk))
    assert _reconcile()["transactions"] == 0

    services.public_ip_associate(actor=t.user, public_ip=pip, port=None)
    _reconcile()
    assert "dnat_and_snat" not in ovn.nbctl("lr-nat-list", router_name(vpc.pk))

    # deleting everything removes our objects and leaves foreign ones alone
    ovn.nbctl("ls-add", "not-ours")
    services.public_ip_delete(actor=t.user, public_ip=pip)
    services.port_delete(actor=t.user, port=port)
    services.subnet_delete(actor=t.user, subnet=sn)
    services.vpc_delete(actor=t.user, vpc=vpc)
    _reconcile()
    assert ovn.nbctl("--bare", "--columns=name", "list", "Logical_Switch").split() == ["not-ours"]
    assert ovn.nbctl("--bare", "--columns=name", "list", "Logical_Router").split() == []
    assert ovn.nbctl("--bare", "--columns=_uuid", "list", "DHCP_Options").split() == []
    assert ovn.nbctl("--bare", "--columns=name,ports", "list", "Port_Group").split() == ["pg_gpc_default_drop"]
    assert SecurityGroup.objects.count() == 0


def test_ipv6_subnet_gets_router_advertisements_and_dhcpv6(ovn):
    t = Tenant("ovn-v6")
    vpc = services.vpc_create(actor=t.user, project=t.project, name="dual", cidr="10.5.0.0/16",
                              ipv6_cidr="fd00:5::/48")
    sn6 = services.subnet_create(actor=t.user, vpc=vpc, name="v6", cidr="fd00:5:0:1::/64",
                                 dns_nameservers=["fd00:5::53"])
    port = services.port_create(actor=t.user, subnet=sn6)
    assert _ip(port) == "fd00:5:0:1::2"
    _reconcile()
    lsp = lsp_name(port.pk)
    assert f"{port.mac_address} fd00:5:0:1::2" in ovn.nbctl("lsp-get-addresses", lsp)
    dhcp_uuid = ovn.nbctl("--bare", "--columns=dhcpv6_options", "find", "Logical_Switch_Port", f"name={lsp}").strip()
    options = ovn.nbctl("--bare", "--columns=options", "list", "DHCP_Options", dhcp_uuid)
    assert "server_id=" in options and "fd00:5::53" in options, options
    ra = ovn.nbctl("--bare", "--columns=ipv6_ra_configs", "find", "Logical_Router_Port", f"name=gpc-rp-{sn6.pk}")
    assert "address_mode=dhcpv6_stateful" in ra, ra
    assert _reconcile()["transactions"] == 0


def test_allowed_address_pair_widens_port_security_only_by_its_prefix(ovn):
    t = Tenant("ovn-aap")
    _vpc, sn = vpc_with_subnet(t)
    vm1 = services.port_create(actor=t.user, subnet=sn, allowed_address_pairs=["10.0.1.100/32"])
    # remote-group rules match a group's fixed IPs only, so vm2 opens tcp/22 to the subnet by prefix
    ssh = services.security_group_create(actor=t.user, vpc=_vpc, name="ssh", rules=[
        {"direction": "ingress", "protocol": "tcp", "port_range_min": 22, "remote_ip_prefix": "10.0.1.0/24"}])
    vm2 = services.port_create(actor=t.user, subnet=sn, security_groups=[ssh])
    _reconcile()
    ovn.sync()

    def from_ip(src_ip):
        flow = _flow(vm1, vm2).replace(f"ip4.src == {_ip(vm1)}", f"ip4.src == {src_ip}")
        return _outputs(ovn.trace(switch_name(sn.pk), flow))

    assert from_ip(_ip(vm1)) == [lsp_name(vm2.pk)]
    assert from_ip("10.0.1.100") == [lsp_name(vm2.pk)]      # the pair
    assert from_ip("10.0.1.11") == []                        # RW-072 (d): a spoofed address is dropped


def test_a_new_groups_default_egress_rules_are_acls_and_let_its_ports_send(ovn):
    """A port only in a new group sends (the default egress rules), and stops when the tenant deletes them."""
    t = Tenant("ovn-egress")
    vpc, sn = vpc_with_subnet(t)
    web = services.security_group_create(actor=t.user, vpc=vpc, name="web")
    ssh = services.security_group_create(actor=t.user, vpc=vpc, name="ssh", rules=[
        {"direction": "ingress", "protocol": "tcp", "port_range_min": 22, "remote_ip_prefix": "10.0.0.0/16"}])
    src = services.port_create(actor=t.user, subnet=sn, security_groups=[web])
    dst = services.port_create(actor=t.user, subnet=sn, security_groups=[ssh])
    _reconcile()
    ovn.sync()
    pg = f"pg_{web.pk.hex}"
    listed = ovn.nbctl("acl-list", pg)
    assert f"from-lport  1002 (inport == @{pg} && ip4) allow-related" in listed, listed
    assert f"from-lport  1002 (inport == @{pg} && ip6) allow-related" in listed, listed
    assert "to-lport" not in listed, listed                               # no ingress rule
    assert _outputs(ovn.trace(switch_name(sn.pk), _flow(src, dst))) == [lsp_name(dst.pk)]

    services.security_group_rule_delete(actor=t.user, rule=web.rules.get(ethertype="IPv4"))
    _reconcile()
    ovn.sync()
    assert f"inport == @{pg} && ip4)" not in ovn.nbctl("acl-list", pg)
    assert _outputs(ovn.trace(switch_name(sn.pk), _flow(src, dst))) == []  # egress closed: dropped
