"""The admin portal's incident screen: an operator corrects an incident (PATCH /incidents/{id}/, audited) and any
staff role reads the downtime and SLA credits it caused (GET /incidents/{id}/impact/); tenants get 404."""
import datetime as dt

import pytest
import time_machine

from apps.audit.models import AuditEvent
from apps.billing.services import invoice_run_execute
from apps.identity.models import StaffRole
from apps.inventory.models import Incident
from tests.tenancy.helpers import client_for, make_user, member, token_for

from .conftest import H100, book, collect, incident, make_org, utc

pytestmark = pytest.mark.django_db


def _staff(role):
    return client_for(token_for(make_user(f"{role}@provider.test", staff_role=role), staff=True))


def test_an_incident_s_downtime_and_its_share_of_the_sla_credit(tiers, fleet, host):
    """vm1 runs June on the host; two incidents of 9 h and 3 h: the month's credit is split 3:1 between them; vm2
    only ran during the first. A tenant gets 404."""
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 7, 1))
    fleet.place(h.id, "vm1", utc(2026, 5, 31))
    fleet.run(org, project, "vm2", utc(2026, 6, 10), utc(2026, 6, 10, 6))
    fleet.place(h.id, "vm2", utc(2026, 6, 10), utc(2026, 6, 10, 6))
    first = incident(h, utc(2026, 6, 10, 3), utc(2026, 6, 10, 12))   # 9 h
    second = incident(h, utc(2026, 6, 20, 0), utc(2026, 6, 20, 3))   # 3 h
    collect(utc(2026, 6, 1), utc(2026, 7, 1))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        support = _staff(StaffRole.SUPPORT)
        body = support.get(f"/api/v1/incidents/{first.pk}/impact/").json()
    by_id = {r["resource_id"]: r for r in body["resources"]}
    assert set(by_id) == {"vm1", "vm2"} and body["counts_for_sla"] is True and body["open"] is False
    assert (by_id["vm1"]["downtime_s"], by_id["vm2"]["downtime_s"]) == (9 * 3600, 3 * 3600)
    assert by_id["vm1"]["organization_name"] == "acme" and body["downtime_s"] == 12 * 3600
    vm1_credit = by_id["vm1"]["credits"][0]
    assert vm1_credit["period"] == "2026-06"
    # the month's 12 h of downtime: this incident is 9 of them
    from decimal import Decimal
    assert Decimal(vm1_credit["credit_amount"]) == (Decimal(vm1_credit["report_credit_amount"]) * 9 / 12).quantize(
        Decimal("0.01"))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        other = support.get(f"/api/v1/incidents/{second.pk}/impact/").json()
    assert [r["resource_id"] for r in other["resources"]] == ["vm1"]
    total = Decimal(vm1_credit["credit_amount"]) + Decimal(other["resources"][0]["credits"][0]["credit_amount"])
    assert total == Decimal(vm1_credit["report_credit_amount"])
    owner = make_user("owner@acme.test")
    from apps.tenancy.models import OrgRole
    member(owner, org, OrgRole.OWNER)
    assert client_for(token_for(owner, organization=org)).get(
        f"/api/v1/incidents/{first.pk}/impact/").status_code == 404


def test_the_month_s_only_incident_carries_the_whole_credit(tiers, fleet, host):
    """One incident of 2 h 0 min 30 s: the SLA report counts 121 minutes (each started minute whole); the incident
    is all of the month's downtime, so its share is the whole credit, not 120.5 over 121 minutes of it."""
    from decimal import Decimal

    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 7, 1))
    fleet.place(h.id, "vm1", utc(2026, 5, 31))
    inc = incident(h, utc(2026, 6, 10, 3), utc(2026, 6, 10, 5, 0, 30))
    collect(utc(2026, 6, 1), utc(2026, 7, 1))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        body = _staff(StaffRole.SUPPORT).get(f"/api/v1/incidents/{inc.pk}/impact/").json()
    [credit] = body["resources"][0]["credits"]
    assert Decimal(credit["report_credit_amount"]) > 0
    assert credit["credit_amount"] == credit["report_credit_amount"]


