"""Staff create an organization and invite its owner; the owner accepts and works; visibility rules."""
import pytest
from django.core import mail

from apps.audit.models import AuditEvent
from apps.identity.models import StaffRole
from apps.tenancy.models import Membership, Organization, OrgRole, Quota
from apps.tenancy.quotas import PLANS

from .helpers import client_for, make_org, make_project, make_user, member, token_for


@pytest.mark.django_db(transaction=True)
def test_staff_create_org_with_plan_quotas_and_owner_invitation():
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    client = client_for(token_for(staff, staff=True))
    r = client.post("/api/v1/organizations/", {"slug": "acme", "name": "Acme", "owner_email": "Boss@Acme.test",
                                               "plan": "trial", "billing_timezone": "Europe/Berlin"})
    assert r.status_code == 201, r.content
    org = Organization.objects.get(slug="acme")
    assert org.billing_timezone == "Europe/Berlin" and org.currency == "USD"
    assert dict(Quota.objects.filter(organization=org).values_list("resource", "limit")) == PLANS["trial"]
    assert [m.to for m in mail.outbox] == [["boss@acme.test"]]
    token = mail.outbox[0].body.split("?token=")[1].split()[0]
    r = client_for(None).post("/api/v1/invitations/accept/", {"token": token, "password": "a-long-password-42",
                                                              "full_name": "The Boss"})
    assert r.status_code == 201, r.content
    owner = Membership.objects.get(organization=org, role=OrgRole.OWNER).user
    assert owner.email == "boss@acme.test" and owner.check_password("a-long-password-42")
    actions = list(AuditEvent.objects.filter(organization=org).order_by("id").values_list("action", flat=True))
    assert actions == ["organization.create", "invitation.create", "invitation.accept"]


@pytest.mark.django_db
def test_bad_organization_fields_are_rejected():
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    client = client_for(token_for(staff, staff=True))
    r = client.post("/api/v1/organizations/", {"slug": "x", "name": "X", "owner_email": "a@x.test", "plan": "gold"})
    assert (r.status_code, r.json()["code"]) == (400, "unknown_plan")
    r = client.post("/api/v1/organizations/", {"slug": "x", "name": "X", "owner_email": "a@x.test",
                                               "billing_timezone": "Mars/Olympus"})
    assert (r.status_code, list(r.json()["errors"])) == (400, ["billing_timezone"])
    make_org("taken")
    r = client.post("/api/v1/organizations/", {"slug": "taken", "name": "X", "owner_email": "a@x.test"})
    assert (r.status_code, r.json()["code"]) == (409, "slug_taken")
    assert Organization.objects.count() == 1


@pytest.mark.django_db
def test_support_staff_reads_but_cannot_write():
    support = make_user("support@provider.test", staff_role=StaffRole.SUPPORT)
    org = make_org("acme")
    client = client_for(token_for(support, staff=True))
    assert client.get(f"/api/v1/organizations/{org.pk}/").status_code == 200
    r = client.patch(f"/api/v1/organizations/{org.pk}/", {"name": "Hacked"})
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")


@pytest.mark.django_db
def test_project_member_sees_only_its_project_and_project_roles_apply():
    org = make_org("acme")
    p1, p2 = make_project(org, "p1"), make_project(org, "p2")
    dev = make_user("dev@acme.test")
    member(dev, org, "member", project=p1)
    client = client_for(token_for(dev, project=p1, scope="write"))
    assert [p["slug"] for p in client.get("/api/v1/projects/").json()["results"]] == ["p1"]
    assert client.get(f"/api/v1/projects/{p2.pk}/").status_code == 404
    r = client.patch(f"/api/v1/projects/{p1.pk}/", {"name": "x"})  # project member, not project admin
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    Membership.objects.filter(user=dev).update(role="admin")
    assert client.patch(f"/api/v1/projects/{p1.pk}/", {"name": "x"}).status_code == 200


