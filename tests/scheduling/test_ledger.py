"""The allocation ledger: exclusion constraints, nesting, spot, countable sums, release, generations."""
import datetime as dt
import uuid

import pytest
from django.db import IntegrityError, transaction
from django.db.backends.postgresql.psycopg_any import DateTimeTZRange, NumericRange

from apps.core import clock
from apps.scheduling.errors import CapacityUnavailable, ConsumerGenerationConflict, InvalidAllocation
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim, allocations_release
from apps.scheduling.models import Allocation, Consumer, HostUsage
from apps.scheduling.selectors import gpu_usage_for_project

from . import fleet

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def ref(p, kind="instance", **kw):
    return ConsumerRef(id=uuid.uuid4(), consumer_type=kind, project_id=p.id, **kw)


def gpu(h, i=0):
    return AllocationSpec(host_id=h.id, resource_class="gpu", gpu_id=h.gpus.get(index=i).id)


def mig(h, start, size, i=0):
    return AllocationSpec(host_id=h.id, resource_class="mig", gpu_id=h.gpus.get(index=i).id,
                          slices=(start, start + size), profile="x")


@pytest.fixture
def p():
    return fleet.project("a")


@pytest.fixture
def h():
    return fleet.host()


def test_whole_gpu_twice_is_refused(p, h):
    allocations_claim(consumer=ref(p), specs=[gpu(h)])
    with pytest.raises(CapacityUnavailable) as e:
        allocations_claim(consumer=ref(p), specs=[gpu(h)])
    assert e.value.code == "capacity_unavailable" and e.value.status == 409
    assert Allocation.objects.count() == 1


def test_mig_slices_conflict_only_when_they_overlap(p, h):
    allocations_claim(consumer=ref(p), specs=[mig(h, 4, 4)])      # 3g at start 4: [4, 8)
    allocations_claim(consumer=ref(p), specs=[mig(h, 0, 2)])      # 2g at 0: [0, 2)
    allocations_claim(consumer=ref(p), specs=[mig(h, 2, 2)])      # [2, 4)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[mig(h, 3, 1)])
    with pytest.raises(CapacityUnavailable):                       # whole GPU over MIG slices
        allocations_claim(consumer=ref(p), specs=[gpu(h)])


def test_boundary_rule_half_open_periods_touching_do_not_conflict(p, h):
    allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], start=T0, end=T0 + DAY)
    allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], start=T0 + DAY, end=T0 + 2 * DAY)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], start=T0 + DAY - dt.timedelta(seconds=1),
                          end=T0 + DAY + dt.timedelta(seconds=1))


def test_open_ended_on_demand_blocks_future_lease(p, h):
    allocations_claim(consumer=ref(p), specs=[gpu(h)])
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], start=T0, end=T0 + DAY)


def test_gang_claim_is_all_or_nothing(p):
    h1, h2 = fleet.host(), fleet.host()
    allocations_claim(consumer=ref(p), specs=[gpu(h2, 3)])
    specs = [gpu(h1, i) for i in range(8)] + [gpu(h2, i) for i in range(8)]
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p, "cluster_member"), specs=specs)
    assert Allocation.objects.count() == 1
    assert Consumer.objects.count() == 1  # the failed consumer row rolled back too


def test_instance_nested_in_lease_does_not_conflict_with_lease_but_siblings_do(p, h):
    lease = ref(p, "lease")
    allocations_claim(consumer=lease, specs=[gpu(h, 0), gpu(h, 1)], start=T0, end=T0 + 10 * DAY)
    a = allocations_claim(consumer=ref(p), specs=[gpu(h, 0)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    assert a[0].parent.consumer_id == lease.id
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h, 0)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    # the sibling on the other GPU of the lease fits
    allocations_claim(consumer=ref(p), specs=[gpu(h, 1)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    # outside the lease's window: not within its holding
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h, 1)], start=T0 + 9 * DAY, end=T0 + 11 * DAY,
                          parent_consumer_id=lease.id)
    # a GPU the lease does not hold
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h, 2)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)


