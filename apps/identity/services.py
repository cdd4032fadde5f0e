"""Identity writes: API tokens, service accounts, the caller's profile (sign-in and second factors:
`apps.identity.signin`).

Keyword-only, `actor` first; each runs in one transaction and writes its audit event (never the secret).
"""
from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q

from apps.audit.services import audit_record
from apps.core.clock import now
from apps.core.db import unique_conflict
from apps.core.errors import Conflict, DomainError, NotFound, ValidationFailed
from apps.core.ids import uuid7
from apps.tenancy import authz, selectors
from apps.tenancy.errors import Forbidden
from apps.tenancy.models import Membership, Organization, OrgRole, Project
from apps.tenancy.services.memberships import membership_add

from . import tokens
from .models import ApiToken, ServiceAccount, TokenScope, User
from .signin import security_event

DEFAULT_TOKEN_LIFETIME = dt.timedelta(days=90)
MAX_TOKEN_LIFETIME = dt.timedelta(days=366)


def _validate_token_request(*, scope, organization, project, staff, expires_at) -> None:
    if scope not in TokenScope.values:
        raise ValidationFailed("Unknown token scope.", code="unknown_scope",
                               errors={"scope": ["one of read, write"]})
    if sum(bool(x) for x in (organization, project, staff)) != 1:
        raise ValidationFailed("Bind the token to exactly one of: project, organization, staff.",
                               code="token_binding_required",
                               errors={"non_field_errors": ["exactly one of project, organization, staff"]})
    if expires_at is not None and not (now() < expires_at <= now() + MAX_TOKEN_LIFETIME):
        raise ValidationFailed("The expiry must be in the future and at most 366 days away.",
                               errors={"expires_at": ["between now and 366 days from now"]})


def _check_within_request_token(current: ApiToken, *, organization, project, staff, scope,
                                 expires_at: dt.datetime | None) -> dt.datetime:
    """A token minted with a token stays inside it (ADR 0100): write scope to mint at all (403
    `token_read_only`), no wider scope (403 `token_read_only`), no wider binding (403 `token_binding_wider`: a
    project token mints for its project only, an organization token for the organization or its projects, only a
    staff token mints staff tokens) and no later expiry (400 `token_outlives_parent`). Returns the expiry to use:
    the one asked for, else the default lifetime cut to the parent's expiry."""
    if current.scope != TokenScope.WRITE:
        raise Forbidden("A read-only token cannot mint tokens.", code="token_read_only")
    if not current.is_staff_token:
        if staff:
            raise Forbidden("Only a staff token can mint a staff token.", code="token_binding_wider")
        if current.project_id:
            inside = project is not None and project.pk == current.project_id
        else:
            inside = (organization is not None and organization.pk == current.organization_id) or (
                project is not None and project.organization_id == current.organization_id)
        if not inside:
            raise Forbidden("A token can only mint tokens inside its own binding.", code="token_binding_wider",
                            errors={"binding": [f"inside this token's {current.binding}"]})
    default = now() + DEFAULT_TOKEN_LIFETIME
    if current.expires_at is None:
        return expires_at or default
    if expires_at is None:
        return min(default, current.expires_at)
    if expires_at > current.expires_at:
        raise ValidationFailed("A token cannot outlive the token that mints it.", code="token_outlives_parent",
                               errors={"expires_at": [f"at most {current.expires_at.isoformat()} (this token's "
                                                      "expiry)"]})
    return expires_at


def _check_actor_may_bind(actor, holder: User, *, organization, project, staff, scope) -> None:
    """The caller may only mint what it holds itself: a token never widens its creator's access."""
    if actor is None:
        if staff and not holder.staff_role:
            raise ValidationFailed("This user has no staff role.", errors={"staff": ["user is not staff"]})
        return
    authz.require_write_token(actor)
    if staff:
        if holder.pk != actor.pk or not selectors.is_staff(actor):
            raise Forbidden("Only staff can create staff tokens, for themselves.", code="permission_denied")
        return
    if holder.pk != actor.pk:  # a service account's token: organization owner/admin of its organization
        sa_org = holder.service_account.organization
        authz.authorize_org(actor, sa_org, (OrgRole.OWNER, OrgRole.ADMIN))
        target_org = organization.pk if organization is not None else project.organization_id
        if target_org != sa_org.pk:
            raise ValidationFailed("A service account's tokens stay in its organization.",
                                   errors={"organization": ["not the service account's organization"]})
        actor = holder
    if project is not None and selectors.project_role_of(actor, project) is None:
        raise NotFound("Project not found.")
    if organization is not None and selectors.org_role_of(actor, organization) is None:
        raise NotFound("Organization not found.")