@pytest.mark.django_db
def test_project_token_narrows_an_org_owner():
    org = make_org("acme")
    p1, p2 = make_project(org, "p1"), make_project(org, "p2")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    client = client_for(token_for(owner, project=p1))
    assert [p["slug"] for p in client.get("/api/v1/projects/").json()["results"]] == ["p1"]
    assert client.get(f"/api/v1/projects/{p2.pk}/").status_code == 404
    r = client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": "p3", "name": "P3"})
    assert r.status_code == 403  # a project token never acts at organization level


@pytest.mark.django_db
def test_project_with_resources_cannot_be_deleted():
    import uuid

    from apps.operations.models import Operation

    org = make_org("acme")
    project = make_project(org, "busy")
    owner = make_user("owner@acme.test")
    member(owner, org, OrgRole.OWNER)
    Operation.objects.create(kind="x", target_type="x", target_id=uuid.uuid4(), project=project)
    client = client_for(token_for(owner, organization=org))
    audits = AuditEvent.objects.count()
    r = client.delete(f"/api/v1/projects/{project.pk}/")
    assert (r.status_code, r.json()["code"]) == (409, "project_not_empty")
    assert AuditEvent.objects.count() == audits


@pytest.mark.django_db
def test_organization_fields_by_role():
    org = make_org("acme")
    billing, admin = make_user("billing@acme.test"), make_user("admin@acme.test")
    member(billing, org, OrgRole.BILLING)
    member(admin, org, OrgRole.ADMIN)
    as_billing = client_for(token_for(billing, organization=org))
    as_admin = client_for(token_for(admin, organization=org))
    assert as_billing.patch(f"/api/v1/organizations/{org.pk}/", {"billing_email": "ap@acme.test"}).status_code == 200
    r = as_billing.patch(f"/api/v1/organizations/{org.pk}/", {"require_2fa": True})
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    assert as_admin.patch(f"/api/v1/organizations/{org.pk}/", {"require_2fa": True}).status_code == 200
    r = as_admin.patch(f"/api/v1/organizations/{org.pk}/", {"plan": "enterprise"})
    assert (r.status_code, r.json()["code"]) == (403, "permission_denied")
    r = as_admin.patch(f"/api/v1/organizations/{org.pk}/", {"currency": "EUR"})
    assert r.status_code == 403  # staff-only field
    org.refresh_from_db()
    assert (org.billing_email, org.require_2fa, org.plan, org.currency) == ("ap@acme.test", True, "default", "USD")


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/projects/", "/api/v1/memberships/", "/api/v1/quotas/",
                                  "/api/v1/invitations/", "/api/v1/audit-events/", "/api/v1/tokens/",
                                  "/api/v1/service-accounts/"])
def test_filtering_by_another_tenants_id_looks_like_a_random_id(path):
    import uuid

    mine, theirs = make_org("mine"), make_org("theirs")
    owner = make_user("owner@mine.test")
    member(owner, mine, OrgRole.OWNER)
    client = client_for(token_for(owner, organization=mine))
    writes = (Organization.objects.count(), Membership.objects.count(), AuditEvent.objects.count())
    answers = []
    for org in (str(theirs.pk), str(uuid.uuid4())):
        r = client.get(path, {"organization": org})
        body = r.json()
        body.pop("request_id", None)
        answers.append((r.status_code, body))
    other, random = answers
    # ADR 0010: a reference filter answers 400 "Not found." for any id the caller cannot see; a history list
    # (audit events) filters on stored ids, so an id its rows do not carry is an empty page.
    expected = ((200, {"next": None, "previous": None, "results": []}) if path == "/api/v1/audit-events/" else
                (400, {"type": "https://docs.gpucloud.dev/errors/validation_error", "title": "Invalid input", "status": 400,
                 "detail": "Invalid input: organization.", "instance": path, "code": "validation_error",
                 "errors": {"organization": ["Not found."]}}))
    assert other == random == expected
    assert (Organization.objects.count(), Membership.objects.count(), AuditEvent.objects.count()) == writes
