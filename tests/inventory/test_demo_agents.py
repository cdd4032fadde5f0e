"""`manage.py demo_agents` against the live test server: every demo host enrolls at start (MIG and vGPU hosts with
their SR-IOV VFs), queued commands are executed and reported, hosts outside the demo (not `test:///`) are never
touched; on the demo fleet every demo flavor places and one host's agent reports a faulty GPU."""
import io

import pytest
from django.core.management import call_command

from apps.inventory.models import AgentCommand, AgentCredential, GpuInstance, VirtualFunction
from apps.inventory.services.agent import agent_command_enqueue

from .helpers import make_host

pytestmark = pytest.mark.django_db(transaction=True)


def _run(url, **kw) -> str:
    out = io.StringIO()
    call_command("demo_agents", url=url, once=True, interval=0, stdout=out, stderr=out, **kw)
    return out.getvalue()


def test_demo_mig_host_enrolls_with_vfs_and_runs_commands(live_server):
    mig = make_host("demo-mig", gpus=2, libvirt_uri="test:///default", driver_version="550.90.07")
    mig.gpus.update(mode="mig")
    plain = make_host("demo-plain", gpus=2, libvirt_uri="test:///default")
    # a demo host on the test driver a libvirtd hosts for several worker processes (docs/deployment.md)
    shared = make_host("demo-shared", gpus=1, libvirt_uri="test+unix:///default?socket=/tmp/x/libvirt-sock")
    prod = make_host("prod-mig", gpus=2, libvirt_uri="qemu+tls://prod-mig/system", driver_version="550.90.07")
    prod.gpus.update(mode="mig")

    out = _run(live_server.url)
    assert "agent enrolled on demo-mig (2 GPUs with SR-IOV VFs)" in out and "prod-mig" not in out
    assert "agent enrolled on demo-plain" in out   # every demo host has an agent from the start
    assert "agent enrolled on demo-shared" in out
    assert out.index("demo-mig") < out.index("demo-plain")   # the hosts the MIG flavors need first
    assert VirtualFunction.objects.filter(gpu__host=mig).count() == 2 * 4
    assert not VirtualFunction.objects.filter(gpu__host__in=[plain, prod]).exists()
    assert not VirtualFunction.objects.filter(gpu__host=prod).exists()
    assert set(mig.gpus.values_list("mode", flat=True)) == {"mig"}
    assert AgentCredential.objects.filter(host=plain).exists() and AgentCredential.objects.filter(host=shared).exists()
    assert not AgentCredential.objects.filter(host=prod).exists()

    cmd = agent_command_enqueue(actor=None, host=mig, kind="create_gpu_instance",
                                payload={"gpu_index": 1, "profile": "3g.40gb"})
    reset = agent_command_enqueue(actor=None, host=plain, kind="reset_gpu", payload={"gpu_index": 0})
    vf = VirtualFunction.objects.filter(gpu__host=mig, gpu__index=0).order_by("index").last()
    vf_reset = agent_command_enqueue(actor=None, host=mig, kind="reset_vf",
                                     payload={"gpu_index": 0, "vf_address": vf.pci_address})
    vf_type = agent_command_enqueue(actor=None, host=mig, kind="set_vf_vgpu_type", payload={
        "gpu_index": 0, "vf_address": vf.pci_address, "vgpu_type": "H100XM-3-40C"})  # before a VM gets the VF
    foreign = agent_command_enqueue(actor=None, host=prod, kind="reset_gpu", payload={"gpu_index": 0})
    _run(live_server.url)
    for c in (cmd, reset, vf_reset, vf_type):
        c.refresh_from_db()
    assert (cmd.status, reset.status, vf_reset.status, vf_type.status) == ("succeeded",) * 4, (
        cmd.result, reset.result, vf_reset.error, vf_type.error)
    assert list(GpuInstance.objects.filter(gpu__host=mig).values_list("gpu__index", "profile")) == [(1, "3g.40gb")]
    assert AgentCommand.objects.get(pk=foreign.pk).status == "queued"  # not a demo host: its own agent runs it

    # a restart re-enrolls with the recorded layout: no drift, no restore command
    _run(live_server.url)
    assert not AgentCommand.objects.filter(host=mig, kind="apply_mig_layout").exists()



