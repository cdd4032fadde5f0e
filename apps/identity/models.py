"""Users (log in by e-mail) and provider staff roles."""
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models

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
