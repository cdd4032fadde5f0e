"""Lease confirmation against the ledger: overlaps, back-to-back windows, on-demand and spot work, the
on-demand reserve, cancel, and the lifecycle ticks (activate, ending notice, end) with audit and notifications."""
import datetime as dt
import uuid
from decimal import Decimal

import pytest

from apps.audit.models import AuditEvent
from apps.reservations.models import Lease, Notification, OnDemandReserve
from apps.reservations.services.leases import lease_cancel, leases_advance
from apps.scheduling.errors import CapacityUnavailable
from apps.scheduling.ledger import AllocationSpec, ConsumerRef, allocations_claim
from apps.scheduling.models import Allocation
from tests.billing.conftest import tiers  # noqa: F401  (fixture)

from .conftest import at, gpu_host, lease

pytestmark = pytest.mark.django_db


def test_overlap_on_the_same_capacity_is_rejected_and_kept_with_the_reason(world, clock):
    gpu_host()
    first = lease(world.project_a, start=at(9), end=at(12))
    assert first.status == "confirmed"
    with pytest.raises(CapacityUnavailable) as exc:
        lease(world.project_b, start=at(11), end=at(13), name="l2")
    assert exc.value.extra["constraint"] == "gpu_capacity"
    rejected = Lease.objects.get(project=world.project_b)
    assert rejected.status == "rejected"
    assert rejected.explanation["filters"]
    assert not Allocation.objects.filter(consumer_id=rejected.pk).exists()
    assert Allocation.objects.filter(consumer_id=first.pk).count() == 8


def test_back_to_back_windows_both_confirmed(world, clock):
    gpu_host()
    a = lease(world.project_a, start="2026-03-01 09:00", end="2026-03-01 12:00")
    b = lease(world.project_b, start="2026-03-01 12:00", end="2026-03-01 15:00", name="l2")
    assert (a.status, b.status) == ("confirmed", "confirmed")
    assert a.end == b.start == at(12)


def test_running_on_demand_work_blocks_a_lease_until_it_ends(world, clock):
    h = gpu_host()
    g = list(h.gpus.order_by("index"))
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_b.pk),
                      specs=[AllocationSpec(h.id, "gpu", gpu_id=g[0].id)])  # open-ended, started now
    with pytest.raises(CapacityUnavailable):
        lease(world.project_a, start=at(20), end=at(22, day=2), count=8)
    assert lease(world.project_a, start=at(20), end=at(22, day=2), count=4, name="l2").status == "confirmed"


def test_spot_work_never_blocks_a_lease(world, clock):
    h = gpu_host()
    allocations_claim(consumer=ConsumerRef(uuid.uuid4(), "instance", world.project_b.pk), spot=True,
                      specs=[AllocationSpec(h.id, "gpu", gpu_id=gg.id) for gg in h.gpus.all()])
    assert lease(world.project_a, start=at(9), end=at(10)).status == "confirmed"


@pytest.mark.usefixtures("reserved_capacity")
def test_on_demand_reserve_is_kept_free(world, clock):
    gpu_host(), gpu_host()
    OnDemandReserve.objects.create(gpu_model="H100-SXM5-80GB", gpus=4)
    with pytest.raises(CapacityUnavailable) as exc:
        lease(world.project_a, start=at(9), end=at(10), kind="gpus", count=16)
    assert exc.value.extra["constraint"] == "on_demand_reserve"
    assert lease(world.project_a, start=at(9), end=at(10), kind="gpus", count=12, name="l2").status == "confirmed"
    assert Allocation.objects.filter(consumer_type="lease").count() == 12