def test_mig_children_inside_a_whole_gpu_lease(p, h):
    lease = ref(p, "lease")
    allocations_claim(consumer=lease, specs=[gpu(h)], start=T0, end=T0 + DAY)
    allocations_claim(consumer=ref(p), specs=[mig(h, 0, 4)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    allocations_claim(consumer=ref(p), specs=[mig(h, 4, 4)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[mig(h, 6, 2)], start=T0, end=T0 + DAY,
                          parent_consumer_id=lease.id)


def test_spot_does_not_block_a_lease_but_blocks_on_demand(p, h):
    allocations_claim(consumer=ref(p), specs=[gpu(h)], spot=True)
    allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], start=T0, end=T0 + DAY)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h)])
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h)], spot=True)


def test_instance_in_lease_conflicts_with_spot_until_it_is_preempted(p, h):
    spot = ref(p)
    allocations_claim(consumer=spot, specs=[gpu(h)], spot=True, start=T0 - DAY)
    lease = ref(p, "lease")
    allocations_claim(consumer=lease, specs=[gpu(h)], start=T0, end=T0 + DAY)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[gpu(h)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    allocations_release(consumer_id=spot.id, at=T0)  # preempted at the lease's start
    allocations_claim(consumer=ref(p), specs=[gpu(h)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)


def test_exclusion_constraint_holds_without_the_service(p, h):
    """The database itself refuses an overlap (no service code involved)."""
    c = Consumer.objects.create(id=uuid.uuid4(), consumer_type="instance", project=p)
    g = h.gpus.get(index=0)
    kw = {"consumer": c, "consumer_type": "instance", "project": p, "host": h, "gpu": g, "resource_class": "mig",
          "period": DateTimeTZRange(T0, None, "[)")}
    Allocation.objects.create(slices=NumericRange(0, 4, "[)"), **kw)
    with pytest.raises(IntegrityError), transaction.atomic():
        Allocation.objects.create(slices=NumericRange(3, 5, "[)"), **kw)
    with pytest.raises(IntegrityError), transaction.atomic():  # slices outside [0, 8)
        Allocation.objects.create(slices=NumericRange(6, 9, "[)"), **kw)


def test_vcpu_and_memory_sums(p):
    h = fleet.host(threads=16, memory_mib=1000)
    allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "vcpu", amount=10),
                                              AllocationSpec(h.id, "memory_mib", amount=600)])
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "vcpu", amount=7)])
    allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "vcpu", amount=6)])
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "memory_mib", amount=401)])


def test_countable_peak_not_sum_for_disjoint_periods(p):
    """Two 10-vCPU leases one after the other on a 16-thread host: the peak is 10, both fit; a third
    overlapping both does not."""
    h = fleet.host(threads=16)
    allocations_claim(consumer=ref(p, "lease"), specs=[AllocationSpec(h.id, "vcpu", amount=10)], start=T0,
                      end=T0 + DAY)
    allocations_claim(consumer=ref(p, "lease"), specs=[AllocationSpec(h.id, "vcpu", amount=10)],
                      start=T0 + 2 * DAY, end=T0 + 3 * DAY)
    allocations_claim(consumer=ref(p, "lease"), specs=[AllocationSpec(h.id, "vcpu", amount=6)], start=T0,
                      end=T0 + 3 * DAY)
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p, "lease"), specs=[AllocationSpec(h.id, "vcpu", amount=1)],
                          start=T0 + DAY / 2, end=T0 + DAY)


