"""Server-rendered landing pages of the e-mailed links (until the console has its own):
`/invitations/accept?token=` and `/signup/verify?token=`. Each GET shows what the link is for, or why it cannot
be used; its form POSTs to the same page (CSRF-checked) and calls the same service as the API."""
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.shortcuts import render
from django.urls import reverse

from apps.core.errors import DomainError, ValidationFailed
from apps.core.handlers import not_found
from apps.identity.signin import require_second_factor

from . import services

# a refused field of the sign-up and invitation forms -> the label the page shows for it
FIELD_LABELS = {"password": "Password", "full_name": "Full name", "organization_slug": "Organization short name",
                "organization_name": "Organization name", "token": "Link", "email": "E-mail"}


def _problem(request, template: str, exc: DomainError, context: dict):
    """The form page again with the refusal: its message, each refused field as (label, messages) by the form's
    labels, and the problem's `code` (for support), with the problem's HTTP status."""
    fields = [(FIELD_LABELS.get(name, name.replace("_", " ").capitalize()), messages if isinstance(messages, list)
               else [messages]) for name, messages in (exc.errors or {}).items()]
    return render(request, template, {**context, "error": exc.detail, "code": exc.code, "field_errors": fields},
                  status=exc.status)


def _sso_url(token: str) -> str:
    """The single sign-on start that comes back to this invitation (`/oidc/authenticate/?next=...`), or "" when
    OIDC is not configured. A pending invitee without an account gets one on that sign-in
    (`apps.identity.signin.sso_resolve_user`), then confirms here."""
    if not getattr(settings, "OIDC_ENABLED", False):
        return ""
    back = reverse("invitation-accept-page") + "?" + urlencode({"token": token})
    return reverse("oidc_authentication_init") + "?" + urlencode({"next": back})


def invitation_accept_page(request):
    """GET: the invitation (organization, project, role) and a form; POST: accept it (a new account takes a
    password; a signed-in user with the invited e-mail just confirms). With OIDC configured, a caller who is not
    signed in also gets a "Sign in with single sign-on" link that returns to this page. Errors render with the API's status and
    code (400 `invitation_invalid`, 410 `invitation_expired` / `invitation_revoked`, 409 ...). A signed-in
    session passes the API's two-factor gate first (`apps.identity.signin.require_second_factor`): 403
    `otp_required` / `two_factor_required`, nothing accepted, and the page links to the console sign-in to
    finish the second factor."""
    token = request.POST.get("token") or request.GET.get("token", "")
    actor = request.user if request.user.is_authenticated else None
    context = {"token": token, "signed_in_as": getattr(actor, "email", ""), "sso_url": _sso_url(token)}
    try:
        invitation = services.invitation_preview(token=token)
    except DomainError as exc:
        return _problem(request, "tenancy/invitation_accept.html", exc, context)
    context["invitation"] = invitation
    context["full_name"] = request.POST.get("full_name", "")  # kept when the page comes back with a refusal
    if request.method != "POST":
        return render(request, "tenancy/invitation_accept.html", context)
    try:
        if actor is not None:  # the same gate as the API (`SessionAuthentication`): one function for both
            require_second_factor(actor, request.session)
        membership = services.invitation_accept(actor=actor, token=token, password=request.POST.get("password"),
                                                full_name=request.POST.get("full_name", ""))
    except DomainError as exc:
        return _problem(request, "tenancy/invitation_accept.html", exc, context)
    return render(request, "tenancy/invitation_accept.html", {**context, "membership": membership}, status=201)


def signup_verify_page(request):
    """GET: the sign-up form for a verified e-mail link; POST: create the account, its trial organization and
    project (`signup_complete`). 404 while `SIGNUP_ENABLED` is off, like the API."""
    if not getattr(settings, "SIGNUP_ENABLED", False):
        return not_found(request)
    token = request.POST.get("token") or request.GET.get("token", "")
    context = {"token": token}
    if request.method != "POST":
        return render(request, "tenancy/signup_verify.html", context)
    fields = {k: request.POST.get(k, "") for k in ("organization_slug", "organization_name", "full_name")}
    context.update(fields)
    try:
        try:
            validate_slug(fields["organization_slug"])
        except ValidationError:
            raise ValidationFailed("The organization short name takes letters, digits, dashes and underscores.",
                                   errors={"organization_slug": ["a slug, e.g. acme-ml"]})
        membership = services.signup_complete(token=token, password=request.POST.get("password", ""), **fields)
    except DomainError as exc:
        return _problem(request, "tenancy/signup_verify.html", exc, context)
    return render(request, "tenancy/signup_verify.html", {**context, "membership": membership}, status=201)