def test_demo_agents_heartbeat_so_the_hosts_are_not_lost(live_server):
    """Enrolled demo hosts heartbeat like the real agent (enrollment alone leaves the host silent from then on,
    and the `heartbeat_lost` watch cordoned every demo host five minutes after `make run` started): a pass of
    the demo agents records the host's credential as seen (only a heartbeat does), and the last-seen flush
    moves the host's `last_heartbeat_at` forward."""
    import datetime as dt

    from apps.core.clock import now
    from apps.inventory.models import AgentCredential, Host
    from apps.inventory.services.last_seen import agent_last_seen_flush

    mig = make_host("demo-beat", gpus=1, libvirt_uri="test:///default", driver_version="550.90.07")
    mig.gpus.update(mode="mig")
    agent_last_seen_flush()  # nothing batched before the pass
    out = io.StringIO()
    call_command("demo_agents", url=live_server.url, once=True, interval=0, heartbeat_interval=0, stdout=out,
                 stderr=out)
    assert "agent enrolled on demo-beat" in out.getvalue() and "heartbeat failed" not in out.getvalue()
    Host.objects.filter(pk=mig.pk).update(last_heartbeat_at=now() - dt.timedelta(hours=1))
    assert agent_last_seen_flush() == 1  # the heartbeat of the pass, batched
    mig.refresh_from_db()
    assert now() - mig.last_heartbeat_at < dt.timedelta(minutes=1)
    assert AgentCredential.objects.get(host=mig, revoked_at__isnull=True).last_seen_at is not None


def test_demo_fleet_places_every_demo_flavor_every_host_heartbeats_and_one_gpu_is_faulty(live_server):
    """What `make run` starts (`demo_load`, then `demo_agents`): the L40S hosts report their GPUs' SR-IOV VFs (32
    each, the catalog's), so the L40S vGPU flavor places like the MIG and whole-GPU ones (it never could: no VF);
    every demo host has an agent and a heartbeat (a-su1-n01 showed "never": only MIG hosts enrolled at start);
    a-su1-n03's agent reports XID 79 on GPU 5 through the agent API: a health event, the GPU faulty with an
    incident, the host cordoned; a restart reports it again and nothing new is recorded."""
    import importlib

    from django.apps import apps

    from apps.compute.models import Flavor
    from apps.health.models import HealthEvent
    from apps.identity.models import User
    from apps.inventory.models import Gpu, Host, Incident
    from apps.tenancy.models import Project
    from tests.tenancy.helpers import client_for, token_for

    importlib.import_module("apps.billing.migrations.0002_defaults_and_guards").seed(apps, None)  # flushed here
    call_command("demo_load", stdout=io.StringIO())
    out = _run(live_server.url)
    demo = Host.objects.filter(libvirt_uri__startswith="test:///")
    assert f"demo agents: {demo.count()} of {demo.count()} demo hosts enrolled (18 with SR-IOV VFs)" in out, out
    assert not demo.filter(last_heartbeat_at__isnull=True).exists()
    assert Host.objects.get(name="a-su1-n01").last_heartbeat_at is not None
    assert VirtualFunction.objects.filter(gpu__host__name="b-l40s-n01").count() == 4 * 32

    project = Project.objects.get(slug="demo", organization__slug="demo")
    client = client_for(token_for(User.objects.get(email="demo@example.com"), project=project))
    for name in ("l40s-vgpu-4q", "h100-mig-3g40", "h200-mig-3g71", "h100-1x", "h100-8x"):
        checked = client.post("/api/v1/instances/check/", {"project": str(project.pk), "name": "",
                                                           "flavor": str(Flavor.objects.get(name=name).pk)},
                              format="json").json()
        assert checked["placeable"] is True, (name, checked)

    (event,) = HealthEvent.objects.filter(host__name="a-su1-n03")
    assert (event.kind, event.xid, event.gpu.index) == ("xid", 79, 5)
    gpu = Gpu.objects.get(host__name="a-su1-n03", index=5)
    assert gpu.health == "faulty"
    assert Incident.objects.filter(gpu=gpu, end__isnull=True).exists()
    host = Host.objects.get(name="a-su1-n03")
    assert host.state == "cordoned" and host.state_reason
    assert "a-su1-n03: agent reported XID 79 on GPU 5" in out
    assert Gpu.objects.filter(health="faulty").count() == 1

    _run(live_server.url)   # `make run` again: the same signal, recorded once
    assert HealthEvent.objects.filter(host__name="a-su1-n03").count() == 1