def test_shares_and_vgpu_types(p):
    h = fleet.host(gpus=1, mode="shared")
    g = h.gpus.get()
    allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "share", gpu_id=g.id, amount=600)])
    allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "share", gpu_id=g.id, amount=400)])
    with pytest.raises(CapacityUnavailable):
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "share", gpu_id=g.id, amount=1)])
    hv = fleet.host(gpus=1, mode="vgpu")
    gv = hv.gpus.get()
    spec = AllocationSpec(hv.id, "vgpu", gpu_id=gv.id, profile="H100XM-40C")
    allocations_claim(consumer=ref(p), specs=[spec])
    allocations_claim(consumer=ref(p), specs=[spec])
    with pytest.raises(CapacityUnavailable):  # catalog max 2 of H100XM-40C per GPU
        allocations_claim(consumer=ref(p), specs=[spec])
    hv2 = fleet.host(gpus=1, mode="vgpu")
    g2 = hv2.gpus.get()
    allocations_claim(consumer=ref(p), specs=[AllocationSpec(hv2.id, "vgpu", gpu_id=g2.id, profile="H100XM-10C")])
    with pytest.raises(CapacityUnavailable):  # homogeneous vGPU: one type per GPU
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(hv2.id, "vgpu", gpu_id=g2.id,
                                                                 profile="H100XM-20C")])
    with pytest.raises(InvalidAllocation):
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(hv2.id, "vgpu", gpu_id=g2.id, profile="nope")])


def test_release_ends_running_and_deletes_future_rows(p, h):
    running, future = ref(p), ref(p, "lease")
    allocations_claim(consumer=running, specs=[gpu(h, 0)])
    allocations_claim(consumer=future, specs=[gpu(h, 1)], start=T0, end=T0 + DAY)
    assert allocations_release(consumer_id=running.id) == 1
    row = Allocation.objects.get(consumer_id=running.id)
    assert row.period.upper is not None and row.period.upper <= clock.now()
    assert allocations_release(consumer_id=future.id) == 1
    assert not Allocation.objects.filter(consumer_id=future.id).exists()
    assert allocations_release(consumer_id=running.id) == 0  # idempotent
    allocations_claim(consumer=ref(p), specs=[gpu(h, 0)])   # the GPU is free again
    assert HostUsage.objects.get(host=h).gpus_busy == 1


def test_rw021_rebuild_five_times_holds_exactly_one_gpu(p, h):
    """RW-021: each rebuild replaces the instance's allocation; it never adds a second one."""
    inst = ref(p)
    spec = [gpu(h, 0), AllocationSpec(h.id, "vcpu", amount=8), AllocationSpec(h.id, "memory_mib", amount=65536)]
    allocations_claim(consumer=inst, specs=spec)
    for _ in range(5):
        allocations_claim(consumer=inst, specs=spec, replace=True)
    assert gpu_usage_for_project(p) == 1
    u = HostUsage.objects.get(host=h)
    assert (u.gpus_busy, u.vcpus_used, u.memory_used_mib) == (1, 8, 65536)


def test_rw023_consumer_generation_exactly_one_writer_wins(p, h):
    """RW-023: two writers with generation 5: one lands, the other gets 409; no merge, generation 6."""
    inst = ref(p)
    allocations_claim(consumer=inst, specs=[gpu(h, 0)])
    Consumer.objects.filter(id=inst.id).update(generation=5)
    r1 = [gpu(h, 0), gpu(h, 1)]
    r2 = [gpu(h, 0), AllocationSpec(h.id, "vf", gpu_id=h.gpus.get(index=0).id)]
    allocations_claim(consumer=inst, specs=r1, replace=True, expected_generation=5)
    with pytest.raises(ConsumerGenerationConflict) as e:
        allocations_claim(consumer=inst, specs=r2, replace=True, expected_generation=5)
    assert e.value.status == 409 and e.value.extra["generation"] == 6
    live = Allocation.objects.filter(consumer_id=inst.id, period__upper_inf=True)
    assert sorted(a.resource_class for a in live) == ["gpu", "gpu"]
    assert Consumer.objects.get(id=inst.id).generation == 6


def test_rw066_released_devices_are_immediately_reusable(p):
    """RW-066: 4 workloads x 1 GPU, delete all 4, then 8 x 1 GPU schedule without any restart."""
    h = fleet.host()
    first = [ref(p) for _ in range(4)]
    for i, c in enumerate(first):
        allocations_claim(consumer=c, specs=[gpu(h, i)])
    for c in first:
        allocations_release(consumer_id=c.id)
    for i in range(8):
        allocations_claim(consumer=ref(p), specs=[gpu(h, i)])
    assert HostUsage.objects.get(host=h).gpus_busy == 8


