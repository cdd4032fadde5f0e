"""Server-rendered pages of sign-in (until the console has its own): the single sign-on failure page."""
from django.shortcuts import render

# reason code (from `apps.identity.signin.sso_resolve_user` and the callback) -> what the user can do
REASONS = {
    "email_not_verified": "Your identity provider did not confirm that you own this e-mail address. "
                          "Verify the address with your provider, then sign in again.",
    "email_missing": "Your identity provider did not send an e-mail address.",
    "staff_link_refused": "This is a staff account: single sign-on cannot be linked to it by e-mail. Sign in with "
                          "your password and second factor first, then sign in with single sign-on to link it.",
    "identity_conflict": "This account is already linked to another identity at this provider.",
    "account_disabled": "This account is disabled.",
    "no_account": "There is no account for this e-mail address. Ask your organization's owner for an invitation.",
    "claims_invalid": "The identity provider's answer was not valid.",
    "provider_error": "The identity provider refused or cancelled the sign-in.",
    "sso_failed": "The single sign-on could not be completed (it may have expired). Try again.",
}


def sign_in_failed(request):
    """GET /sign-in/failed?reason=<code>: says why a single sign-on did not sign in (HTTP 200, HTML)."""
    reason = request.GET.get("reason", "")
    message = REASONS.get(reason, REASONS["sso_failed"])
    return render(request, "identity/sign_in_failed.html",
                  {"reason": reason if reason in REASONS else "sso_failed", "message": message})
