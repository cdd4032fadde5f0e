"""OIDC is off unless configured (the linking rules: test_sso_linking.py; a real provider: tests/e2e)."""
import environ
import pytest

from apps.identity.oidc_config import oidc_settings


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
