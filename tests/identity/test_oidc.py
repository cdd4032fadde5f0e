"""OIDC is off unless configured; when on, the backend maps the e-mail claim to an existing user only."""
import environ
import pytest

from apps.identity.oidc import OIDCBackend
from apps.identity.oidc_config import oidc_settings
from tests.tenancy.helpers import make_user


def test_off_unless_a_client_id_is_configured(monkeypatch):
    monkeypatch.delenv("OIDC_RP_CLIENT_ID", raising=False)
    assert oidc_settings(environ.Env()) == (False, {})
    monkeypatch.setenv("OIDC_RP_CLIENT_ID", "gpucloud")
    monkeypatch.setenv("OIDC_OP_TOKEN_ENDPOINT", "https://idp.example/token")
    enabled, values = oidc_settings(environ.Env())
    assert enabled and values["OIDC_RP_CLIENT_ID"] == "gpucloud" and values["OIDC_CREATE_USER"] is False
    assert values["OIDC_OP_TOKEN_ENDPOINT"] == "https://idp.example/token"


def test_default_settings_have_no_oidc_backend_or_urls(settings):
    from django.urls import Resolver404, resolve

    assert settings.OIDC_ENABLED is False
    assert "apps.identity.oidc.OIDCBackend" not in settings.AUTHENTICATION_BACKENDS
    with pytest.raises(Resolver404):
        resolve("/oidc/authenticate/")


@pytest.mark.django_db
def test_backend_matches_verified_email_case_insensitively(settings):
    settings.OIDC_RP_CLIENT_ID = "gpucloud"
    settings.OIDC_RP_CLIENT_SECRET = "client-secret-for-tests"
    settings.OIDC_OP_TOKEN_ENDPOINT = "https://idp.example/token"
    settings.OIDC_OP_USER_ENDPOINT = "https://idp.example/userinfo"
    settings.OIDC_RP_SIGN_ALGO = "HS256"
    user = make_user("dev@acme.test")
    backend = OIDCBackend()
    assert list(backend.filter_users_by_claims({"email": "Dev@ACME.test"})) == [user]
    assert backend.verify_claims({"email": "dev@acme.test", "email_verified": False}) is False
    assert backend.verify_claims({"email": "dev@acme.test", "email_verified": True}) is True
