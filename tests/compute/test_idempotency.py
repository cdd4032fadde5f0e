"""`Idempotency-Key` on every create, through the one layer in `apps.core.idempotency`.

Found when the product was probed: the schema promised the header on cluster create but nothing implemented it,
and instances and billing each had their own version. A client that retries a create (a lost response, a
timeout, a broker outage) must get the first answer back and create nothing new; the same key with another
body is refused; concurrent requests with one key create one object.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest
from django.db import connection

from apps.billing.models import InvoiceRun
from apps.compute.models import Cluster, Instance, SshKey
from apps.core.models import IdempotencyKey
from apps.identity.models import ApiToken, StaffRole
from apps.networking import services as net
from apps.networking.models import IbPartition, PublicIp, SecurityGroup, SecurityGroupRule, Subnet, Vpc
from apps.reservations.models import Lease, WebhookEndpoint
from apps.tenancy.models import Project
from tests.compute.conftest import ED25519, gpu_host
from tests.compute.test_clusters import _cabled_hosts
from tests.networking.helpers import ib_fabric
from tests.tenancy.helpers import client_for, make_user, token_for

pytestmark = pytest.mark.django_db


@dataclass
class Create:
    client: object
    url: str
    body: dict
    other: dict
    model: type


def _vpc(w, name="v"):
    return net.vpc_create(actor=None, project=w.project_a, name=name, cidr="10.0.0.0/16")


def _ssh_keys(w):
    body = {"project": str(w.project_a.pk), "name": "laptop", "public_key": ED25519}
    return Create(w.client_a, "/api/v1/ssh-keys/", body, {**body, "name": "desk"}, SshKey)


def _instances(w):
    gpu_host()
    body = {"project": str(w.project_a.pk), "name": "vm-1", "flavor": str(w.cpu.pk), "image": str(w.image.pk)}
    return Create(w.client_a, "/api/v1/instances/", body, {**body, "name": "vm-2"}, Instance)


def _clusters(w):
    _cabled_hosts(3)  # room for the gang and for the other body's size 3
    body = {"project": str(w.project_a.pk), "name": "train", "flavor": str(w.cpu.pk), "image": str(w.image.pk),
            "size": 2}
    return Create(w.client_a, "/api/v1/clusters/", body, {**body, "size": 3}, Cluster)


def _leases(w):
    gpu_host()
    body = {"project": str(w.project_a.pk), "name": "l1", "kind": "gpus", "gpu_model": "H100-SXM5-80GB",
            "count": 1, "start": "2030-03-01T10:00:00Z", "end": "2030-03-01T12:00:00Z"}
    return Create(w.client_a, "/api/v1/leases/", body, {**body, "name": "l2"}, Lease)


def _vpcs(w):
    body = {"project": str(w.project_a.pk), "name": "main", "cidr": "10.0.0.0/16"}
    return Create(w.client_a, "/api/v1/vpcs/", body, {**body, "cidr": "10.1.0.0/16"}, Vpc)


def _subnets(w):
    body = {"vpc": str(_vpc(w).pk), "name": "a", "cidr": "10.0.1.0/24"}
    return Create(w.client_a, "/api/v1/subnets/", body, {**body, "cidr": "10.0.2.0/24"}, Subnet)


def _security_groups(w):
    body = {"vpc": str(_vpc(w).pk), "name": "web"}
    return Create(w.client_a, "/api/v1/security-groups/", body, {**body, "name": "db"}, SecurityGroup)


def _security_group_rules(w):
    group = net.security_group_create(actor=None, vpc=_vpc(w), name="web")
    body = {"security_group": str(group.pk), "direction": "ingress", "protocol": "tcp", "port_range_min": 22,
            "port_range_max": 22, "remote_ip_prefix": "0.0.0.0/0"}
    return Create(w.client_a, "/api/v1/security-group-rules/", body, {**body, "port_range_min": 443,
                                                                       "port_range_max": 443}, SecurityGroupRule)


def _public_ips(w):
    net.public_ip_pool_create(actor=None, name="ext", cidr="203.0.113.0/24", first_ip="203.0.113.10",
                              last_ip="203.0.113.20", gateway_ip="203.0.113.1")
    vpc, other = _vpc(w), _vpc(w, "v2")
    body = {"vpc": str(vpc.pk), "pool": "ext"}
    return Create(w.client_a, "/api/v1/public-ips/", body, {**body, "vpc": str(other.pk)}, PublicIp)


def _ib_partitions(w):
    fabric = ib_fabric()
    body = {"project": str(w.project_a.pk), "fabric": fabric.name, "name": "p1"}
    return Create(w.client_a, "/api/v1/ib-partitions/", body, {**body, "name": "p2"}, IbPartition)


def _tokens(w):
    body = {"name": "ci", "scope": "read", "organization": str(w.org_a.pk)}
    return Create(w.client_a, "/api/v1/tokens/", body, {**body, "name": "cd"}, ApiToken)


def _projects(w):
    body = {"organization": str(w.org_b.pk), "slug": "staging", "name": "Staging"}   # user b owns org b
    return Create(w.client_b, "/api/v1/projects/", body, {**body, "slug": "prod"}, Project)


def _webhooks(w):
    body = {"organization": str(w.org_b.pk), "url": "https://hooks.example.com/a"}
    return Create(w.client_b, "/api/v1/webhooks/", body, {**body, "url": "https://hooks.example.com/b"},
                  WebhookEndpoint)


def _invoice_runs(w):
    admin = client_for(token_for(make_user("billing@provider.test", staff_role=StaffRole.BILLING_ADMIN),
                                 staff=True))
    return Create(admin, "/api/v1/invoice-runs/", {"period": "2026-02"}, {"period": "2026-01"}, InvoiceRun)


CREATES = [_ssh_keys, _instances, _clusters, _leases, _vpcs, _subnets, _security_groups, _security_group_rules,
           _public_ips, _ib_partitions, _tokens, _projects, _webhooks, _invoice_runs]


def _id(body: dict) -> str:
    return (body.get("instance") or body)["id"]


@pytest.mark.parametrize("case", CREATES, ids=lambda c: c.__name__.strip("_"))
def test_a_retry_returns_the_first_answer_and_creates_nothing(world, case):
    c = case(world)
    first = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert 200 <= first.status_code < 300, first.content
    count = c.model.objects.count()
    again = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert again.status_code == first.status_code
    assert _id(again.json()) == _id(first.json())
    assert again["Idempotent-Replayed"] == "true"
    assert again.get("Location") == first.get("Location")
    assert c.model.objects.count() == count
    other = c.client.post(c.url, c.other, format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (other.status_code, other.json()["code"]) == (422, "idempotency_key_reused")
    assert c.model.objects.count() == count


def test_instance_replay_is_the_same_operation(world):
    c = _instances(world)
    first = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="op")
    again = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="op")
    assert again.json()["operation"]["id"] == first.json()["operation"]["id"]
    assert again["Location"] == f"/api/v1/operations/{first.json()['operation']['id']}"


def test_the_key_is_scoped_to_the_caller(world):
    body_b = {"project": str(world.project_b.pk), "name": "laptop", "public_key": ED25519}
    a = world.client_a.post("/api/v1/ssh-keys/", _ssh_keys(world).body, format="json", HTTP_IDEMPOTENCY_KEY="same")
    b = world.client_b.post("/api/v1/ssh-keys/", body_b, format="json", HTTP_IDEMPOTENCY_KEY="same")
    assert a.status_code == b.status_code == 201 and a.json()["id"] != b.json()["id"]


def test_a_failed_request_stores_nothing_and_a_corrected_retry_runs(world):
    c = _vpcs(world)
    bad = c.client.post(c.url, {**c.body, "cidr": "not-a-cidr"}, format="json", HTTP_IDEMPOTENCY_KEY="fix")
    assert bad.status_code == 400 and not IdempotencyKey.objects.exists()
    good = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="fix")
    assert good.status_code == 201 and Vpc.objects.count() == 1


def test_a_malformed_key_is_400_and_nothing_is_written(world):
    c = _vpcs(world)
    r = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="x" * 256)
    assert (r.status_code, r.json()["code"]) == (400, "invalid_idempotency_key")
    assert not Vpc.objects.exists()


def test_a_token_replay_never_shows_or_stores_the_secret(world):
    c = _tokens(world)
    first = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="t")
    secret = first.json()["token"]
    assert secret
    again = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="t")
    assert again.json()["id"] == first.json()["id"] and again.json()["token"] is None
    assert secret not in str(list(IdempotencyKey.objects.values_list("response_body", flat=True)))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("case", [_vpcs, _instances], ids=["vpcs", "instances"])
def test_concurrent_requests_with_one_key_create_one(world, case):
    c = case(world)
    barrier, results = threading.Barrier(6), []

    def post():
        try:
            barrier.wait()
            r = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="race")
            results.append((r.status_code, _id(r.json())))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.model.objects.count() == 1
    assert len(results) == 6 and len({r for r in results}) == 1 and 200 <= results[0][0] < 300


def test_expired_keys_are_purged_by_beat_and_live_ones_kept(world, settings):
    """Keys were never deleted: the table grew by one row per retried create, forever. The beat task deletes
    those older than `IDEMPOTENCY_KEY_TTL_HOURS` (a setting), keeps the live ones, and a second run is a no-op."""
    import datetime as dt

    import time_machine

    from apps.core.tasks import idempotency_keys_purge_task
    from gpucloud.celery import app, collect_beat_schedule

    settings.IDEMPOTENCY_KEY_TTL_HOURS = 2
    c = _vpcs(world)
    young = {**c.body, "name": "second", "cidr": "10.1.0.0/16"}
    t0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)
    with time_machine.travel(t0, tick=False) as clock:
        assert c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="old").status_code == 201
        clock.move_to(t0 + dt.timedelta(hours=1, minutes=30))
        assert c.client.post(c.url, young, format="json", HTTP_IDEMPOTENCY_KEY="young").status_code == 201
        clock.move_to(t0 + dt.timedelta(hours=2, minutes=1))
        assert idempotency_keys_purge_task.apply().get() == 1
        assert list(IdempotencyKey.objects.values_list("key", flat=True)) == ["young"]
        assert idempotency_keys_purge_task.apply().get() == 0
        # The purged key is new again: the same body now conflicts on the VPC's name, not a replay.
        again = c.client.post(c.url, c.body, format="json", HTTP_IDEMPOTENCY_KEY="old")
        assert again.status_code == 409 and "Idempotent-Replayed" not in again
        # The live one still replays.
        replay = c.client.post(c.url, young, format="json", HTTP_IDEMPOTENCY_KEY="young")
        assert replay["Idempotent-Replayed"] == "true"
    beat = collect_beat_schedule()["core-idempotency-keys-purge"]
    app.loader.import_default_modules()
    assert beat["task"] == "core.idempotency_keys_purge_task" and beat["task"] in app.tasks
    assert beat["schedule"] == 3600.0


def test_the_purge_works_in_batches(world):
    import datetime as dt

    from apps.core.clock import now
    from apps.core.idempotency import idempotency_keys_purge

    old = now() - dt.timedelta(days=3)
    IdempotencyKey.objects.bulk_create(
        IdempotencyKey(caller="u", endpoint="POST /x", key=f"k{i}", request_hash="h", response_status=201,
                       created_at=old) for i in range(7))
    assert idempotency_keys_purge(batch_size=3) == 7
    assert not IdempotencyKey.objects.exists()
