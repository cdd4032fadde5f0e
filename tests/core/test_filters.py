"""Boolean list filters are strict (apps.core.filters.BooleanFilter): `true`/`false` filter, anything else is 400
`validation_error` naming the parameter (django-filter's own boolean filter answered the unfiltered list). The walk
derives every list endpoint's boolean filters from its FilterSet, so a new one is covered without listing it."""
from __future__ import annotations

import django_filters
import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from apps.core.filters import EMPTY, NOT_BOOLEAN, BooleanFilter, FilterSet, filter_parameter_map
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


def _list_filtersets():
    for route, pattern in _routes(get_resolver().url_patterns):
        actions = getattr(pattern.callback, "actions", None) or {}
        filterset = getattr(getattr(pattern.callback, "cls", None), "filterset_class", None)
        if actions.get("get") == "list" and filterset is not None:
            yield "/" + route.replace("^", "").replace("/?$", "/").replace("$", ""), filterset


def choice_filters() -> list[tuple[str, str]]:
    """(list URL, parameter) for every choice filter of every list endpoint."""
    return sorted({(url, name) for url, fs in _list_filtersets() for name, f in fs.base_filters.items()
                   if isinstance(f, django_filters.ChoiceFilter | django_filters.MultipleChoiceFilter)})


def non_text_parameters() -> list[tuple[str, str]]:
    """(list URL, parameter) for every filter parameter whose schema is not a free string."""
    return sorted({(url, name) for url, fs in _list_filtersets() for name, f in filter_parameter_map(fs).items()
                   if not isinstance(f, django_filters.CharFilter)})


def test_every_filter_on_a_field_with_choices_is_a_choice_filter():
    for url, fs in _list_filtersets():
        model = fs._meta.model
        for name, f in fs.base_filters.items():
            try:
                field = model._meta.get_field(f.field_name)
            except Exception:  # noqa: BLE001 - across a relation
                continue
            if getattr(field, "choices", None):
                assert isinstance(f, django_filters.ChoiceFilter | django_filters.MultipleChoiceFilter), (url, name)
    assert {("/api/v1/memberships/", "role"), ("/api/v1/leases/", "kind"),
            ("/api/v1/instances/", "status")} <= set(choice_filters())


@pytest.mark.parametrize(("url", "name"), choice_filters())
def test_an_unknown_choice_is_a_400_naming_it(url, name):
    tenant, staff = _clients()
    client = tenant if tenant.get(url).status_code == 200 else staff
    r = client.get(url, {name: "banana"})
    assert r.status_code == 400, (url, name, r.content)
    assert r.json()["code"] == "validation_error" and list(r.json()["errors"]) == [name]


@pytest.mark.parametrize(("url", "name"), non_text_parameters())
def test_an_empty_non_text_filter_is_a_400_naming_it(url, name):
    tenant, staff = _clients()
    client = tenant if tenant.get(url).status_code == 200 else staff
    r = client.get(url, {name: ""})
    assert r.status_code == 400, (url, name, r.content)
    assert r.json()["code"] == "validation_error" and r.json()["errors"] == {name: [EMPTY]}


def test_the_empty_walk_covers_ids_and_instants():
    found = set(non_text_parameters())
    assert {("/api/v1/instances/", "project"), ("/api/v1/memberships/", "organization")} <= found
    assert any(name == "created_before" for _url, name in found)
    assert any(name == "host" for _url, name in found)


@pytest.mark.parametrize("url", sorted({url for url, _fs in _list_filtersets()}))
def test_a_page_size_above_the_schemas_maximum_is_a_400_naming_it(url):
    tenant, staff = _clients()
    client = tenant if tenant.get(url).status_code == 200 else staff
    assert client.get(url, {"page_size": 500}).status_code == 200, url
    r = client.get(url, {"page_size": 501})
    assert r.status_code == 400 and list(r.json()["errors"]) == ["page_size"], (url, r.content)


NAME_SEARCHED = ["/api/v1/instances/", "/api/v1/clusters/", "/api/v1/volumes/", "/api/v1/vpcs/", "/api/v1/ssh-keys/",
                 "/api/v1/ib-partitions/", "/api/v1/leases/"]


@pytest.mark.parametrize("url", NAME_SEARCHED)
def test_the_tenant_lists_searched_by_name_take_name_contains(url):
    client = Tenant("alpha").client
    assert client.get(url, {"name_contains": "x"}).status_code == 200, url


def test_name_contains_finds_part_of_a_name_in_any_case_and_only_the_callers():
    from apps.networking import services
    alpha, beta = Tenant("alpha"), Tenant("beta")
    for name, cidr in [("train-east", "10.1.0.0/16"), ("serve", "10.2.0.0/16"), ("Training-west", "10.3.0.0/16")]:
        services.vpc_create(actor=alpha.user, project=alpha.project, name=name.lower(), cidr=cidr)
    services.vpc_create(actor=beta.user, project=beta.project, name="train-beta", cidr="10.4.0.0/16")
    names = lambda r: sorted(v["name"] for v in r.json()["results"])  # noqa: E731
    found = alpha.client.get("/api/v1/vpcs/", {"project": str(alpha.project.id), "name_contains": "TRAIN"})
    assert found.status_code == 200
    assert names(found) == ["train-east", "training-west"]
    assert names(alpha.client.get("/api/v1/vpcs/", {"name_contains": ""})) == ["serve", "train-east", "training-west"]
