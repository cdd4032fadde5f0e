"""Organizations (billing accounts) own projects (the isolation boundary)."""
from django.conf import settings
from django.db import models

from apps.core.models import TimestampedModel


class Organization(TimestampedModel):
    """The billing account. `currency` is ISO 4217; `billing_timezone` an IANA name (UTC by default)."""

    slug = models.SlugField(max_length=63, unique=True)
    name = models.CharField(max_length=200)
    legal_name = models.CharField(max_length=200, blank=True)
    billing_email = models.EmailField(blank=True)
    currency = models.CharField(max_length=3, default="USD")
    billing_timezone = models.CharField(max_length=64, default="UTC")
    default_sla_tier = models.CharField(max_length=32, default="standard")
    plan = models.CharField(max_length=32, default="default")
    require_2fa = models.BooleanField(default=False)

    def __str__(self) -> str:
        return self.slug


class Project(TimestampedModel):
    """The isolation boundary: every tenant-owned resource belongs to exactly one project."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="projects")
    slug = models.SlugField(max_length=63)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="project_slug_unique_in_org")]

    def __str__(self) -> str:
        return f"{self.organization.slug}/{self.slug}"


class OrgRole(models.TextChoices):
    """Organization roles. owner: everything incl. owners; admin: members, projects, tokens; billing: invoices
    and billing settings (reads the rest); member: works in every project; viewer: reads."""

    OWNER = "owner", "Owner"
    ADMIN = "admin", "Admin"
    BILLING = "billing", "Billing"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class ProjectRole(models.TextChoices):
    """Project roles. admin: manages the project and its members; member: creates and changes resources;
    viewer: reads."""

    ADMIN = "admin", "Admin"
    MEMBER = "member", "Member"
    VIEWER = "viewer", "Viewer"


class Membership(TimestampedModel):
    """A user's role in an organization (`project` null, role from `OrgRole`) or in one of its projects
    (`project` set, role from `ProjectRole`). One membership per user and organization, and per user and project.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="memberships")
    role = models.CharField(max_length=16)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], condition=models.Q(project__isnull=True),
                                    name="membership_unique_org"),
            models.UniqueConstraint(fields=["user", "project"], condition=models.Q(project__isnull=False),
                                    name="membership_unique_project"),
            models.CheckConstraint(
                condition=(models.Q(project__isnull=True, role__in=OrgRole.values)
                           | models.Q(project__isnull=False, role__in=ProjectRole.values)),
                name="membership_role_valid"),
        ]
        indexes = [models.Index(fields=["organization", "role"])]

    def __str__(self) -> str:
        return f"{self.user_id} {self.role} @ {self.project_id or self.organization_id}"


class Invitation(TimestampedModel):
    """An e-mailed invitation to join an organization (or one project) with a role.

    The link carries a signed token (django.core.signing, salt `gpucloud.invitation`) naming this row; it
    expires at `expires_at` and can be accepted once (`accepted_at`)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    @property
    def status(self) -> str:
        from apps.core.clock import now

        if self.accepted_at:
            return "accepted"
        if self.revoked_at:
            return "revoked"
        if self.expires_at <= now():
            return "expired"
        return "pending"


class Quota(TimestampedModel):
    """The limit of one resource for an organization (`project` null) or for one of its projects.

    `resource` is a key from `apps.tenancy.quotas.RESOURCES`, optionally qualified (`gpus:H100-SXM5-80GB`,
    `mig_slices:3g.40gb`, `vgpus:<type>`). `limit` counts the resource's unit (GPUs, slices, vCPUs, MiB, ...).
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="quotas")
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.CASCADE, related_name="quotas")
    resource = models.CharField(max_length=100)
    limit = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "resource"], condition=models.Q(project__isnull=True),
                                    name="quota_unique_org_resource"),
            models.UniqueConstraint(fields=["project", "resource"], condition=models.Q(project__isnull=False),
                                    name="quota_unique_project_resource"),
            models.CheckConstraint(condition=models.Q(limit__gte=0), name="quota_limit_non_negative"),
        ]