def test_rw022_release_needs_no_agent(p, h):
    """RW-022: releasing is a ledger write only; the host's agent being down (no heartbeat) does not matter,
    and nothing later recreates the allocation."""
    h.last_heartbeat_at = None
    h.save()
    inst = ref(p)
    allocations_claim(consumer=inst, specs=[gpu(h, i) for i in range(4)])
    allocations_release(consumer_id=inst.id)
    assert gpu_usage_for_project(p) == 0
    assert HostUsage.objects.get(host=h).gpus_busy == 0


def test_invalid_specs_write_nothing(p, h):
    with pytest.raises(InvalidAllocation):
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "mig", gpu_id=h.gpus.first().id,
                                                                 slices=(6, 9))])
    with pytest.raises(InvalidAllocation):
        allocations_claim(consumer=ref(p), specs=[gpu(h)], start=T0, end=T0)
    with pytest.raises(InvalidAllocation):
        allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h)], spot=True)
    assert not Allocation.objects.exists() and not Consumer.objects.exists()


def test_consumer_id_cannot_change_project(p, h):
    c = ref(p)
    allocations_claim(consumer=c, specs=[gpu(h, 0)])
    other = fleet.project("b")
    with pytest.raises(InvalidAllocation):
        allocations_claim(consumer=ConsumerRef(c.id, "instance", other.id), specs=[gpu(h, 1)])


def test_gpu_usage_counts_top_level_only(p, h):
    lease = ref(p, "lease")
    now = clock.now()
    allocations_claim(consumer=lease, specs=[gpu(h, 0), gpu(h, 1)], start=now, end=now + DAY)
    allocations_claim(consumer=ref(p), specs=[gpu(h, 0)], start=now, end=now + DAY, parent_consumer_id=lease.id)
    allocations_claim(consumer=ref(p), specs=[gpu(h, 2)])
    assert gpu_usage_for_project(p) == 3
    assert gpu_usage_for_project(p, model="A100-SXM4-80GB") == 0
    assert gpu_usage_for_project(fleet.project("other")) == 0


def test_quota_counters_registered_with_tenancy(p, h):
    from apps.tenancy.quotas import usage_of

    allocations_claim(consumer=ref(p), specs=[gpu(h, 0), gpu(h, 1)])
    allocations_claim(consumer=ref(p), specs=[mig(h, 0, 4, i=2)])
    org = p.organization
    assert usage_of(organization=org, project=p, resource="gpus") == 2
    assert usage_of(organization=org, resource="gpus:H100-SXM5-80GB") == 2
    assert usage_of(organization=org, resource="gpus:A100-SXM4-40GB") == 0
    assert usage_of(organization=org, project=p, resource="mig_slices:x") == 1


def test_lease_holding_vcpus_bounds_its_children(p):
    h = fleet.host(threads=64)
    lease = ref(p, "lease")
    allocations_claim(consumer=lease, specs=[gpu(h, 0), AllocationSpec(h.id, "vcpu", amount=16)],
                      start=T0, end=T0 + DAY)
    allocations_claim(consumer=ref(p), specs=[gpu(h, 0), AllocationSpec(h.id, "vcpu", amount=12)], start=T0,
                      end=T0 + DAY, parent_consumer_id=lease.id)
    with pytest.raises(CapacityUnavailable) as refused:  # 12 + 8 > the lease's 16
        allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "vcpu", amount=8)], start=T0,
                          end=T0 + DAY, parent_consumer_id=lease.id)
    # the refusal names what is short and that the lease (not the host) bounds it
    assert (refused.value.extra["resource_class"], refused.value.extra["bound_by"]) == ("vcpu", "lease")
    # memory: the lease holds none on this host, so it comes from the host's pool (top-level row)
    rows = allocations_claim(consumer=ref(p), specs=[AllocationSpec(h.id, "memory_mib", amount=1024)], start=T0,
                             end=T0 + DAY, parent_consumer_id=lease.id)
    assert rows[0].parent_id is None