def test_lifecycle_ticks_are_audited_and_notify(world, clock, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    world.org_a.billing_email = "ops@a.example"
    world.org_a.save()
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), notice_s=1800)
    clock.move_to(at(9))
    assert leases_advance()["activated"] == 1
    clock.move_to(at(11, 29))
    assert leases_advance()["ending"] == 0
    clock.move_to(at(11, 30))
    assert leases_advance()["ending"] == 1
    clock.move_to(at(12))
    assert leases_advance()["ended"] == 1
    le.refresh_from_db()
    assert le.status == "ended"
    actions = list(AuditEvent.objects.filter(target_id=str(le.pk)).order_by("created_at")
                   .values_list("action", flat=True))
    assert actions == ["reservations.lease.request", "reservations.lease.confirm", "reservations.lease.activate",
                       "reservations.lease.notice", "reservations.lease.finish"]
    assert sorted(Notification.objects.values_list("event", flat=True)) == [
        "lease.confirmed", "lease.ended", "lease.ending_soon", "lease.starting"]
    # the capacity is back: a new lease on the same GPUs right after the end succeeds
    assert lease(world.project_b, start=at(12), end=at(13), name="next").status == "confirmed"


def test_cancel_returns_capacity(world, clock):
    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12))
    le = lease_cancel(actor=None, lease=le)
    assert le.status == "cancelled"
    assert not Allocation.objects.filter(consumer_id=le.pk).exists()
    assert lease(world.project_b, start=at(9), end=at(12), name="l2").status == "confirmed"


def test_rw035_failed_start_leaves_nothing_half_done(world, clock, monkeypatch):
    """A start that fails halfway (here: the second spot notice raises) rolls back as a whole: the lease stays
    confirmed with its holding, no spot instance is half-notified, nothing is orphaned; the next tick starts it."""
    from apps.compute.models import Instance
    from apps.reservations.models import InstanceTerms
    from apps.reservations.services import spot

    h = gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), count=8)
    for i, g in enumerate(h.gpus.order_by("index")[:2]):
        inst = Instance.objects.create(project=world.project_b, name=f"spot{i}", flavor=world.gpu1,
                                       image=world.image, status="active", host=h)
        InstanceTerms.objects.create(instance=inst, project=world.project_b, market="spot")
        allocations_claim(consumer=ConsumerRef(inst.pk, "instance", world.project_b.pk), spot=True,
                          specs=[AllocationSpec(h.id, "gpu", gpu_id=g.id)])
    real, calls = spot.spot_interrupt, []
    second = InstanceTerms.objects.order_by("created_at").last().pk

    def flaky(terms, **kw):
        calls.append(terms.pk)
        if terms.pk == second:
            raise RuntimeError("notification store down")
        return real(terms, **kw)

    monkeypatch.setattr(spot, "spot_interrupt", flaky)
    clock.move_to(at(9))
    assert leases_advance()["activated"] == 0
    assert len(calls) == 4  # the notice pass and the activation each got halfway, twice rolled back
    le.refresh_from_db()
    assert le.status == "confirmed"
    assert not InstanceTerms.objects.filter(interruption_at__isnull=False).exists()
    assert Allocation.objects.filter(consumer_id=le.pk).count() == 8
    assert not AuditEvent.objects.filter(action__in=["reservations.lease.activate", "reservations.spot.interrupt"])
    monkeypatch.setattr(spot, "spot_interrupt", real)
    out = leases_advance()
    assert (out["activated"], out["preempted"]) == (1, 2)
    assert InstanceTerms.objects.filter(preempted_at__isnull=False).count() == 2


def test_active_lease_feeds_billing_as_reserved_usage(world, clock):
    from apps.reservations.selectors import lease_usage

    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    clock.move_to(at(9))
    leases_advance()
    (iv,) = list(lease_usage(at(0), at(23)))
    assert (iv.key, iv.pricing_model, iv.start, iv.end, iv.gpu_equivalents, iv.units) == (
        f"lease:{le.pk}", "reserved", at(9), at(12), 8, 8)
    assert iv.sku == "gpu:model=H100-SXM5-80GB"


