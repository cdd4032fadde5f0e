"""`manage.py demo_agents` against the live test server: demo MIG hosts enroll with their SR-IOV VFs, queued commands
are executed and reported, and hosts outside the demo (not `test:///`) are never touched."""
import io

import pytest
from django.core.management import call_command

from apps.inventory.models import AgentCommand, AgentCredential, GpuInstance, VirtualFunction
from apps.inventory.services.agent import agent_command_enqueue

from .helpers import make_host

pytestmark = pytest.mark.django_db(transaction=True)


def _run(url) -> str:
    out = io.StringIO()
    call_command("demo_agents", url=url, once=True, interval=0, stdout=out, stderr=out)
    return out.getvalue()


def test_demo_mig_host_enrolls_with_vfs_and_runs_commands(live_server):
    mig = make_host("demo-mig", gpus=2, libvirt_uri="test:///default", driver_version="550.90.07")
    mig.gpus.update(mode="mig")
    plain = make_host("demo-plain", gpus=2, libvirt_uri="test:///default")
    prod = make_host("prod-mig", gpus=2, libvirt_uri="qemu+tls://prod-mig/system", driver_version="550.90.07")
    prod.gpus.update(mode="mig")

    out = _run(live_server.url)
    assert "agent enrolled on demo-mig" in out and "prod-mig" not in out and "demo-plain" not in out
    assert VirtualFunction.objects.filter(gpu__host=mig).count() == 2 * 4
    assert not VirtualFunction.objects.filter(gpu__host=prod).exists()
    assert set(mig.gpus.values_list("mode", flat=True)) == {"mig"}
    assert not AgentCredential.objects.filter(host__in=[plain, prod]).exists()

    cmd = agent_command_enqueue(actor=None, host=mig, kind="create_gpu_instance",
                                payload={"gpu_index": 1, "profile": "3g.40gb"})
    reset = agent_command_enqueue(actor=None, host=plain, kind="reset_gpu", payload={"gpu_index": 0})
    foreign = agent_command_enqueue(actor=None, host=prod, kind="reset_gpu", payload={"gpu_index": 0})
    out = _run(live_server.url)
    assert "agent enrolled on demo-plain" in out
    cmd.refresh_from_db()
    reset.refresh_from_db()
    assert (cmd.status, reset.status) == ("succeeded", "succeeded"), (cmd.result, reset.result)
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
