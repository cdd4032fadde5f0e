"""Boolean list filters are strict (apps.core.filters.BooleanFilter): `true`/`false` filter, anything else is 400
`validation_error` naming the parameter (django-filter's own boolean filter answered the unfiltered list). The walk
derives every list endpoint's boolean filters from its FilterSet, so a new one is covered without listing it."""
from __future__ import annotations

import django_filters
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from apps.core.filters import NOT_BOOLEAN, BooleanFilter, FilterSet
from apps.identity.models import StaffRole
from tests.networking.helpers import Tenant
from tests.tenancy.helpers import client_for, make_user, token_for

pytestmark = pytest.mark.django_db


def _routes(patterns, prefix=""):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _routes(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def boolean_filters() -> list[tuple[str, str]]:
    """(list URL, parameter) for every boolean filter of every list endpoint."""
    found = []
    for route, pattern in _routes(get_resolver().url_patterns):
        actions = getattr(pattern.callback, "actions", None) or {}
        filterset = getattr(getattr(pattern.callback, "cls", None), "filterset_class", None)
        if actions.get("get") != "list" or filterset is None:
            continue
        url = "/" + route.replace("^", "").replace("/?$", "/").replace("$", "")
        assert "<" not in url and "(?P" not in url, url  # a nested list would need its parent's id here
        found += [(url, name) for name, f in filterset.base_filters.items()
                  if isinstance(f, django_filters.BooleanFilter)]
    return sorted(set(found))


def test_the_walk_finds_the_boolean_filters_we_know():
    found = boolean_filters()
    for known in [("/api/v1/security-groups/", "is_default"), ("/api/v1/tokens/", "revoked"),
                  ("/api/v1/allocations/", "spot"), ("/api/v1/incidents/", "open"),
                  ("/api/v1/incidents/", "provider_at_fault")]:
        assert known in found


def _clients():
    tenant = Tenant("alpha")
    staff = make_user("op@provider.test", staff_role=StaffRole.OPERATOR)
    staff_client = client_for(token_for(staff, staff=True))
    return tenant.client, staff_client


@pytest.mark.parametrize(("url", "name"), boolean_filters())
def test_a_malformed_boolean_filter_is_a_400_naming_it(url, name):
    tenant, staff = _clients()
    client = tenant if tenant.get(url).status_code == 200 else staff
    assert client.get(url).status_code == 200, url
    for good in ("true", "false", "True", "1", "0"):
        assert client.get(url, {name: good}).status_code == 200, (url, name, good)
    for bad in ("banana", "yes-please", "2", "null"):
        r = client.get(url, {name: bad})
        assert r.status_code == 400, (url, name, bad, r.content)
        assert r["Content-Type"] == "application/problem+json"
        assert r.json()["code"] == "validation_error"
        assert r.json()["errors"] == {name: [NOT_BOOLEAN]}


def test_a_true_or_false_filter_still_filters():
    from apps.networking import services as net
    tenant = Tenant("alpha")
    vpc = net.vpc_create(actor=tenant.user, project=tenant.project, name="v", cidr="10.0.0.0/16")
    net.security_group_create(actor=tenant.user, vpc=vpc, name="web")
    names = {True: {"default"}, False: {"web"}}
    for value, expected in names.items():
        r = tenant.client.get("/api/v1/security-groups/", {"is_default": str(value).lower()})
        assert {g["name"] for g in r.json()["results"]} == expected


def test_a_filterset_cannot_declare_django_filters_own_boolean_filter():
    from django.core.exceptions import ImproperlyConfigured

    from apps.networking.models import SecurityGroup

    with pytest.raises(ImproperlyConfigured, match="BooleanFilter"):
        class Loose(FilterSet):
            is_default = django_filters.BooleanFilter()

            class Meta:
                model = SecurityGroup
                fields = ["is_default"]

    class Generated(FilterSet):
        class Meta:
            model = SecurityGroup
            fields = ["is_default"]
    assert isinstance(Generated.base_filters["is_default"], BooleanFilter)
