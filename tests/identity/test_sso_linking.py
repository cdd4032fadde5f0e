"""Single sign-on links by the provider's (iss, sub); only a verified e-mail links a new identity, never to staff.

The resolution rule is `apps.identity.signin.sso_resolve_user`; the full flow against a real provider is in
tests/e2e/test_sso_provider.py."""
import datetime as dt

import pytest

from apps.audit.models import AuditEvent
from apps.identity.models import ExternalIdentity, StaffRole
from apps.identity.signin import SsoRefused, email_is_verified, sso_asserts_mfa, sso_resolve_user
from apps.tenancy.models import Invitation, OrgRole
from tests.tenancy.helpers import make_org, make_user, member

ISS = "http://127.0.0.1:9/idp"


def _claims(sub="s-1", email="dev@acme.test", **extra):
    return {"iss": ISS, "sub": sub, "email": email, **extra}


@pytest.mark.parametrize("value", [None, False, "false", "False", "", "yes", 1, "1"])
def test_only_true_counts_as_verified(value):
    claims = {} if value is None else {"email_verified": value}
    assert email_is_verified(claims) is False


@pytest.mark.parametrize("value", [True, "true", "TRUE"])
def test_true_and_the_string_true_are_verified(value):
    assert email_is_verified({"email_verified": value}) is True


@pytest.mark.parametrize("claims", [{}, {"email_verified": "false"}, {"email_verified": False}])
def test_an_unverified_email_does_not_take_over_an_account(db, claims):
    user = make_user("dev@acme.test")
    with pytest.raises(SsoRefused) as refused:
        sso_resolve_user(claims=_claims(**claims))
    assert refused.value.code == "email_not_verified" and refused.value.user == user
    assert not ExternalIdentity.objects.exists()


def test_a_verified_email_links_once_then_the_subject_decides(db):
    org = make_org("acme")
    user = make_user("dev@acme.test")
    member(user, org, OrgRole.MEMBER)
    assert sso_resolve_user(claims=_claims(email="Dev@ACME.test", email_verified=True)) == user
    link = ExternalIdentity.objects.get()
    assert (link.user, link.issuer, link.subject) == (user, ISS, "s-1")
    assert AuditEvent.objects.get(action="sso.link").organization_id == org.pk
    # the provider's e-mail changes (or is no longer verified): the subject still signs in to the same account
    assert sso_resolve_user(claims=_claims(email="renamed@elsewhere.test")) == user
    # another subject of the same issuer claiming the e-mail is refused
    with pytest.raises(SsoRefused) as refused:
        sso_resolve_user(claims=_claims(sub="s-2", email_verified=True))
    assert refused.value.code == "identity_conflict"


def test_a_staff_account_is_never_linked_by_email(db):
    make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    with pytest.raises(SsoRefused) as refused:
        sso_resolve_user(claims=_claims(email="op@provider.test", email_verified=True))
    assert refused.value.code == "staff_link_refused"
    assert not ExternalIdentity.objects.exists()


def test_a_signed_in_user_links_its_own_identity_staff_included(db):
    operator = make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    assert sso_resolve_user(claims=_claims(email="someone@idp.test"), current_user=operator) == operator
    assert sso_resolve_user(claims=_claims(email="someone@idp.test")) == operator


def test_unknown_emails_need_an_invitation_or_create_user(db, settings):
    with pytest.raises(SsoRefused) as refused:
        sso_resolve_user(claims=_claims(email="new@acme.test", email_verified=True))
    assert refused.value.code == "no_account"
    org = make_org("acme")
    from apps.core.clock import now

    Invitation.objects.create(organization=org, email="new@acme.test", role=OrgRole.MEMBER,
                              expires_at=now() + dt.timedelta(days=1))
    user = sso_resolve_user(claims=_claims(email="new@acme.test", email_verified=True, name="New Person"))
    assert (user.email, user.full_name, user.has_usable_password()) == ("new@acme.test", "New Person", False)
    settings.OIDC_CREATE_USER = True
    assert sso_resolve_user(claims=_claims(sub="s-9", email="free@acme.test", email_verified="true")).email \
        == "free@acme.test"


def test_disabled_accounts_and_service_accounts_are_refused(db):
    user = make_user("dev@acme.test")
    sso_resolve_user(claims=_claims(email_verified=True))
    user.is_active = False
    user.save(update_fields=["is_active"])
    with pytest.raises(SsoRefused) as refused:
        sso_resolve_user(claims=_claims())
    assert refused.value.code == "account_disabled"


def test_mfa_is_asserted_by_amr_or_a_configured_acr(settings):
    assert sso_asserts_mfa({"amr": ["pwd", "otp"]}) and sso_asserts_mfa({"amr": ["mfa"]})
    assert sso_asserts_mfa({"amr": ["hwk"]})
    assert not sso_asserts_mfa({"amr": ["pwd"]}) and not sso_asserts_mfa({})
    assert not sso_asserts_mfa({"acr": "urn:example:mfa"})
    settings.OIDC_MFA_ACR_VALUES = ["urn:example:mfa"]
    assert sso_asserts_mfa({"acr": "urn:example:mfa"})
