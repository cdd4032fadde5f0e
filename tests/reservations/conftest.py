"""Reservations test world: compute's world (two organizations, flavors, image, fake compute driver) plus helpers
to build hosts, move the clock and run lease / queue ticks. Real PostgreSQL rows, real ledger, real runner."""
from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from apps.compute.models import Flavor
from apps.reservations.services.leases import lease_create
from tests.compute.conftest import drive, fake_driver, gpu_host, world  # noqa: F401  (fixtures)

T0 = dt.datetime(2026, 3, 1, 8, 0, tzinfo=dt.UTC)


@pytest.fixture
def clock():
    """A controllable clock starting at T0 (2026-03-01 08:00 UTC); `clock.move_to(x)` moves it."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def finish(op_id, rounds: int = 8):
    """Drive an operation with the real runner, completing the agent commands it waits for (NVSwitch partition
    activation, the GPU scrub after a release) as a healthy agent would. Returns the operation."""
    from apps.inventory.models import AgentCommand
    from apps.operations.models import TERMINAL
    from tests.compute.test_instance_lifecycle import _agent_complete

    op = None
    for _ in range(rounds):
        op = drive(op_id)
        for cmd in AgentCommand.objects.filter(status="queued").select_related("host"):
            part = cmd.payload.get("partition_id")
            result = {"active_partitions": [part] if cmd.kind == "activate_partition" else []} if part or \
                "partition" in cmd.kind else {"health": "ok", "gi_id": 1}
            _agent_complete(cmd.host, [cmd], result)
        if op.status in TERMINAL:  # the scrub a delete queued is completed too (the GPU is clean again)
            return op
    return op


def at(hh: int, mm: int = 0, day: int = 1) -> dt.datetime:
    return dt.datetime(2026, 3, day, hh, mm, tzinfo=dt.UTC)


def lease(project, *, start, end, kind="gpus", count=8, name="l1", **kw):
    return lease_create(actor=None, project=project, name=name, start=start, end=end, kind=kind,
                        gpu_model=kw.pop("gpu_model", "H100-SXM5-80GB"), count=count, **kw)


def flavor8(name="g8-h100") -> Flavor:
    return Flavor.objects.create(name=name, vcpus=16, memory_mib=65536, disk_gib=100, gpu_form="gpu",
                                 gpu_model="H100-SXM5-80GB", gpu_count=8)


def gpu_quota(org, gpus: int) -> None:
    """The organization may hold `gpus` whole GPUs at once: a tenant sold reserved capacity beyond the plan's
    on-demand default of 8 (docs/adr/0802-lease-gpu-quota.md)."""
    from apps.tenancy.models import Quota

    Quota.objects.update_or_create(organization=org, project=None, resource="gpus", defaults={"limit": gpus})


@pytest.fixture
def reserved_capacity(world):  # noqa: F811  (the fixture imported above)
    """Both tenants of the world may hold 1,024 GPUs at once, so placement and capacity (not quota) decide."""
    gpu_quota(world.org_a, 1024)
    gpu_quota(world.org_b, 1024)