def api_token_create(*, actor, name: str, scope: str = TokenScope.READ, organization: Organization | None = None,
                     project: Project | None = None, staff: bool = False, expires_at: dt.datetime | None = None,
                     user: User | None = None) -> tuple[ApiToken, str]:
    """Mint a token for `user` (default: the actor; or a service account of an organization the actor
    administers). Returns (row, token); the token is never stored or shown again.

    Default expiry 90 days, at most 366. Minted with a token (the request's), the new token stays inside it:
    see `_check_within_request_token` (403 `token_read_only` / `token_binding_wider`, 400 `token_outlives_parent`;
    the default expiry is cut to the parent's). 400 `token_binding_required` / `unknown_scope` /
    `validation_error`; 403 when the caller would widen its own access; 404 for a project/organization it cannot
    see."""
    holder = user or actor
    if holder is None:
        raise ValidationFailed("A token needs a user.", errors={"user": ["required"]})
    _validate_token_request(scope=scope, organization=organization, project=project, staff=staff,
                            expires_at=expires_at)
    current = getattr(actor, "api_token", None)
    try:
        if current is not None:
            expires_at = _check_within_request_token(current, organization=organization, project=project,
                                                     staff=staff, scope=scope, expires_at=expires_at)
        _check_actor_may_bind(actor, holder, organization=organization, project=project, staff=staff, scope=scope)
    except (Forbidden, ValidationFailed) as refused:
        if isinstance(refused, Forbidden) or refused.code == "token_outlives_parent":
            _refusal_recorded(actor, refused.code, scope=scope, organization=organization, project=project,
                              staff=staff, current=current)
            refused.audited = True
        raise
    raw, prefix, digest = tokens.generate()
    with transaction.atomic():
        if current is not None:
            _lock_live_parent(current)
        row = ApiToken.objects.create(
            user=holder, name=name, prefix=prefix, secret_hash=digest, scope=scope, organization=organization,
            project=project, is_staff_token=staff, expires_at=expires_at or now() + DEFAULT_TOKEN_LIFETIME,
            created_by=actor if getattr(actor, "pk", None) else None, parent=current)
        _token_event(actor, "api_token.create", row,
                     after={"name": name, "prefix": prefix, "scope": scope, "binding": row.binding,
                            "user": holder.email, "expires_at": row.expires_at,
                            **({"parent": current.prefix} if current is not None else {})})
    return row, raw


def _refusal_recorded(actor, code: str, *, scope, organization, project, staff, current) -> None:
    """An escalation attempt (403 `token_read_only` / `token_binding_wider` / `permission_denied`, 400
    `token_outlives_parent`) is `api_token.create_refused` in every organization of the caller, like
    `second_factor.change_refused`: written in its own transaction, so the refusal raised after it does not roll
    it back (inside an outer transaction, such as an `Idempotency-Key` request's, it goes with that one). It
    names what was asked (scope, binding) and the minting token's prefix, never a secret."""
    binding = "staff" if staff else (f"project:{project.pk}" if project is not None else
                                     f"organization:{organization.pk}" if organization is not None else "")
    security_event("api_token.create_refused", actor,
                   after={"reason": code, "scope": scope, "binding": binding,
                          **({"parent": current.prefix} if current is not None else {})})


def _lock_live_parent(parent: ApiToken) -> None:
    """Lock the minting token's row and check it is still live, in the mint's transaction. A revocation locks the
    same row before it walks the children, so a mint either commits first (and the revocation finds and revokes
    the child) or waits and is refused here: no child outlives a parent revoked while it was being minted.
    401 `authentication_failed` when the parent was revoked or expired meanwhile."""
    locked = ApiToken.objects.select_for_update(of=("self",)).only("revoked_at", "expires_at").get(pk=parent.pk)
    if locked.revoked_at is not None or (locked.expires_at is not None and locked.expires_at <= now()):
        raise DomainError("Invalid, expired or revoked token.", code="authentication_failed", status=401)


def _token_organization_id(token: ApiToken):
    if token.organization_id:
        return token.organization_id
    return token.project.organization_id if token.project_id else None


def _token_event(actor, action: str, token: ApiToken, *, after: dict) -> None:
    """A token's creation or revocation is a security event of its holder: one audit event in the organization
    the token is bound to (with its project) and one in every other organization the holder belongs to, so the
    owners of each see it (unscoped for a staff token of a user without organizations)."""
    bound = _token_organization_id(token)
    others = set(Membership.objects.filter(user_id=token.user_id).values_list("organization_id", flat=True))
    for org_id in sorted({bound, *others} - {None}) or [None]:
        audit_record(actor=actor, action=action, target_type="identity.apitoken", target_id=str(token.pk),
                     organization=org_id, project=token.project if org_id == bound else None, after=after)


def api_token_revoke(*, actor, token: ApiToken) -> ApiToken:
    """Revoke (idempotent), with every token minted from it (its descendants through `parent`).

    Allowed: the token's user; an owner/admin of a service account's organization; an owner of the organization
    the token is bound to (or whose project it is bound to), for its members' tokens; or staff. Each revoked token
    writes `api_token.revoke` scoped to its organization."""
    if actor is not None and token.user_id != actor.pk:
        service_account = ServiceAccount.objects.filter(user_id=token.user_id).select_related("organization").first()
        org_id = _token_organization_id(token)
        if service_account is not None:  # staff revoke any token (incident response; docs/adr/0104)
            authz.authorize_org(actor, service_account.organization, (OrgRole.OWNER, OrgRole.ADMIN),
                                staff_roles=authz.STAFF_WRITERS)
        elif org_id is not None and not selectors.is_staff(actor):
            authz.authorize_org(actor, Organization.objects.get(pk=org_id), (OrgRole.OWNER,))
        else:
            authz.authorize_staff(actor)
    elif actor is not None:
        authz.require_write_token(actor)
    with transaction.atomic():
        return _revoke_with_children(actor, token)