def test_lease_is_billed_per_gpu(world, clock, tiers):  # noqa: F811
    """An 8-GPU lease over 3 h at $2.00 per GPU-hour is $48.00, not the price of one GPU (units = GPUs)."""
    from decimal import Decimal

    from apps.billing.models import Invoice, UsageRecord
    from apps.billing.services import invoice_run_execute, usage_record_collect
    from apps.billing.skus import sku_for
    from tests.billing.conftest import book

    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    book(at(0) - dt.timedelta(days=1), {(sku_for("gpu", model="H100-SXM5-80GB"), "standard", "reserved"):
                                        {"unit_price": Decimal("2.00"), "minimum_seconds": 0}})
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(13))
    usage_record_collect(window_start=at(0), window_end=at(0) + dt.timedelta(days=1), sources=["reservations.lease"])
    records = UsageRecord.objects.filter(resource_id=str(le.pk))
    assert records.exists() and {r.units for r in records} == {Decimal(8)}
    invoice_run_execute(period="2026-03", finalize=False)
    line = Invoice.objects.get(organization=world.org_a, period="2026-03").lines.get()
    assert line.amount == Decimal("48.00")


def test_mig_lease_is_billed_and_quoted_at_its_profile_share_of_a_gpu(world, clock, tiers):  # noqa: F811
    """Three 3g.40gb GPU instances are 3 x 3/7 = 9/7 of a GPU (compute's rule for a MIG flavor, N/7 for a profile
    Ng.*), not 3/7: the usage source and the quote both count 9/7, so at $7.00 per GPU-hour the lease costs $9.00
    an hour and $27.00 over its 3 h window."""
    from decimal import Decimal

    from apps.billing.skus import sku_for
    from apps.reservations.selectors import lease_price, lease_usage
    from tests.billing.conftest import book
    from tests.scheduling import fleet

    fleet.host(gpus=2, mode="mig", nvswitch="")
    le = lease(world.project_a, start=at(9), end=at(12), kind="mig", count=3, mig_profile="3g.40gb")
    book(at(0) - dt.timedelta(days=1), {(sku_for("gpu", model="H100-SXM5-80GB"), "standard", "reserved"):
                                        {"unit_price": Decimal("7.00"), "minimum_seconds": 0}})
    quote = lease_price(le)
    assert (quote["units"], quote["per_hour"], quote["estimate_total"]) == ("1.285714", "9", "27.00")
    clock.move_to(at(9))
    leases_advance()
    (iv,) = list(lease_usage(at(0), at(23)))
    assert iv.units == iv.gpu_equivalents == Decimal(9) / 7


def _gpu_hours(lease_id):
    from apps.billing.models import UsageRecord

    return sum(r.units * Decimal((r.end - r.start).total_seconds()) / 3600
               for r in UsageRecord.objects.filter(resource_type="lease", resource_id=str(lease_id)))


@pytest.mark.usefixtures("reserved_capacity")
def test_a_grown_lease_is_billed_at_each_size_for_the_time_it_had_it(world, clock):
    """2 hosts from 09:00 to 12:00, grown to 3 at 10:00 (the new host is held from 10:00 only): 2 x 8 GPUs x 3 h
    + 1 x 8 GPUs x 2 h = 64 GPU-hours, not 3 hosts x 3 h = 72. The usage source gives one interval per size."""
    from apps.billing.services import usage_record_collect
    from apps.reservations.selectors import lease_usage
    from apps.reservations.services.leases import lease_update

    for _ in range(3):
        gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=2)
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    lease_update(actor=None, lease=le, count=3)
    assert [(iv.start, iv.end, iv.units) for iv in lease_usage(at(0), at(23))] == [
        (at(9), at(10), Decimal(16)), (at(10), at(12), Decimal(24))]
    clock.move_to(at(13))
    usage_record_collect(window_start=at(0), window_end=at(0) + dt.timedelta(days=1), sources=["reservations.lease"])
    assert _gpu_hours(le.pk) == Decimal(64)
    usage_record_collect(window_start=at(0), window_end=at(0) + dt.timedelta(days=1), sources=["reservations.lease"])
    assert _gpu_hours(le.pk) == Decimal(64)  # recording again adds nothing


