"""The GPU scrub state machine: which agent commands a scrub queues and in which order, how the agent's reports
move the GPU (`dirty` -> `clean` or `scrub_failed`), holds, re-queueing a failed scrub, and mark-available."""
import pytest

from apps.audit.models import AuditEvent
from apps.core.errors import Conflict
from apps.inventory.models import AgentCommand, AgentCredential, GpuInstance, Incident
from apps.inventory.services.agent import agent_command_report
from apps.inventory.services.hosts import gpu_mark_faulty, gpu_mark_healthy, host_cordon, host_mark_available
from apps.inventory.services.scrub import gpu_scrub_retry, gpus_hold_dirty, gpus_scrub

from .helpers import make_host

pytestmark = pytest.mark.django_db


def _report(host, cmd, succeeded=True, result=None, error=""):
    cred = AgentCredential.objects.filter(host=host).first() or AgentCredential.objects.create(
        host=host, prefix=f"t{host.pk.hex[:12]}", secret_hash="x")
    agent_command_report(credential=cred, command_id=cmd if isinstance(cmd, str) else cmd.pk,
                         succeeded=succeeded, result=result or {}, error=error)


def _kinds(host):
    return [(c.kind, c.payload.get("gpu_index", c.payload.get("partition_id")))
            for c in AgentCommand.objects.filter(host=host).order_by("created_at")]


def test_partition_then_resets_in_order_and_clean_only_when_every_check_passed():
    host = make_host("s1", gpus=2, nvswitch_system="hgx-h100-8gpu", active_partitions=[3])
    names = gpus_scrub(actor=None, host=host, gpu_indexes=[0, 1], partitions=[3], reason="test")
    assert list(names) == ["partition_deactivate_3", "reset_0", "reset_1"]
    assert _kinds(host) == [("deactivate_partition", 3), ("reset_gpu", 0), ("reset_gpu", 1)]
    assert gpus_scrub(actor=None, host=host, gpu_indexes=[0, 1], partitions=[3], reason="again") == names
    assert AgentCommand.objects.filter(host=host).count() == 3  # idempotent: the queued commands are reused
    g0, g1 = host.gpus.order_by("index")
    assert (g0.scrub_state, g0.scrub_commands) == ("dirty", [names["partition_deactivate_3"], names["reset_0"]])

    _report(host, names["partition_deactivate_3"], result={"active_partitions": []})
    _report(host, names["reset_0"], result={"health": "ok"})
    _report(host, names["reset_1"], result={"health": "degraded"})
    g0.refresh_from_db()
    g1.refresh_from_db()
    assert (g0.scrub_state, g0.scrub_commands, g0.scrub_reason) == ("clean", [], "")
    assert (g1.scrub_state, g1.scrub_reason) == ("scrub_failed", "health check after reset: degraded")
    assert list(AuditEvent.objects.filter(action__startswith="inventory.gpu.scrub").order_by("id")
                .values_list("action", flat=True)) == ["inventory.gpu.scrub_queued", "inventory.gpu.scrub_queued",
                                                       "inventory.gpu.scrub_clean", "inventory.gpu.scrub_failed"]

    host_cordon(actor=None, host=host, reason="check")
    with pytest.raises(Conflict) as exc:
        host_mark_available(actor=None, host=host, reason="back")
    assert (exc.value.code, exc.value.extra["gpus"]) == ("gpu_scrub_pending", [
        {"index": 1, "scrub_state": "scrub_failed", "scrub_reason": "health check after reset: degraded"}])
    host.refresh_from_db()
    assert host.state == "cordoned"

    with pytest.raises(Conflict) as exc:
        gpu_scrub_retry(actor=None, gpu=g0, reason="clean already")
    assert exc.value.code == "gpu_scrub_not_failed"
    g1 = gpu_scrub_retry(actor=None, gpu=g1, reason="reseated")
    (again,) = AgentCommand.objects.filter(host=host, status="queued")
    assert (g1.scrub_state, g1.scrub_commands, again.kind) == (  # the steps that passed are kept
        "dirty", [names["partition_deactivate_3"], str(again.pk)], "reset_gpu")
    _report(host, again, result={"health": "ok"})
    g1.refresh_from_db()
    assert g1.scrub_state == "clean"
    assert host_mark_available(actor=None, host=host, reason="back").state == "available"


