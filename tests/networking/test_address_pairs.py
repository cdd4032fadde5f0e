"""RW-072: allowed-address pairs (validation and policy); anti-spoofing itself is traced in
tests/drivers/contract/test_ovn_trace.py."""
import pytest

from apps.networking import services
from apps.networking.models import Port
from apps.tenancy.models import OrgRole
from tests.tenancy.helpers import client_for, member, token_for

from .helpers import operator

pytestmark = pytest.mark.django_db


@pytest.fixture
def vm1(tenant_a):
    vpc = services.vpc_create(actor=tenant_a.user, project=tenant_a.project, name="v", cidr="10.2.0.0/16")
    # the subnet's service address (router + DHCP server) plays the metadata port's role of the case: 10.2.86.2
    subnet = services.subnet_create(actor=tenant_a.user, vpc=vpc, name="s", cidr="10.2.86.0/24",
                                    gateway_ip="10.2.86.2", dhcp_start="10.2.86.10")
    return services.port_create(actor=tenant_a.user, subnet=subnet, ip_addresses=["10.2.86.10"])


def _patch(client, port, pairs):
    return client.patch(f"/api/v1/ports/{port.pk}", {"allowed_address_pairs": pairs}, format="json")


@pytest.mark.parametrize("case, pair, status, code", [
    ("a", "10.2.86.2/32", 400, "invalid_address_pair"),
    ("b", "224.0.0.18", 400, "invalid_address_pair"),
    ("c", "0.0.0.0/0", 403, "catch_all_address_pair"),
    ("-", "ff02::1/128", 400, "invalid_address_pair"),
    ("-", "not-an-ip", 400, "invalid_cidr"),
])
def test_refused_pairs_change_nothing(tenant_a, vm1, case, pair, status, code):
    r = _patch(tenant_a.client, vm1, [pair])
    assert r.status_code == status, (case, r.json())
    assert r.json()["code"] == code
    vm1.refresh_from_db()
    assert vm1.allowed_address_pairs == []


def test_accepted_pairs_are_canonical(tenant_a, vm1):
    r = _patch(tenant_a.client, vm1, ["10.2.86.100", "10.2.87.5/24"])
    assert r.status_code == 200, r.json()
    assert r.json()["allowed_address_pairs"] == ["10.2.86.100/32", "10.2.87.0/24"]
    assert r.json()["source_check_disabled"] is False


def test_catch_all_only_by_the_provider_and_flagged(tenant_a, vm1):
    """An operator sets it where it works by a membership (staff status alone writes in no project: ADR 0104)."""
    outsider = client_for(token_for(operator(), staff=True))
    r = _patch(outsider, vm1, ["0.0.0.0/0"])
    assert (r.status_code, r.json()["code"]) == (403, "staff_not_member")
    ops = operator()
    member(ops, tenant_a.org, OrgRole.MEMBER)
    staff = client_for(token_for(ops, staff=True))
    r = _patch(staff, vm1, ["0.0.0.0/0"])
    assert r.status_code == 200, r.json()
    assert r.json()["source_check_disabled"] is True
    assert Port.objects.get(pk=vm1.pk).allowed_address_pairs == ["0.0.0.0/0"]