@pytest.mark.usefixtures("reserved_capacity")
def test_a_grown_then_shortened_lease_is_billed_per_size_up_to_its_new_end(world, clock):
    """A started lease gives capacity back only by ending sooner (a smaller count is 400 lease_field_immutable).
    2 hosts 09:00-12:00, grown to 3 at 10:00, its end brought to 11:30 at 10:30: 2 x 8 x 2.5 h + 8 x 1.5 h = 52
    GPU-hours; the refused count shrink changes nothing."""
    from apps.billing.services import usage_record_collect
    from apps.core.errors import ValidationFailed
    from apps.reservations.services.leases import lease_update

    for _ in range(3):
        gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=2)
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    le = lease_update(actor=None, lease=le, count=3)
    clock.move_to(at(10, 30))
    with pytest.raises(ValidationFailed):
        lease_update(actor=None, lease=le, count=2)
    lease_update(actor=None, lease=le, end=at(11, 30))
    clock.move_to(at(12))
    leases_advance()
    usage_record_collect(window_start=at(0), window_end=at(0) + dt.timedelta(days=1), sources=["reservations.lease"])
    assert _gpu_hours(le.pk) == Decimal(52)


def test_provider_fault_of_a_leased_host_is_not_billed_and_counts_against_the_sla(world, clock, tiers):  # noqa: F811
    """The instances' rule for leases: the leased host is marked faulty (provider at fault) for 60 s of a 3 h,
    8-GPU lease at $2.00 per GPU-hour: 8 x (10,800 - 60) s = $47.73 is billed, not $48.00, and the minute of
    downtime counts against the premium tier (uptime 179/180 = 99.44 % < 99.9 %: 10 % credit, $4.77)."""
    from decimal import Decimal

    from apps.billing.models import Invoice, SlaReport
    from apps.billing.registry import placement_resolvers
    from apps.billing.services import invoice_run_execute
    from apps.billing.skus import sku_for
    from apps.inventory.services.hosts import host_mark_available, host_mark_faulty
    from tests.billing.conftest import book

    world.org_a.default_sla_tier = "premium"
    world.org_a.save(update_fields=["default_sla_tier"])
    host = gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1)
    book(at(0) - dt.timedelta(days=1), {(sku_for("gpu", model="H100-SXM5-80GB"), "premium", "reserved"):
                                        {"unit_price": Decimal("2.00"), "minimum_seconds": 0}})
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    host_mark_faulty(actor=None, host=host, reason="PSU failure")
    clock.move_to(at(10, 1))
    host_mark_available(actor=None, host=host, reason="PSU replaced")
    placed = list(placement_resolvers()["reservations.lease"](host.pk, None, at(10), at(10, 1)))
    assert {(p.resource_type, p.resource_id) for p in placed} == {("lease", str(le.pk))}
    assert sum(p.units for p in placed) == 8  # one placement per GPU row of the lease on the host
    clock.move_to(at(13))
    invoice_run_execute(period="2026-03", finalize=False)
    line = Invoice.objects.get(organization=world.org_a, period="2026-03").lines.get()
    assert (line.billed_seconds, line.amount) == (Decimal(8 * (3 * 3600 - 60)), Decimal("47.73"))
    report = SlaReport.objects.get(resource_type="lease", resource_id=str(le.pk), period="2026-03")
    assert (report.sla_tier, report.held_minutes, report.downtime_minutes, report.credit_pct, report.billed_amount,
            report.credit_amount) == ("premium", Decimal(180), Decimal(1), Decimal(10), Decimal("47.73"),
                                      Decimal("4.77"))


