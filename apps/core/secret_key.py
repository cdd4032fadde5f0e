"""The `SECRET_KEY` setting, refused when it is not secret.

Django signs sessions, CSRF tokens, password-reset and our invitation and sign-up links
(`django.core.signing`) with `SECRET_KEY`; the development default is public (it is in this repository), so
anyone could forge those links with it. With `DEBUG` false the server refuses to start (ImproperlyConfigured at
settings time: web, worker, beat and every management command) unless `SECRET_KEY` is set to a key that passes
Django's own deployment check (`security.W009`: at least 50 characters, at least 5 different ones, not the
`django-insecure-` prefix of `startproject`) and is not the development default. `make run` generates one
into `var/secret_key` (`scripts/secret-key.sh`); production sets its own.
"""
from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

DEVELOPMENT_SECRET_KEY = "dev-insecure-change-me-in-production"
MIN_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5


def weakness(key: str) -> str | None:
    """Why `key` is not a usable secret key, or None when it is."""
    if not key:
        return "it is not set"
    if key == DEVELOPMENT_SECRET_KEY:
        return "it is the public development default"
    if key.startswith("django-insecure-"):
        return "it is a generated development key (django-insecure-)"
    if len(key) < MIN_LENGTH or len(set(key)) < MIN_UNIQUE_CHARACTERS:
        return f"it is shorter than {MIN_LENGTH} characters or has fewer than {MIN_UNIQUE_CHARACTERS} different ones"
    return None


def secret_key_from(key: str, *, debug: bool) -> str:
    """The `SECRET_KEY` to use, given the environment's value (`key`, "" when unset). With `debug` an unset key
    is the development default; otherwise a weak or missing key raises ImproperlyConfigured naming the variable
    and how to make one."""
    if debug:
        return key or DEVELOPMENT_SECRET_KEY
    reason = weakness(key)
    if reason is not None:
        raise ImproperlyConfigured(
            f"SECRET_KEY must be set to a long random value when DEBUG is false ({reason}); it signs sessions and "
            "invitation and sign-up links. Generate one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(50))' (make run keeps one in var/secret_key).")
    return key
