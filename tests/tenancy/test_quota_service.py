"""`quota_check` as other apps use it: pluggable usage counters, project and organization scopes."""
import pytest
from django.db import transaction

from apps.core.errors import QuotaExceeded, ValidationFailed
from apps.tenancy import quotas
from apps.tenancy.models import Quota

from .helpers import make_org, make_project


@pytest.fixture
def gpu_usage():
    """A registered counter reading a dict, standing in for an app's counter (the allocation ledger's, say)."""
    held = {}

    def count(*, organization, project, qualifier):
        return sum(n for (proj, model), n in held.items()
                   if (project is None or proj == project.pk) and (qualifier is None or model == qualifier))

    previous = dict(quotas._COUNTERS)
    quotas.register_usage_counter("gpus", count)
    yield held
    quotas._COUNTERS.clear()
    quotas._COUNTERS.update(previous)


@pytest.mark.django_db
def test_project_limit_then_organization_limit(gpu_usage):
    org = make_org("gpuorg")  # default plan: 8 GPUs per organization
    p1, p2 = make_project(org, "p1"), make_project(org, "p2")
    Quota.objects.create(organization=org, project=p1, resource="gpus", limit=4)
    gpu_usage[(p1.pk, "H100")] = 4
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check(scope=p1, resource="gpus", requested=1)
    assert exc.value.extra == {"resource": "gpus", "limit": 4, "usage": 4, "requested": 1, "scope": "project",
                               "exceeded": [{"resource": "gpus", "scope": "project", "limit": 4, "usage": 4,
                                             "requested": 1,
                                             "message": "4 GPUs allowed, 4 in use, 1 more requested (project p1)"}]}
    gpu_usage[(p2.pk, "H100")] = 3
    with transaction.atomic():
        quotas.quota_check(scope=p2, resource="gpus", requested=1)  # org: 7 + 1 <= 8
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check(scope=p2, resource="gpus", requested=2)
    assert exc.value.extra["scope"] == "organization" and exc.value.extra["usage"] == 7


@pytest.mark.django_db
def test_qualified_resource_checks_model_and_total(gpu_usage):
    org = make_org("models")
    project = make_project(org, "p")
    Quota.objects.create(organization=org, resource="gpus:H100-SXM5-80GB", limit=2)
    gpu_usage[(project.pk, "H100-SXM5-80GB")] = 2
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check(scope=project, resource="gpus:H100-SXM5-80GB")
    assert exc.value.extra["resource"] == "gpus:H100-SXM5-80GB"
    with transaction.atomic():
        quotas.quota_check(scope=project, resource="gpus:A100-SXM4-40GB", requested=6)  # total 8 <= 8
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check(scope=project, resource="gpus:A100-SXM4-40GB", requested=7)
    assert exc.value.extra["resource"] == "gpus"


@pytest.mark.django_db(transaction=True)
def test_quota_check_refuses_outside_a_transaction():
    org = make_org("loose")
    with pytest.raises(RuntimeError):
        quotas.quota_check(scope=org, resource="projects")


@pytest.mark.django_db
def test_quota_check_refuses_unknown_keys():
    org = make_org("strict")
    with transaction.atomic(), pytest.raises(ValidationFailed) as exc:
        quotas.quota_check(scope=org, resource="bananas")
    assert exc.value.code == "unknown_resource"


@pytest.mark.django_db
def test_resource_without_counter_is_an_error_not_a_silent_pass(monkeypatch):
    org = make_org("nocounter")
    monkeypatch.setattr(quotas, "_COUNTERS", {k: v for k, v in quotas._COUNTERS.items() if k != "vpcs"})
    with transaction.atomic(), pytest.raises(LookupError):
        quotas.quota_check(scope=org, resource="vpcs")


def test_quota_words_give_each_key_its_unit():
    from apps.tenancy.quotas import quota_words

    assert [quota_words(key, n) for key, n in (
        ("gpus:H100-SXM5-80GB", 8), ("gpus", 2), ("memory_mib", 2048 * 1024), ("memory_mib", 1536),
        ("vcpus", 64), ("volume_gib:ssd", 100), ("mig_slices:3g.40gb", 7), ("widgets", 3))] == [
        "8 H100-SXM5-80GB GPUs", "2 GPUs", "2048 GiB of memory", "1.5 GiB of memory", "64 vCPUs",
        "100 GiB of ssd volumes", "7 3g.40gb MIG slices", "3 widgets"]


@pytest.mark.django_db
def test_every_limit_passed_is_named_in_words(gpu_usage):
    """A GPU model's project limit and the organization's GPU limit, both passed: one refusal names both."""
    org = make_org("both")  # default plan: 8 GPUs per organization
    project = make_project(org, "p")
    Quota.objects.create(organization=org, project=project, resource="gpus:H100-SXM5-80GB", limit=8)
    gpu_usage[(project.pk, "H100-SXM5-80GB")] = 8
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check_all(scope=project, requests=[("gpus:H100-SXM5-80GB", 1)])
    assert exc.value.detail == ("Quota exceeded: 8 H100-SXM5-80GB GPUs allowed, 8 in use, 1 more requested "
                                "(project p); 8 GPUs allowed, 8 in use, 1 more requested (organization both).")
    assert [(e["resource"], e["scope"]) for e in exc.value.extra["exceeded"]] == [
        ("gpus:H100-SXM5-80GB", "project"), ("gpus", "organization")]
    assert (exc.value.extra["resource"], exc.value.extra["scope"]) == ("gpus:H100-SXM5-80GB", "project")


@pytest.mark.django_db
def test_a_windowed_check_speaks_of_the_window_only_for_the_ledgers_keys(gpu_usage):
    """An instance is checked over (now, open end): its GPUs are counted at the busiest moment from now on, its
    instance count is counted now, and each refusal says which."""
    import datetime as dt

    org = make_org("winorg")  # default plan: 8 GPUs, 32 instances
    project = make_project(org, "w1")
    gpu_usage[(project.pk, "H100")] = 8
    quotas.register_usage_counter("instances", lambda **kw: 32)
    with transaction.atomic(), pytest.raises(QuotaExceeded) as exc:
        quotas.quota_check_all(scope=project, requests=[("instances", 1), ("gpus", 1)],
                               window=(dt.datetime(2026, 3, 1, tzinfo=dt.UTC), None))
    messages = [item["message"] for item in exc.value.extra["exceeded"]]
    assert messages == ["32 instances allowed, 32 in use, 1 more requested (organization winorg)",
                        "8 GPUs allowed, 8 in use at the busiest moment from now on (leases to come included), "
                        "1 more requested (organization winorg)"]