def test_mig_gpu_destroys_the_tenants_gpu_instance_only_and_a_failed_destroy_fails_the_scrub():
    host = make_host("s2", gpus=1)
    gpu = host.gpus.get()
    gpu.mode = "mig"
    gpu.save(update_fields=["mode"])
    for start in (0, 4):
        GpuInstance.objects.create(gpu=gpu, profile_id=9, profile="3g.40gb", start=start, size=4)
    names = gpus_scrub(actor=None, host=host, gpu_indexes=[0], gpu_instances=[(0, 4)], reason="t")
    assert list(names) == ["gpu_instance_destroy_0_4"]  # no reset: the instance at 0 may be another tenant's
    _report(host, names["gpu_instance_destroy_0_4"], succeeded=False, error="In use by another client")
    gpu.refresh_from_db()
    assert (gpu.scrub_state, gpu.scrub_reason) == ("scrub_failed",
                                                   "destroy_gpu_instance failed: In use by another client")
    gpu = gpu_scrub_retry(actor=None, gpu=gpu, reason="client gone")
    (again,) = AgentCommand.objects.filter(host=host, status="queued")
    assert (again.kind, again.payload["start"]) == ("destroy_gpu_instance", 4)
    _report(host, again)
    gpu.refresh_from_db()
    assert gpu.scrub_state == "clean"
    assert list(GpuInstance.objects.filter(gpu=gpu).values_list("start", flat=True)) == [0]


def test_a_hold_stays_dirty_until_the_scrub_of_its_workflow_and_ends_where_there_is_nothing_to_do():
    host = make_host("s3", gpus=2)
    g0, g1 = host.gpus.order_by("index")
    g1.mode = "vgpu"
    g1.save(update_fields=["mode"])
    assert gpus_hold_dirty(actor=None, host=host, gpu_indexes=[1], pci_addresses=[g0.pci_address],
                           reason="lease ended") == 2
    g0.refresh_from_db()
    assert (g0.scrub_state, g0.scrub_commands) == ("dirty", [])
    names = gpus_scrub(actor=None, host=host, gpu_indexes=[0, 1], reason="deleted")
    assert list(names) == ["reset_0"]
    g1.refresh_from_db()
    assert g1.scrub_state == "clean"  # a vGPU-mode GPU has no agent step: the hold ends with the scrub
    _report(host, names["reset_0"], result={"health": "ok"})
    g0.refresh_from_db()
    assert g0.scrub_state == "clean"


def test_a_faulty_gpus_scrub_cleans_it_but_only_staff_return_it_to_service():
    """The scrub after a VM moved off a GPU that failed (XID 48: faulty, incident open) passes its reset's health
    check: the GPU is clean but stays faulty, its incident open, until staff mark it healthy."""
    host = make_host("s4", gpus=2)
    g0, g1 = host.gpus.order_by("index")
    gpu_mark_faulty(actor=None, gpu=g0, reason="XID 48")
    names = gpus_scrub(actor=None, host=host, gpu_indexes=[0, 1], partitions=[], reason="vm moved off")
    _report(host, names["reset_0"], result={"health": "ok"})
    _report(host, names["reset_1"], result={"health": "ok"})
    g0.refresh_from_db()
    g1.refresh_from_db()
    assert (g0.scrub_state, g0.health, g1.scrub_state, g1.health) == ("clean", "faulty", "clean", "ok")
    assert Incident.objects.filter(gpu=g0, end__isnull=True).count() == 1
    gpu_mark_healthy(actor=None, gpu=g0, reason="replaced")
    g0.refresh_from_db()
    assert g0.health == "ok" and not Incident.objects.filter(gpu=g0, end__isnull=True).exists()
