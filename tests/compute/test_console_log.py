"""GET /instances/{id}/console-log is read by a worker (the process that holds the hypervisor's connection), never
by the web process, and answers every state with a stable problem+json code instead of a 500: 409
`domain_not_defined` before the instance has a domain, 404 when the instance does not exist (or is another
tenant's) and `domain_not_found` when its domain is gone, 503 when the hypervisor or the worker cannot answer."""
import pytest

from apps.compute.drivers.fake import FakeDriver
from apps.compute.models import Instance
from apps.compute.services.instances import console_log_read
from gpucloud.celery import app as celery_app

from .conftest import create_body, drive, gpu_host, new_uuid

pytestmark = pytest.mark.django_db


def _instance(world, host, status="error") -> Instance:
    return Instance.objects.create(project=world.project_a, name="vm", flavor=world.cpu, image=world.image,
                                   status=status, host=host)


def _get(world, pk, client=None):
    r = (client or world.client_a).get(f"/api/v1/instances/{pk}/console-log/")
    body = r.json()
    return r.status_code, (body.get("code") if r.status_code != 200 else body["log"]), r["Content-Type"]


def test_console_log_of_a_running_instance_is_read_by_the_worker(world):
    gpu_host(gpus=0)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu, name="web-1"), format="json")
    assert drive(resp.data["operation"]["id"]).status == "succeeded"
    pk = resp.data["instance"]["id"]
    status, log, _ = _get(world, pk)
    assert (status, log) == (200, f"{pk} login: \n")
    assert _get(world, pk, world.client_b)[:2] == (404, "not_found")  # another tenant's: as a missing one


@pytest.mark.parametrize("status", ["pending", "provisioning"])
def test_no_domain_yet_is_409(world, status):
    unplaced = _instance(world, None, status=status)
    assert _get(world, unplaced.pk) == (409, "domain_not_defined", "application/problem+json")
    claimed = Instance.objects.create(project=world.project_a, name="vm-2", flavor=world.cpu, image=world.image,
                                      status=status, host=gpu_host(gpus=0))
    assert _get(world, claimed.pk)[:2] == (409, "domain_not_defined")


def test_missing_instance_and_gone_domain_are_404(world):
    assert _get(world, new_uuid())[:2] == (404, "not_found")
    vanished = _instance(world, gpu_host(gpus=0))  # e.g. lost with a restarted test hypervisor
    assert _get(world, vanished.pk) == (404, "domain_not_found", "application/problem+json")
    deleted = Instance.objects.create(project=world.project_a, name="gone", flavor=world.cpu, image=world.image,
                                      status="deleted", host=vanished.host)
    assert _get(world, deleted.pk)[:2] == (404, "domain_not_found")


def test_console_log_of_a_host_without_a_hypervisor_uri_is_503(world):
    from tests.scheduling import fleet

    inst = _instance(world, fleet.host(gpus=0), status="active")
    assert _get(world, inst.pk)[:2] == (503, "service_unavailable")


def test_unreachable_hypervisor_is_503(world):
    host = gpu_host(gpus=0)
    resp = world.client_a.post("/api/v1/instances/", create_body(world, world.cpu), format="json")
    drive(resp.data["operation"]["id"])
    FakeDriver.unreachable.add(host.libvirt_uri)
    assert _get(world, resp.data["instance"]["id"])[:2] == (503, "service_unavailable")


def test_an_unreadable_serial_log_is_console_log_unavailable(world, settings, monkeypatch, tmp_path):
    """On libvirt's test driver (in this process, the worker's): a log the worker cannot read (here a directory
    where the file should be) is an OSError in the worker, answered as 503 `console_log_unavailable` (it was a
    500), and the domain's own log is served once it is a file."""
    import uuid

    from apps.compute.drivers.base import DomainSpec
    from apps.compute.services.hypervisor import driver_for_host, forget_drivers

    settings.DRIVERS = {"compute": "apps.compute.drivers.libvirt:LibvirtDriver"}
    monkeypatch.setenv("COMPUTE_SEED_DIR", str(tmp_path))
    forget_drivers()
    try:
        inst = _instance(world, gpu_host(uri=f"test://{tmp_path / 'none.xml'}", gpus=0), status="active")
        inst.host.libvirt_uri = "test:///default"
        inst.host.save(update_fields=["libvirt_uri"])
        driver_for_host(inst.host).domain_define(DomainSpec(uuid=uuid.UUID(str(inst.pk)), vcpus=1, memory_mib=64))
        log = tmp_path / f"{inst.pk}-serial.log"
        log.mkdir()
        assert _get(world, inst.pk)[:2] == (503, "console_log_unavailable")
        assert console_log_read(instance_id=inst.pk)["error"] == "console_log_unavailable"
        log.rmdir()
        log.write_text("Ubuntu 24.04 LTS vm ttyS0\n")
        assert _get(world, inst.pk)[:2] == (200, "Ubuntu 24.04 LTS vm ttyS0\n")
        driver_for_host(inst.host).domain_delete(inst.pk)
    finally:
        forget_drivers()


@pytest.mark.django_db(transaction=True)
def test_no_worker_answering_is_503(world, monkeypatch):
    """Sent for real (not run inline) to the test's own Redis database, where no worker consumes: the request
    gives up after COMPUTE_CONSOLE_LOG_TIMEOUT_S."""
    monkeypatch.setenv("COMPUTE_CONSOLE_LOG_TIMEOUT_S", "0.5")
    inst = _instance(world, gpu_host(gpus=0), status="active")
    celery_app.conf.task_always_eager = False
    try:
        assert _get(world, inst.pk)[:2] == (503, "service_unavailable")
    finally:
        celery_app.conf.task_always_eager = True
        with celery_app.connection_for_write() as conn:
            conn.default_channel.queue_purge("provisioning")
