"""`gpucloud-agent --backend fake enroll` on hosts of the sample fleet (apps/inventory/fleets/sample.yaml): every
state directory is its own fake machine, so two hosts enroll side by side and neither reports a GPU UUID or an HCA
port GUID the fleet file (or the other host) already holds. It used to be a 409 `hca_port_guid_conflict`: every
fake host reported the GUIDs of the fleet's first host."""
import pytest
from gpucloud_agent import cli
from gpucloud_agent.backends.fake import FAKE_GUID_PREFIX, FakeBackend

from apps.identity.models import StaffRole, User
from apps.inventory.models import Gpu, HcaPort, Host
from apps.inventory.services.agent import enrollment_token_create
from tests.networking.fabrics import load_sample_fleet

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_sample_hosts_enroll_with_the_fake_backend(live_server, tmp_path, capsys):
    load_sample_fleet()
    staff = User.objects.create_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    hosts = list(Host.objects.filter(gpus__model="H100-SXM5-80GB", gpus__mode="exclusive").distinct()
                 .order_by("name")[:2])
    assert len(hosts) == 2
    fleet_guids = set(HcaPort.objects.values_list("port_guid", flat=True))
    for n, host in enumerate(hosts):
        _, token = enrollment_token_create(actor=staff, host=host)
        argv = ["--backend", "fake", "enroll", "--url", live_server.url, "--token", token,
                "--state", str(tmp_path / f"agent-{n}")]
        assert cli.main(argv) == 0
        assert f"enrolled as host {host.name}" in capsys.readouterr().out
    reported = {}
    for n, host in enumerate(hosts):
        host.refresh_from_db()
        assert host.state == "available"
        ident = (tmp_path / f"agent-{n}" / "fake-host-id").read_text().strip()
        backend = FakeBackend("hgx-h100", host_id=ident)
        assert sorted(Gpu.objects.filter(host=host).values_list("index", "uuid")) == [
            (g.index, g.uuid) for g in backend.gpus()]
        reported[host.pk] = {p["port_guid"] for p in backend.hca_ports()}
        # the fleet's ports the fake names (mlx5_0) took the fake's GUID; none of the fleet's GUIDs was reused
        assert set(HcaPort.objects.filter(host=host, port_guid__startswith=f"0x{FAKE_GUID_PREFIX}")
                   .values_list("port_guid", flat=True)) <= reported[host.pk]
    a, b = reported.values()
    assert len(a) == len(b) == 8 and not a & b and not (a | b) & fleet_guids


def test_fake_identities_give_distinct_unicast_identifiers():
    one, two, named = FakeBackend(host_id=1), FakeBackend(host_id=2), FakeBackend(host_id="3f9c2a0d11e4b7a6")
    guids = [{p["port_guid"] for p in b.hca_ports()} for b in (one, two, named)]
    assert all(len(g) == 8 for g in guids) and not (guids[0] & guids[1] or guids[0] & guids[2] or guids[1] & guids[2])
    assert all(len(guid) == 18 and int(guid, 16) >> 56 == 0xfa for g in guids for guid in g)
    assert all(1 <= p["lid"] <= 0xbfff for b in (one, two, named) for p in b.hca_ports())  # unicast LIDs
    assert {g.uuid for g in one.gpus()}.isdisjoint(g.uuid for g in named.gpus())
