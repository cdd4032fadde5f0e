"""The demo bare metal that `make run` loads (`manage.py demo_load`, apps/baremetal/demo.py): two whole-host H100
servers imported into the sample fleet and enrolled as fake-hardware nodes while Ironic is still starting (their
enroll operations wait for it), a priced bare-metal flavor, and the demo tenant deploying one through the API
and deleting it, with its receipt. Loading again adds nothing."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from apps.baremetal.demo import FLAVOR
from apps.baremetal.models import BaremetalNode, ExitReceipt
from apps.compute.models import Image, Instance
from apps.identity.models import User
from apps.inventory.models import Host
from apps.operations.models import Operation
from apps.tenancy.models import Project
from tests.billing.conftest import tiers  # noqa: F401  (fixture)
from tests.tenancy.helpers import client_for, token_for

from .conftest import drive

pytestmark = pytest.mark.django_db

HOSTS = ["b-bm-n01", "b-bm-n02"]


def test_without_ironic_in_the_run_the_demo_hosts_are_imported_not_enrolled(bm_driver, tiers, monkeypatch):  # noqa: F811
    monkeypatch.setenv("DEMO_PASSWORD", "demo-bare-metal-test")
    out = io.StringIO()
    call_command("demo_load", stdout=out)
    assert "baremetal: 2 demo hosts (not enrolled: no Ironic in this run); flavor bm-h100-8x created" \
        in out.getvalue(), out.getvalue()
    assert set(Host.objects.filter(name__in=HOSTS).values_list("state", flat=True)) == {"enrolling"}
    assert not BaremetalNode.objects.exists() and not _enroll_ops()


def _enroll_ops():
    return list(Operation.objects.filter(kind="baremetal.node.enroll").order_by("created_at"))


def test_make_run_demo_enrolls_hosts_while_ironic_starts_and_the_demo_tenant_deploys_one(
        bm_driver, tiers, monkeypatch, settings):  # noqa: F811
    monkeypatch.setenv("DEMO_PASSWORD", "demo-bare-metal-test")
    settings.BAREMETAL_DEMO_ENROLL = True  # scripts/run.sh: this run starts Ironic
    bm_driver.service_up = False  # `make run` loads the demo before its Ironic answers
    out = io.StringIO()
    call_command("demo_load", stdout=out)
    assert "baremetal: 2 demo hosts (b-bm-n01, b-bm-n02 enrolling into Ironic, fake-hardware); flavor bm-h100-8x " \
           "created" in out.getvalue(), out.getvalue()
    hosts = Host.objects.filter(name__in=HOSTS).order_by("name")
    assert [(h.provisioning_kind, h.state, h.gpus.count(), h.nics.count()) for h in hosts] == [
        ("baremetal", "enrolling", 8, 1)] * 2
    assert sorted(BaremetalNode.objects.values_list("host__name", "driver")) == [(h, "fake-hardware") for h in HOSTS]
    ops = _enroll_ops()
    assert len(ops) == 2
    for op in ops:  # Ironic does not answer yet: the enroll step waits (retried), nothing fails
        assert drive(op.pk, max_steps=3).status not in ("failed", "succeeded")
    assert set(Host.objects.filter(name__in=HOSTS).values_list("state", flat=True)) == {"enrolling"}

    bm_driver.service_up = True  # Ironic is up
    assert [drive(op.pk).status for op in ops] == ["succeeded"] * 2
    assert set(Host.objects.filter(name__in=HOSTS).values_list("state", flat=True)) == {"available"}
    assert set(BaremetalNode.objects.values_list("provision_state", flat=True)) == {"available"}

    # loaded again (the next `make run`): nothing added, no second enrollment
    out = io.StringIO()
    call_command("demo_load", stdout=out)
    assert "baremetal: 2 demo hosts (none enrolling into Ironic, fake-hardware); flavor bm-h100-8x present" \
        in out.getvalue(), out.getvalue()
    assert len(_enroll_ops()) == 2 and BaremetalNode.objects.count() == 2

    # the demo tenant finds the flavor with its price, deploys it, sees it active, deletes it, gets its receipt
    project = Project.objects.get(organization__slug="demo", slug="demo")
    client = client_for(token_for(User.objects.get(email="demo@example.com"), project=project))
    flavors = client.get("/api/v1/flavors/", {"name": FLAVOR["name"]}).json()["results"]
    assert [(f["kind"], f["gpu_count"], f["prices"][0]["on_demand_per_hour"]) for f in flavors] == [
        ("baremetal", 8, "21.12")]
    resp = client.post("/api/v1/instances/", {"name": "bm-demo", "flavor": flavors[0]["id"],
                                              "image": str(Image.objects.get(name="ubuntu-24-04").pk)},
                       format="json")
    assert resp.status_code == 202, resp.content
    inst_id = resp.json()["instance"]["id"]
    assert drive(resp.json()["operation"]["id"]).status == "succeeded"
    inst = client.get(f"/api/v1/instances/{inst_id}/").json()
    assert inst["status"] == "active"
    assert Instance.objects.get(pk=inst_id).host.name in HOSTS
    resp = client.delete(f"/api/v1/instances/{inst_id}/")
    assert resp.status_code == 202, resp.content
    assert drive(resp.json()["operation"]["id"]).status == "succeeded"
    assert client.get(f"/api/v1/instances/{inst_id}/").json()["status"] == "deleted"
    assert ExitReceipt.objects.filter(instance_id=inst_id).count() == 1
    assert set(Host.objects.filter(name__in=HOSTS).values_list("state", flat=True)) == {"available"}

    # the demo hosts have no InfiniBand HCA: the demo partition is refused by placement, nothing written
    from apps.networking.models import IbPartition

    part = IbPartition.objects.get(project=project, name="demo-train")
    resp = client.post("/api/v1/instances/", {"name": "bm-ib", "flavor": flavors[0]["id"], "ib_partition_id": str(
        part.pk), "image": str(Image.objects.get(name="ubuntu-24-04").pk)}, format="json")
    assert (resp.status_code, resp.json()["code"]) == (422, "unplaceable"), resp.content
    assert not Instance.objects.filter(name="bm-ib").exists()