def test_usage_refresh_all_rebuilds_the_summary(p, h):
    from apps.scheduling.ledger.maintenance import ledger_usage_refresh_all

    other = fleet.host(gpus=2, nvswitch="")
    allocations_claim(consumer=ref(p), specs=[gpu(h, 0), AllocationSpec(h.id, "vcpu", amount=4)])
    HostUsage.objects.all().update(gpus_busy=0, vcpus_used=0, gpus_exclusive=0)
    other.gpus.filter(index=0).update(health="faulty")
    assert ledger_usage_refresh_all() >= 2
    u, o = HostUsage.objects.get(host=h), HostUsage.objects.get(host=other)
    assert (u.gpus_busy, u.vcpus_used, u.gpus_exclusive, u.gpu_model) == (1, 4, 8, "H100-SXM5-80GB")
    assert (o.gpus_busy, o.gpus_exclusive) == (0, 1)


def test_rw066_audit_reports_and_removes_orphans(p, h):
    """RW-066 (second half): an allocation left behind by a consumer that no longer exists is reported, and
    released on request; consumer types without a resolver are only listed as unchecked."""
    from apps.scheduling.ledger import maintenance

    alive, gone = ref(p), ref(p)
    allocations_claim(consumer=alive, specs=[gpu(h, 0), gpu(h, 1)])
    allocations_claim(consumer=gone, specs=[gpu(h, 2), gpu(h, 3)])
    allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h, 4)], start=T0, end=T0 + DAY)
    saved = dict(maintenance._RESOLVERS)  # other apps' resolvers are set aside for this test
    maintenance._RESOLVERS.clear()
    maintenance.register_consumer_resolver("instance", lambda ids: {i for i in ids if i == alive.id})
    try:
        report = maintenance.ledger_audit()
        assert report == {"orphaned": [str(gone.id)], "unchecked_types": ["lease"], "released_rows": 0}
        report = maintenance.ledger_audit(remove=True)
        assert report["released_rows"] == 2
        assert maintenance.ledger_audit()["orphaned"] == []
        assert gpu_usage_for_project(p) == 2
    finally:
        maintenance._RESOLVERS.clear()
        maintenance._RESOLVERS.update(saved)


def test_usage_rows_follow_inventory_through_triggers():
    """A new host gets its ledger row at once; GPU inserts, health / mode changes and deletes update the host's
    healthy exclusive GPU count (statement-level triggers, docs/adr/0402)."""
    h = fleet.host(gpus=4, nvswitch="")
    u = HostUsage.objects.get(host=h)
    assert (u.gpu_model, u.gpus_exclusive, u.gpus_free) == ("H100-SXM5-80GB", 4, 4)
    h.gpus.filter(index__in=[0, 1]).update(health="faulty")
    h.gpus.filter(index=2).update(mode="mig")
    assert HostUsage.objects.get(host=h).gpus_free == 1
    h.gpus.filter(index=3).delete()
    assert HostUsage.objects.get(host=h).gpus_exclusive == 0


def test_allocations_set_end_extends_and_shrinks_with_nested_rows(p, h):
    from apps.scheduling.ledger.periods import allocations_set_end

    lease = ref(p, "lease")
    allocations_claim(consumer=lease, specs=[gpu(h, 0)], start=T0, end=T0 + DAY)
    child = ref(p)
    allocations_claim(consumer=child, specs=[gpu(h, 0)], start=T0, end=T0 + DAY, parent_consumer_id=lease.id)
    allocations_claim(consumer=ref(p, "lease"), specs=[gpu(h, 0)], start=T0 + 2 * DAY, end=T0 + 3 * DAY)
    with pytest.raises(CapacityUnavailable):  # would run into the next lease
        allocations_set_end(consumer_id=lease.id, old_end=T0 + DAY, new_end=T0 + 2 * DAY + DAY / 2)
    assert allocations_set_end(consumer_id=lease.id, old_end=T0 + DAY, new_end=T0 + 2 * DAY) == 1
    assert Allocation.objects.get(consumer_id=child.id).period.upper == T0 + 2 * DAY  # the child followed
    assert allocations_set_end(consumer_id=lease.id, old_end=T0 + 2 * DAY, new_end=T0 + DAY / 2) == 1
    assert Allocation.objects.get(consumer_id=child.id).period.upper == T0 + DAY / 2  # cut with the lease
