"""Users (log in by e-mail), provider staff roles, API tokens, service accounts, SSO links, recovery codes."""
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django_otp.models import Device

from apps.core.clock import now
from apps.core.ids import uuid7


class StaffRole(models.TextChoices):
    """Provider staff roles: operator runs the fleet, billing_admin runs billing, support reads everything."""

    NONE = "", "None"
    OPERATOR = "operator", "Operator"
    BILLING_ADMIN = "billing_admin", "Billing admin"
    SUPPORT = "support", "Support (read-only)"


class UserManager(BaseUserManager):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **extra):
        if not email:
            raise ValueError("email is required")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save(using=self._db)
        return user

    def create_superuser(self, email: str, password: str | None = None, **extra):
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        extra.setdefault("staff_role", StaffRole.OPERATOR)
        return self.create_user(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A person or a service account. `staff_role` non-empty means provider staff."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    email = models.EmailField(unique=True)
    full_name = models.CharField(max_length=200, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False, help_text="May log in to Django's admin site.")
    staff_role = models.CharField(max_length=32, choices=StaffRole.choices, default=StaffRole.NONE, blank=True)
    is_service_account = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=now)

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    def __str__(self) -> str:
        return self.email

    @property
    def is_provider_staff(self) -> bool:
        return bool(self.staff_role)


class TokenScope(models.TextChoices):
    """`read` allows safe methods only; `write` includes read."""

    READ = "read", "Read"
    WRITE = "write", "Write"


class ApiToken(models.Model):
    """A bearer token `gpc_<prefix>_<secret>` bound to exactly one of: a project, an organization, staff.

    Only `prefix` (public, shown in lists and audit events) and `secret_hash` (SHA-256 hex of the whole token)
    are stored; the token itself is returned once, by `apps.identity.services.api_token_create`.
    A token never grants more than its user's own roles; it narrows them to its binding and scope. A token minted
    with another token (`parent`) is never wider, nor longer-lived, than it, and dies with it (ADR 0100).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scope = models.CharField(max_length=8, choices=TokenScope.choices, default=TokenScope.READ)
    organization = models.ForeignKey("tenancy.Organization", null=True, blank=True, on_delete=models.CASCADE,
                                     related_name="+")
    project = models.ForeignKey("tenancy.Project", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="+")
    is_staff_token = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=now, editable=False)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children",
                               help_text="The token of the request that minted this one; revoking it revokes this.")

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(models.Q(project__isnull=False, organization__isnull=True, is_staff_token=False)
                           | models.Q(project__isnull=True, organization__isnull=False, is_staff_token=False)
                           | models.Q(project__isnull=True, organization__isnull=True, is_staff_token=True)),
                name="api_token_one_binding"),
        ]
        indexes = [models.Index(fields=["user", "created_at"])]

    def __str__(self) -> str:
        return f"gpc_{self.prefix}_… ({self.name})"

    @property
    def binding(self) -> str:
        return "staff" if self.is_staff_token else ("project" if self.project_id else "organization")

    def is_usable(self, at) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > at)


class ServiceAccount(models.Model):
    """A non-human user for automation (Terraform, CI) owned by one organization.

    Its `user` has `is_service_account=True`, no usable password and an e-mail under `.invalid` (RFC 2606), so it
    can only authenticate with API tokens; its roles are ordinary memberships.
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    user = models.OneToOneField(User, on_delete=models.CASCADE, related_name="service_account")
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(default=now, editable=False)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    disabled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="service_account_name_unique")]


class ExternalIdentity(models.Model):
    """A single-sign-on identity linked to a user: the provider's issuer (`iss`) and subject (`sub`).

    Once linked, sign-in goes by (issuer, subject) and the provider's e-mail claim no longer matters. A link is
    made only from a verified e-mail (`email_verified` true), never to a staff account (see
    `apps.identity.services.sso_resolve_user`).
    """

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="external_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    email_at_link = models.EmailField(blank=True)
    created_at = models.DateTimeField(default=now, editable=False)
    last_sign_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="external_identity_unique")]

    def __str__(self) -> str:
        return f"{self.issuer} {self.subject}"


class RecoveryCodeDevice(Device):
    """One-time recovery codes (a django-otp device, so `match_token` and `otp_login` accept them).

    Only the SHA-256 of each code is stored (`RecoveryCode.digest`); the codes are shown once, when generated.
    Like API tokens (ADR 0100), a code is random enough (80 bits) that a fast hash suffices. A code verifies once.
    """

    def verify_token(self, token) -> bool:
        from .recovery import digest

        code = digest(str(token))
        return bool(code) and RecoveryCode.objects.filter(
            device=self, digest=code, used_at__isnull=True).update(used_at=now()) == 1


class RecoveryCode(models.Model):
    device = models.ForeignKey(RecoveryCodeDevice, on_delete=models.CASCADE, related_name="codes")
    digest = models.CharField(max_length=64)
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["device", "digest"], name="recovery_code_unique")]
