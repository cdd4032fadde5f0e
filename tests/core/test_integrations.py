"""The wiring between apps lives in one `apps/<app>/integrations.py` per app, called from its `AppConfig.ready`:
after start-up every usage counter, billing source and hook is registered, and no `except ImportError` guard can
hide a broken import (it would silently drop a quota counter or a billed resource)."""
import re
from pathlib import Path

from django.apps import apps as django_apps
from django.conf import settings

from apps.billing.registry import placement_resolvers, usage_sources
from apps.compute.services.placement import _PLACEMENT_HOOKS
from apps.reservations.hooks import placement_hook
from apps.tenancy.quotas import _COUNTERS

APPS = Path(settings.BASE_DIR) / "apps"


def test_every_counter_source_and_hook_is_registered_at_start_up():
    assert {"projects", "instances", "vcpus", "memory_mib", "gpus", "mig_slices", "vgpus", "vpcs", "public_ips",
            "ib_partitions", "leases"} <= set(_COUNTERS)
    assert {"compute.instance", "networking.public_ip", "reservations.lease"} <= set(usage_sources())
    assert {"compute.instance", "reservations.lease"} <= set(placement_resolvers())
    assert placement_hook in _PLACEMENT_HOOKS


def test_wiring_is_registered_only_from_integrations_modules():
    registries = ("tenancy/quotas.py", "billing/registry.py")  # their own built-in counter, docstring examples
    for path in APPS.rglob("*.py"):
        if "migrations" in path.parts or path.name == "integrations.py" or path.as_posix().endswith(registries):
            continue
        src = path.read_text()
        for name in ("register_usage_counter(", "register_usage_source(", "register_placement_resolver(",
                     "register_placement_hook(", "register_quota_qualifiers(", "register_queue_hook("):
            calls = [m for m in re.finditer(re.escape(name), src) if not src[:m.start()].endswith("def ")]
            assert not calls, f"{path.relative_to(APPS.parent)} calls {name} outside integrations.py"


def test_ready_calls_integrations_and_nothing_hides_an_import_error():
    for cfg in django_apps.get_app_configs():
        if not cfg.name.startswith("apps."):
            continue
        if (Path(cfg.path) / "integrations.py").exists():
            assert "integrations.register()" in (Path(cfg.path) / "apps.py").read_text(), cfg.name
    offenders = [str(p.relative_to(APPS.parent)) for p in APPS.rglob("*.py")
                 if re.search(r"except\s*\(?[^:]*\bImportError\b", p.read_text())]
    assert offenders == []