def _revoke_with_children(actor, token: ApiToken, **why) -> ApiToken:
    """Lock `token`, revoke it and every descendant not yet revoked, one `api_token.revoke` each (`why` added to
    the event's `after`). No authorization: the callers have checked it. Call inside a transaction."""
    locked = ApiToken.objects.select_for_update(of=("self",)).select_related("user", "project").get(pk=token.pk)
    stamp = now()
    pending, seen = [locked], set()
    while pending:
        row = pending.pop()
        if row.pk in seen:
            continue
        seen.add(row.pk)
        if row.revoked_at is None:
            row.revoked_at = stamp
            row.save(update_fields=["revoked_at"])
            _token_event(actor, "api_token.revoke", row,
                         after={"prefix": row.prefix, "user": row.user.email, **why,
                                **({"with_parent": locked.prefix} if row.pk != locked.pk else {})})
        pending.extend(ApiToken.objects.select_for_update(of=("self",)).select_related("user", "project")
                       .filter(parent_id=row.pk))
    return locked


def api_tokens_revoke_unbacked(*, actor, user, organization: Organization) -> int:
    """After a membership of `user` in `organization` (or one of its projects) was removed: revoke the user's live
    tokens bound to the organization or its projects that no remaining membership backs (an organization-level
    membership backs all of them; a project membership, tokens of that project), with their children, each
    audited as `api_token.revoke` with `reason: membership_removed`. Runs in the removal's transaction (the
    tenancy `membership_removed` hook); returns how many bound tokens were revoked (children not counted)."""
    remaining = Membership.objects.filter(user_id=user.pk, organization=organization)
    if remaining.filter(project__isnull=True).exists():
        return 0
    kept_projects = set(remaining.values_list("project_id", flat=True))
    bound = (ApiToken.objects.filter(user_id=user.pk, revoked_at__isnull=True)
             .filter(Q(organization=organization) | Q(project__organization=organization))
             .exclude(project_id__in=kept_projects).order_by("created_at"))
    revoked = 0
    for token in bound:
        _revoke_with_children(actor, token, reason="membership_removed")
        revoked += 1
    return revoked


def service_account_create(*, actor, organization: Organization, name: str, role: str = OrgRole.MEMBER,
                           description: str = "") -> ServiceAccount:
    """A service account in `organization` with organization `role` (not owner). Owner/admin or staff.
    409 `name_taken` for a taken name (also for the loser of two concurrent creates); 400 `unknown_role`."""
    if role == OrgRole.OWNER or role not in OrgRole.values:
        raise ValidationFailed(f"A service account's role is one of admin, billing, member, viewer; not {role!r}.",
                               code="unknown_role", errors={"role": ["admin, billing, member or viewer"]})
    authz.authorize_org(actor, organization, (OrgRole.OWNER, OrgRole.ADMIN))
    with transaction.atomic():
        if ServiceAccount.objects.filter(organization=organization, name=name).exists():
            raise Conflict("A service account with this name exists.", code="name_taken")
        user = User.objects.create_user(f"sa-{uuid7().hex}@{organization.slug}.service-accounts.invalid",
                                        full_name=name, is_service_account=True)
        with unique_conflict("A service account with this name exists.", code="name_taken"):
            account = ServiceAccount.objects.create(user=user, organization=organization, name=name,
                                                    description=description,
                                                    created_by=actor if getattr(actor, "pk", None) else None)
        audit_record(actor=actor, action="service_account.create", target=account, organization=organization,
                     after={"name": name, "role": role})
        membership_add(actor=actor, organization=organization, user=user, role=role)
    return account


def service_account_disable(*, actor, account: ServiceAccount) -> None:
    """Disable: deactivate its user and revoke its tokens (rows stay for the audit trail)."""
    authz.authorize_org(actor, account.organization, (OrgRole.OWNER, OrgRole.ADMIN))
    with transaction.atomic():
        stamp = now()
        User.objects.filter(pk=account.user_id).update(is_active=False)
        ApiToken.objects.filter(user_id=account.user_id, revoked_at__isnull=True).update(revoked_at=stamp)
        ServiceAccount.objects.filter(pk=account.pk).update(disabled_at=stamp)
        audit_record(actor=actor, action="service_account.disable", target=account,
                     organization=account.organization,
                     before={"name": account.name})


def user_update(*, actor, full_name: str) -> User:
    """Change the caller's own display name. Audited as `user.update` in every organization the user belongs to
    (a security event: the owners of each see a profile change made with a leaked token)."""
    authz.require_write_token(actor)
    with transaction.atomic():
        before = {"full_name": actor.full_name}
        User.objects.filter(pk=actor.pk).update(full_name=full_name)
        actor.full_name = full_name
        security_event("user.update", actor, before=before, after={"full_name": full_name})
    return actor