def test_an_incident_shorter_than_a_second_carries_the_minute_the_report_counts(tiers, fleet, host):
    """An operator opens and closes an incident within 0.6 s: the SLA report counts one minute of downtime (each
    started minute whole); the incident's impact counts the same minute, so it carries the whole credit instead of
    a share of 0 from its seconds cut to a whole 0."""
    from decimal import Decimal

    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 6, 10, 3), utc(2026, 6, 10, 3, 10))  # 10 min: 1 min down is 90 %
    fleet.place(h.id, "vm1", utc(2026, 6, 10, 3), utc(2026, 6, 10, 3, 10))
    start = utc(2026, 6, 10, 3, 5)
    inc = incident(h, start, start + dt.timedelta(milliseconds=600))
    collect(utc(2026, 6, 1), utc(2026, 7, 1))
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        body = _staff(StaffRole.SUPPORT).get(f"/api/v1/incidents/{inc.pk}/impact/").json()
    [credit] = body["resources"][0]["credits"]
    assert Decimal(credit["report_credit_amount"]) > 0
    assert credit["credit_amount"] == credit["report_credit_amount"]


def test_a_resource_not_metered_yet_is_named_with_its_project_s_organization(tiers, fleet, host):
    """The incident comes minutes after the launch, before the first usage period is metered: the impact still
    names the tenant (from the placement's project), so the tenant panel shows the open incident."""
    org, project = make_org("acme")
    h = host("n1")
    fleet.place(h.id, "vm1", utc(2026, 6, 1, 0, 5), project=project)
    inc = Incident.objects.create(host=h, start=utc(2026, 6, 1, 0, 10), reason="XID 79", provider_at_fault=True)
    with time_machine.travel(utc(2026, 6, 1, 0, 20), tick=False):
        body = _staff(StaffRole.SUPPORT).get(f"/api/v1/incidents/{inc.pk}/impact/").json()
    [vm] = body["resources"]
    assert (vm["resource_id"], vm["organization"], vm["organization_name"], vm["project"]) == (
        "vm1", str(org.pk), "acme", str(project.pk))
    assert vm["downtime_s"] == 600 and body["open"] is True