@pytest.mark.usefixtures("reserved_capacity")
@pytest.mark.parametrize(("fault_s", "amount", "down_min", "credit_pct", "credit"), [
    (60, "95.73", 1, 10, "9.57"),    # 16 x 10,800 - 8 x 60 = 172,320 GPU-s; 30 s of the lease -> 1 min, 99.44 %
    (600, "93.33", 5, 25, "23.33"),  # 172,800 - 8 x 600 = 168,000 GPU-s; 300 s -> 5 min, 97.22 % (not 94.44 %)
])
def test_provider_fault_of_one_host_of_a_lease_spares_only_that_hosts_gpus(world, clock, tiers, fault_s, amount,  # noqa: F811
                                                                          down_min, credit_pct, credit):
    """A 2-host (16-GPU) premium lease from 09:00 to 12:00 at $2.00 per GPU-hour; one of its hosts is faulty
    (provider at fault) from 10:00 for `fault_s`. The customer is not billed for that host's 8 GPUs while it is at
    fault; the other host worked and is billed (60 s: $95.73, not $95.47 as if all 16 GPUs were down). The SLA
    report counts the same measure: the lease lost 8/16 of its GPUs for `fault_s`, i.e. fault_s / 2 of whole-lease
    downtime, each started minute whole (600 s: 5 minutes, uptime 175/180 = 97.2 %: premium credits 25 %, where
    counting the whole lease down for 10 minutes would give 94.4 % and 100 %)."""
    from apps.billing.models import Invoice, SlaReport
    from apps.billing.services import invoice_run_execute
    from apps.billing.skus import sku_for
    from apps.inventory.services.hosts import host_mark_available, host_mark_faulty
    from tests.billing.conftest import book

    world.org_a.default_sla_tier = "premium"
    world.org_a.save(update_fields=["default_sla_tier"])
    hosts = [gpu_host(), gpu_host()]
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=2)
    book(at(0) - dt.timedelta(days=1), {(sku_for("gpu", model="H100-SXM5-80GB"), "premium", "reserved"):
                                        {"unit_price": Decimal("2.00"), "minimum_seconds": 0}})
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    host_mark_faulty(actor=None, host=hosts[0], reason="PSU failure")
    clock.move_to(at(10) + dt.timedelta(seconds=fault_s))
    host_mark_available(actor=None, host=hosts[0], reason="PSU replaced")
    clock.move_to(at(13))
    invoice_run_execute(period="2026-03", finalize=False)
    line = Invoice.objects.get(organization=world.org_a, period="2026-03").lines.get()
    assert (line.billed_seconds, line.amount) == (Decimal(16 * 3 * 3600 - 8 * fault_s), Decimal(amount))
    report = SlaReport.objects.get(resource_type="lease", resource_id=str(le.pk), period="2026-03")
    assert (report.held_minutes, report.downtime_minutes, report.credit_pct, report.credit_amount) == (
        Decimal(180), Decimal(down_min), Decimal(credit_pct), Decimal(credit))


def test_premium_lease_in_a_standard_organization_is_rated_and_credited_at_premium(world, clock, tiers):  # noqa: F811
    """Tier per resource on a lease: the organization's default tier is standard, the lease is bought at premium.
    Its usage is priced at the premium reserved price ($3.00 per GPU-hour, not standard's $2.00): 8 x (10,800 -
    60) s = $71.60; its uptime of 179/180 min = 99.44 % is below premium's 99.9 % (10 % credit, $7.16), where the
    standard schedule (below 99.0 %) would credit nothing."""
    from decimal import Decimal

    from apps.billing.models import Invoice, SlaReport, UsageRecord
    from apps.billing.services import invoice_run_execute
    from apps.billing.skus import sku_for
    from apps.inventory.services.hosts import host_mark_available, host_mark_faulty
    from tests.billing.conftest import book

    assert world.org_a.default_sla_tier == "standard"
    host = gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), kind="hosts", count=1, sla_tier="premium")
    assert le.sla_tier == "premium"
    sku = sku_for("gpu", model="H100-SXM5-80GB")
    book(at(0) - dt.timedelta(days=1), {
        (sku, "standard", "reserved"): {"unit_price": Decimal("2.00"), "minimum_seconds": 0},
        (sku, "premium", "reserved"): {"unit_price": Decimal("3.00"), "minimum_seconds": 0}})
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(10))
    host_mark_faulty(actor=None, host=host, reason="PSU failure")
    clock.move_to(at(10, 1))
    host_mark_available(actor=None, host=host, reason="PSU replaced")
    clock.move_to(at(13))
    invoice_run_execute(period="2026-03", finalize=False)
    line = Invoice.objects.get(organization=world.org_a, period="2026-03").lines.get()
    assert (line.sla_tier, line.unit_price, line.billed_seconds, line.amount) == (
        "premium", Decimal("3.00"), Decimal(8 * (3 * 3600 - 60)), Decimal("71.60"))
    report = SlaReport.objects.get(resource_type="lease", resource_id=str(le.pk), period="2026-03")
    assert (report.sla_tier, report.target_uptime_pct, report.downtime_minutes, report.credit_pct,
            report.credit_amount) == ("premium", Decimal("99.9"), Decimal(1), Decimal(10), Decimal("7.16"))
    assert set(UsageRecord.objects.filter(resource_id=str(le.pk)).values_list("sla_tier", flat=True)) == {"premium"}


