"""Organizations (billing accounts) own projects (the isolation boundary)."""
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
