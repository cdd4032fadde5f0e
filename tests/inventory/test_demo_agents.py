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