def test_mig_and_share_leases_hold_slices_and_shares(world, clock):
    from tests.scheduling import fleet

    fleet.host(gpus=2, mode="mig", nvswitch="")
    fleet.host(gpus=1, mode="shared", nvswitch="")
    mig = lease(world.project_a, start=at(9), end=at(12), kind="mig", count=3, mig_profile="3g.40gb", name="m")
    rows = Allocation.objects.filter(consumer_id=mig.pk, resource_class="mig")
    assert rows.count() == 3 and {r.slices.upper - r.slices.lower for r in rows} == {4}
    with pytest.raises(CapacityUnavailable) as exc:
        lease(world.project_b, start=at(10), end=at(11), kind="mig", count=2, mig_profile="3g.40gb", name="m2")
    assert exc.value.extra["constraint"] == "mig_geometry"
    sh = lease(world.project_b, start=at(9), end=at(12), kind="shares", count=2, share_milli=400, name="s")
    assert sum(Allocation.objects.filter(consumer_id=sh.pk).values_list("amount", flat=True)) == 800


def test_bad_capacity_is_400_and_writes_nothing(world, clock):
    from apps.core.errors import ValidationFailed

    for kw in ({"kind": "mig", "mig_profile": "9g.99gb"}, {"kind": "gpus", "gpu_model": "NOPE"},
               {"kind": "gpus", "count": 0}, {"kind": "shares", "share_milli": 1000},
               {"kind": "gpus", "max_leaves_per_rail": 1}, {"kind": "gpus", "zone": "nowhere"}):
        with pytest.raises(ValidationFailed) as exc:
            lease(world.project_a, start=at(9), end=at(12), **{"count": 1, **kw})
        assert exc.value.code == "invalid_lease_capacity"
    assert not Lease.objects.exists()


def test_a_lease_left_requested_by_a_dead_request_is_rejected(world, clock):
    from apps.reservations.models import Lease as L

    stuck = L.objects.create(project=world.project_a, name="stuck", start=at(9), end=at(10), kind="gpus",
                             gpu_model="H100-SXM5-80GB", count=1)
    clock.move_to(at(8, 4))
    assert leases_advance()["abandoned"] == 0
    clock.move_to(at(8, 5))
    assert leases_advance()["abandoned"] == 1
    stuck.refresh_from_db()
    assert (stuck.status, stuck.reason) == ("rejected", "confirmation did not complete")


def test_extending_an_ending_lease_renews_it_through_the_transition_and_audits_it(world, clock):
    """An `ending` lease extended past its notice is `active` again by the ``renew`` transition, audited with
    the state before and after (like every other lease transition), and gets a fresh ending notice later."""
    from apps.reservations.services.leases import lease_update

    gpu_host()
    le = lease(world.project_a, start=at(9), end=at(12), notice_s=1800)
    clock.move_to(at(9))
    leases_advance()
    clock.move_to(at(11, 30))
    assert leases_advance()["ending"] == 1
    le = lease_update(actor=world.member_a, lease=Lease.objects.get(pk=le.pk), end=at(14))
    assert le.status == "active"
    assert Lease.objects.get(pk=le.pk).status == "active"
    renew = AuditEvent.objects.get(target_id=str(le.pk), action="reservations.lease.renew")
    assert (renew.before, renew.after) == ({"status": "ending"}, {"status": "active"})
    assert renew.actor_id == world.member_a.pk
    clock.move_to(at(13, 30))
    assert leases_advance()["ending"] == 1
    assert Lease.objects.get(pk=le.pk).status == "ending"
