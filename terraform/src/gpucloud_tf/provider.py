"""The provider: configuration (endpoint, token, project; env GPUCLOUD_ENDPOINT / GPUCLOUD_TOKEN /
GPUCLOUD_PROJECT) and the list of resources and data sources.

Configuring checks the token once (`GET /api/v1/me/`), so a wrong token or an unreachable endpoint is one clear
diagnostic before any resource is touched.
"""
from __future__ import annotations

import os
import uuid

from tf import schema, types
from tf.types import Unknown

from .client import ApiError, Client, NotAnApi, Unreachable, problem_summary
from .datasources import DATA_SOURCES
from .resources import RESOURCES

FULL_NAME = "gpucloud.local/gpucloud/gpucloud"


class GpuCloudProvider:
    def __init__(self):
        self.endpoint = ""
        self.token = ""
        self.project = ""
        self.client: Client | None = None
        self.configured = False
        self._org = None

    def full_name(self) -> str:
        return FULL_NAME

    def get_model_prefix(self) -> str:
        return "gpucloud_"

    def get_provider_schema(self, diags):
        return schema.Schema(attributes=[
            schema.Attribute("endpoint", types.String(), optional=True,
                             description="Base URL of the gpucloud API, e.g. https://cloud.example (env "
                                         "GPUCLOUD_ENDPOINT)."),
            schema.Attribute("token", types.String(), optional=True, sensitive=True,
                             description="API token (env GPUCLOUD_TOKEN)."),
            schema.Attribute("project", types.String(), optional=True,
                             description="Default project of resources that take one: its id (GET /api/v1/projects/), "
                                         "slug or name (env GPUCLOUD_PROJECT)."),
        ])

    def validate_config(self, diags, config):
        endpoint = config.get("endpoint")
        if isinstance(endpoint, str) and endpoint is not Unknown and endpoint \
                and not endpoint.startswith(("http://", "https://")):
            diags.add_error("Invalid provider endpoint", f"{endpoint!r}: it must start with http:// or https://.",
                            path=["endpoint"])

    def configure_provider(self, diags, config):
        def pick(key, env):
            v = config.get(key)
            return v if isinstance(v, str) and v else os.environ.get(env, "")

        self.endpoint = pick("endpoint", "GPUCLOUD_ENDPOINT").rstrip("/")
        self.token = pick("token", "GPUCLOUD_TOKEN")
        self.project = pick("project", "GPUCLOUD_PROJECT")
        if not self.endpoint:
            diags.add_error("gpucloud endpoint not set",
                            "Set the provider's `endpoint` or the environment variable GPUCLOUD_ENDPOINT.")
            return
        if not self.token:
            diags.add_error("gpucloud token not set",
                            "Set the provider's `token` or the environment variable GPUCLOUD_TOKEN.")
            return
        self.client = Client(self.endpoint, self.token)
        try:
            r = self.client.request("GET", "me")
        except NotAnApi as exc:
            diags.add_error(f"{self.endpoint} does not look like a gpucloud API: check endpoint", str(exc))
            return
        except Unreachable as exc:
            diags.add_error(f"gpucloud API unreachable at {self.endpoint}",
                            f"{exc}\nCheck the provider's `endpoint` (or GPUCLOUD_ENDPOINT) and that the service "
                            "is running.")
            return
        if r.status == 401:
            diags.add_error(*problem_summary(r, f"Authenticating to {self.endpoint}"))
            return
        # 404/405, or the web console's own answer (a path outside /api/v1/): the endpoint is not the API's base.
        console = isinstance(r.body, dict) and r.body.get("code") == "console_not_built"
        if r.status in (404, 405) or console:
            summary, detail = problem_summary(r, f"GET {self.endpoint}/api/v1/me/")
            diags.add_error(f"{summary}: {self.endpoint} does not look like a gpucloud API: check endpoint",
                            (detail + "\n" if detail else "") + "The endpoint is the service's base URL (the one "
                            "that serves /api/v1/), e.g. https://cloud.example; set the provider's `endpoint` or "
                            "GPUCLOUD_ENDPOINT.")
            return
        if not r.ok:
            diags.add_error(*problem_summary(r, f"GET {self.endpoint}/api/v1/me/"))
            return
        if not isinstance(r.body, dict) or "memberships" not in r.body:
            diags.add_error(f"{self.endpoint} does not look like a gpucloud API: check endpoint",
                            f"GET {self.endpoint}/api/v1/me/ answered HTTP {r.status} without the caller it "
                            "describes (no `memberships`).")
            return
        token = (r.body or {}).get("token") or {}
        self._org = token.get("organization") or None
        if self.project:
            project = self.resolve_project(self.project, diags, "The provider's project",
                                           "`project` (GPUCLOUD_PROJECT)")
            if project is None:
                return
            self.project = project
        self.configured = True

    def resolve_project(self, value: str, diags, label: str, setting: str) -> str | None:
        """The id of the project `value` names: an id as given; a slug or name: the one project visible to the
        token with that slug (else that name). None after an error on the attribute ``project``, `label` (e.g.
        "The provider's project") saying whose value it is and `setting` where it is set; the error names the
        projects the token sees. Used by the provider's `project` and by every data source's `project`."""
        if _is_uuid(value):
            return value
        try:
            projects = self.client.list_all("projects")
        except (Unreachable, ApiError) as exc:
            diags.add_error(f"Resolving {label[:1].lower() + label[1:]} {value!r}", str(exc), path=["project"])
            return None
        for key in ("slug", "name"):
            found = [p for p in projects if p.get(key) == value]
            if len(found) == 1:
                return str(found[0]["id"])
        seen = ", ".join(f"{p.get('slug')} ({p.get('id')})" for p in projects) or "none"
        diags.add_error(f"{label} {value!r} is not a project of this token",
                        f"{setting} is a project's id, slug or name, as GET /api/v1/projects/ "
                        f"lists them. Projects visible to the token: {seen}.", path=["project"])
        return None

    def organization_of_project(self, ctx) -> str | None:
        """The organization the token is bound to, else the provider project's organization."""
        if self._org is None and self.project:
            try:
                r = self.client.request("GET", f"projects/{self.project}")
            except Unreachable:
                return None
            if r.ok:
                self._org = r.body.get("organization")
        return self._org

    def get_data_sources(self):
        return DATA_SOURCES

    def get_resources(self):
        return RESOURCES

    def get_functions(self):
        return []

    def new_resource(self, klass):
        return klass(self)

    def new_data_source(self, klass):
        return klass(self)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
