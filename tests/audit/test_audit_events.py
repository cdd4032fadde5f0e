"""/audit-events: every mutation writes one event in the same transaction; tenants see their organization's
events only, with filters; staff see all."""
import datetime as dt

import pytest

from apps.audit.models import AuditEvent
from apps.identity.models import StaffRole
from apps.tenancy.models import OrgRole, Project, Quota
from tests.tenancy.helpers import client_for, make_org, make_user, member, token_for


@pytest.fixture
def two_tenants(db):
    a, b = make_org("alpha"), make_org("beta")
    owner_a, owner_b = make_user("owner@alpha.test"), make_user("owner@beta.test")
    member(owner_a, a, OrgRole.OWNER)
    member(owner_b, b, OrgRole.OWNER)
    ca, cb = client_for(token_for(owner_a, organization=a)), client_for(token_for(owner_b, organization=b))
    for client, org, slug in ((ca, a, "web"), (ca, a, "ml"), (cb, b, "db")):
        assert client.post("/api/v1/projects/", {"organization": str(org.pk), "slug": slug, "name": slug}).status_code == 201
    return a, b, ca, cb


def _actions(response):
    assert response.status_code == 200, response.content
    return sorted(e["action"] + ":" + (e["after"] or {}).get("slug", "") for e in response.json()["results"])


def test_tenants_see_only_their_organizations_events(two_tenants):
    a, b, ca, cb = two_tenants
    assert _actions(ca.get("/api/v1/audit-events/")) == ["api_token.create:", "project.create:ml",
                                                         "project.create:web"]
    assert _actions(cb.get("/api/v1/audit-events/")) == ["api_token.create:", "project.create:db"]
    other = AuditEvent.objects.filter(organization=b).first()
    assert ca.get(f"/api/v1/audit-events/{other.pk}/").status_code == 404


def test_filters_actor_action_target_and_time_range(two_tenants):
    a, b, ca, cb = two_tenants
    web = Project.objects.get(slug="web")
    assert _actions(ca.get("/api/v1/audit-events/", {"action": "project.create"})) == ["project.create:ml",
                                                                                       "project.create:web"]
    assert _actions(ca.get("/api/v1/audit-events/", {"action": "project."})) == ["project.create:ml",
                                                                                 "project.create:web"]
    assert _actions(ca.get("/api/v1/audit-events/", {"target_type": "tenancy.project", "target_id": str(web.pk)})) \
        == ["project.create:web"]
    assert len(_actions(ca.get("/api/v1/audit-events/", {"actor": "owner@alpha.test"}))) == 2
    assert _actions(ca.get("/api/v1/audit-events/", {"actor": "owner@beta.test"})) == []
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat()
    assert _actions(ca.get("/api/v1/audit-events/", {"created_after": future})) == []
    assert len(_actions(ca.get("/api/v1/audit-events/", {"created_before": future}))) == 3


def test_staff_see_all_events_and_their_own_writes_are_audited(two_tenants):
    a, b, ca, cb = two_tenants
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    client = client_for(token_for(staff, staff=True))
    assert client.patch(f"/api/v1/organizations/{a.pk}/", {"plan": "enterprise"}).status_code == 200
    events = client.get("/api/v1/audit-events/", {"page_size": 500}).json()["results"]
    assert len(events) == AuditEvent.objects.count()
    staff_event = next(e for e in events if e["action"] == "organization.update")
    assert staff_event["actor_is_staff"] is True and staff_event["before"] == {"plan": "default"}
    assert staff_event["organization"] == str(a.pk) and staff_event["token_prefix"]
    # the tenant sees the provider's change to its organization
    assert "organization.update:" in _actions(ca.get("/api/v1/audit-events/"))


def test_staff_filter_the_whole_log_by_organization_staff_actor_and_target_app(two_tenants):
    """The admin portal's audit screen: staff narrow the whole log to one organization, to what staff (or tenants)
    did, and to the objects of one app."""
    a, b, ca, cb = two_tenants
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    client = client_for(token_for(staff, staff=True))
    assert client.patch(f"/api/v1/organizations/{b.pk}/", {"plan": "enterprise"}).status_code == 200
    q = {"page_size": 500}
    assert _actions(client.get("/api/v1/audit-events/", {**q, "actor_is_staff": "true"})) == ["organization.update:"]
    assert _actions(client.get("/api/v1/audit-events/", {**q, "organization": str(b.pk), "actor_is_staff": "false"})) \
        == ["api_token.create:", "project.create:db"]
    assert _actions(client.get("/api/v1/audit-events/", {**q, "target_type": "tenancy.", "organization": str(b.pk)})) \
        == ["organization.update:", "project.create:db"]
    assert _actions(client.get("/api/v1/audit-events/", {**q, "target_type": "tenancy."})) == [
        "organization.update:", "project.create:db", "project.create:ml", "project.create:web"]
    bad = client.get("/api/v1/audit-events/", {"actor_is_staff": "perhaps"})
    assert bad.status_code == 400 and "actor_is_staff" in bad.json()["errors"]


def test_staff_read_each_targets_name_in_one_query_per_type_tenants_do_not(two_tenants, django_assert_max_num_queries):
    """The admin portal names what an event touched: the project's name, the organization's, a user's e-mail; an
    object since deleted, a target that is no model or an id of the wrong kind has none. Tenants get null."""
    from apps.audit.services import audit_record

    a, b, ca, cb = two_tenants
    staff = make_user("ops@provider.test", staff_role=StaffRole.OPERATOR)
    client = client_for(token_for(staff, staff=True))
    assert client.patch(f"/api/v1/organizations/{a.pk}/", {"plan": "enterprise"}).status_code == 200
    gone = Project.objects.create(organization=b, slug="gone", name="Gone")
    audit_record(actor=None, action="project.delete", target=gone)
    gone_id = str(gone.pk)
    gone.delete()
    quota = Quota.objects.filter(organization=a).first()
    audit_record(actor=None, action="quota.update", target=quota, before={"limit": 1}, after={"limit": 2})
    audit_record(actor=None, action="x.y", target_type="nosuch.model", target_id="1")
    audit_record(actor=None, action="x.z", target_type="tenancy.project", target_id="not-a-uuid")
    with django_assert_max_num_queries(12):
        events = client.get("/api/v1/audit-events/", {"page_size": 500}).json()["results"]
    named = {(e["action"], e["target_id"]): e["target_name"] for e in events}
    web = Project.objects.get(slug="web")
    assert named[("project.create", str(web.pk))] == "web"
    assert named[("organization.update", str(a.pk))] == "Alpha"
    assert named[("quota.update", str(quota.pk))] == quota.resource
    assert named[("project.delete", gone_id)] is None
    assert named[("x.y", "1")] is None and named[("x.z", "not-a-uuid")] is None
    one = client.get(f"/api/v1/audit-events/{next(e['id'] for e in events if e['action'] == 'organization.update')}/")
    assert one.json()["target_name"] == "Alpha"
    # the tenant reads the same events without names
    assert {e["target_name"] for e in ca.get("/api/v1/audit-events/").json()["results"]} == {None}


def test_target_names_take_one_query_per_type_whatever_the_page(two_tenants, django_assert_num_queries):
    from apps.audit.models import AuditEvent as Event
    from apps.audit.selectors import audit_target_names

    events = list(Event.objects.all())
    types = {e.target_type for e in events if e.target_type}
    with django_assert_num_queries(len(types)):
        names = audit_target_names(events)
    assert "web" in names.values()
