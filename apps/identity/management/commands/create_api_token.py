"""`manage.py create_api_token --email E (--project SLUG | --organization SLUG | --staff) [--scope read|write]`

Prints a new API token (only its digest is stored). `--project` takes `<org-slug>/<project-slug>` or a project
slug that is unique across organizations. The user must already hold a role there (or a staff role for
`--staff`); the token never grants more than the user's roles.
"""
from django.core.management.base import BaseCommand, CommandError

from apps.core.errors import DomainError
from apps.identity.models import User
from apps.identity.services import api_token_create
from apps.tenancy.models import Organization, Project
from apps.tenancy.selectors import org_role_of, project_role_of


class Command(BaseCommand):
    help = "Create an API token for a user and print it (shown once)."

    def add_arguments(self, parser):
        parser.add_argument("--email", required=True)
        binding = parser.add_mutually_exclusive_group(required=True)
        binding.add_argument("--project", help="<org-slug>/<project-slug> or a unique project slug")
        binding.add_argument("--organization", help="organization slug")
        binding.add_argument("--staff", action="store_true", help="a staff token (user needs a staff role)")
        parser.add_argument("--scope", choices=["read", "write"], default="read")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, email, project, organization, staff, scope, name, **options):
        user = User.objects.filter(email__iexact=email.strip(), is_active=True).first()
        if user is None:
            raise CommandError(f"no active user {email}")
        org = proj = None
        if organization:
            org = Organization.objects.filter(slug=organization).first()
            if org is None or org_role_of(user, org) is None:
                raise CommandError(f"{email} has no role in organization {organization!r}")
        if project:
            proj = self._project(project)
            if project_role_of(user, proj) is None:
                raise CommandError(f"{email} has no role in project {project!r}")
        try:
            _row, raw = api_token_create(actor=None, user=user, name=name, scope=scope, organization=org,
                                         project=proj, staff=staff)
        except DomainError as exc:
            raise CommandError(exc.detail)
        self.stdout.write(raw)

    def _project(self, ref: str) -> Project:
        org_slug, _, slug = ref.rpartition("/")
        qs = Project.objects.select_related("organization").filter(slug=slug)
        if org_slug:
            qs = qs.filter(organization__slug=org_slug)
        found = list(qs[:2])
        if len(found) != 1:
            raise CommandError(f"project {ref!r} not found" if not found else
                               f"project slug {slug!r} is ambiguous: use <org-slug>/{slug}")
        return found[0]