def test_not_at_fault_causes_downtime_but_no_credit(tiers, fleet, host):
    org, project = make_org("acme")
    h = host("n1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 6, 2))
    fleet.place(h.id, "vm1", utc(2026, 6, 1))
    inc = incident(h, utc(2026, 6, 1, 3), utc(2026, 6, 1, 4), at_fault=False)
    body = _staff(StaffRole.OPERATOR).get(f"/api/v1/incidents/{inc.pk}/impact/").json()
    assert (body["counts_for_sla"], body["downtime_s"], body["credits"]) == (False, 3600, [])


def test_an_operator_corrects_an_incident_and_bad_changes_write_nothing(host):
    h = host("n1")
    earlier = incident(h, utc(2026, 6, 1, 0), utc(2026, 6, 1, 2))
    inc = Incident.objects.create(host=h, start=utc(2026, 6, 2, 3), reason="PSU", provider_at_fault=True)
    ops = _staff(StaffRole.OPERATOR)
    url = f"/api/v1/incidents/{inc.pk}/"
    changed = ops.patch(url, {"start": "2026-06-02T01:30:00Z", "reason": "PSU failed", "provider_at_fault": False})
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["start"], changed.json()["reason"], changed.json()["provider_at_fault"]) == (
        "2026-06-02T01:30:00Z", "PSU failed", False)
    event = AuditEvent.objects.get(action="inventory.incident.update")
    assert event.before == {"start": "2026-06-02T03:00:00+00:00", "reason": "PSU", "provider_at_fault": True}
    refusals = [
        ({"end": "2026-06-02T05:00:00Z"}, 409, "incident_open", "end"),
        ({"start": "2026-06-01T01:00:00Z"}, 400, "invalid_time", "start"),      # overlaps the earlier incident
        ({"start": (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()}, 400, "invalid_time", "start"),
        ({"reason": "  "}, 400, "validation_error", "reason"),
    ]
    for body, status, code, field in refusals:
        r = ops.patch(url, body)
        assert (r.status_code, r.json()["code"]) == (status, code), (body, r.json())
        assert field in r.json()["errors"]
    closed = ops.patch(f"/api/v1/incidents/{earlier.pk}/", {"end": "2026-06-01T01:00:00Z"})
    assert closed.status_code == 200 and closed.json()["duration_s"] == 3600
    assert ops.patch(f"/api/v1/incidents/{earlier.pk}/", {"end": "2026-05-31T00:00:00Z"}).json()["code"] == "invalid_time"
    inc.refresh_from_db()
    assert (inc.reason, inc.provider_at_fault) == ("PSU failed", False)
    assert AuditEvent.objects.filter(action="inventory.incident.update").count() == 2
    assert _staff(StaffRole.BILLING_ADMIN).patch(url, {"reason": "x"}).status_code == 403


def _june_with_a_9_hour_incident(fleet, host):
    org, project = make_org("acme", tier="premium")
    book(utc(2026, 1, 1), {(H100, "premium", "on_demand"): "4.00"})
    h = host("gpu-node-1")
    fleet.run(org, project, "vm1", utc(2026, 6, 1), utc(2026, 8, 1))
    fleet.place(h.id, "vm1", utc(2026, 5, 31))
    inc = incident(h, utc(2026, 6, 10, 3), utc(2026, 6, 10, 12))   # 9 h
    collect(utc(2026, 6, 1), utc(2026, 7, 2))
    return org, inc


def test_an_incident_credited_on_a_finalized_invoice_is_not_corrected(tiers, fleet, host):
    """June is finalized with the 9 h incident's credit computed (it waits on July's draft): moving its start is a
    409 `incident_already_credited` naming the invoice and saying to issue a credit note; nothing changes."""
    from apps.billing.models import Invoice, SlaReport

    org, inc = _june_with_a_9_hour_incident(fleet, host)
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06")
        invoice_run_execute(period="2026-07", finalize=False)
        report = SlaReport.objects.get(period="2026-06")
        assert report.downtime_minutes == 540 and report.credit_amount > 0
        ops = _staff(StaffRole.OPERATOR)
        r = ops.patch(f"/api/v1/incidents/{inc.pk}/", {"start": "2026-06-10T11:00:00Z"})
        # the reason is not billed: it may still be corrected
        reason = ops.patch(f"/api/v1/incidents/{inc.pk}/", {"reason": "PSU"})
    june = Invoice.objects.get(organization=org, period="2026-06")
    assert (r.status_code, r.headers["Content-Type"], r.json()["code"]) == (
        409, "application/problem+json", "incident_already_credited")
    assert r.json()["invoices"] == [june.display_number] and "credit note" in r.json()["detail"]
    inc.refresh_from_db()
    assert inc.start == utc(2026, 6, 10, 3)
    assert SlaReport.objects.get(period="2026-06").downtime_minutes == 540
    assert reason.status_code == 200
    assert AuditEvent.objects.get(action="inventory.incident.update").after == {"reason": "PSU"}


def test_correcting_an_incident_billed_on_a_draft_re_rates_the_draft(tiers, fleet, host):
    """June is only drafted: moving the start from 03:00 to 11:00 re-rates June's draft in the same request, so the
    SLA report, the draft's usage and the incident's impact all say 1 h (as a fresh run would)."""
    from decimal import Decimal

    from apps.billing.models import Invoice, SlaReport

    org, inc = _june_with_a_9_hour_incident(fleet, host)
    ops = _staff(StaffRole.OPERATOR)
    with time_machine.travel(utc(2026, 7, 2), tick=False):
        invoice_run_execute(period="2026-06", finalize=False)
        before = Invoice.objects.get(organization=org, period="2026-06").subtotal
        r = ops.patch(f"/api/v1/incidents/{inc.pk}/", {"start": "2026-06-10T11:00:00Z"})
        assert r.status_code == 200, r.json()
        impact = ops.get(f"/api/v1/incidents/{inc.pk}/impact/").json()
    report = SlaReport.objects.get(period="2026-06")
    june = Invoice.objects.get(organization=org, period="2026-06")
    assert report.downtime_minutes == 60
    assert june.subtotal - before == Decimal("32.00")   # 8 h more billed at $4.00/h
    assert report.billed_amount == june.subtotal
    [credit] = impact["resources"][0]["credits"]
    assert credit["credit_amount"] == credit["report_credit_amount"] == str(report.credit_amount)
    assert impact["downtime_s"] == 3600
