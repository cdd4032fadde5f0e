"""List filters: the base FilterSet and the filter backend every API view uses (`DEFAULT_FILTER_BACKENDS`).

- `FilterSet` refuses, when the class is defined, a foreign key named in `Meta.fields`: django-filter would make it
  a model-choice filter over every row (another tenant's id filters to `200 []`, a random id is a 400, an
  existence oracle). Declare it as `apps.core.references.VisibleFilter(selector)` instead (ADR 0010).
- `FilterBackend` refuses a query parameter the view does not define: 400 `validation_error`,
  `errors: {"<parameter>": ["Unknown parameter."]}` for each, before filtering (ADR 0010, as ADR 0002 does for
  body members). Defined are the FilterSet's filters (with the suffixes of range widgets), the paginator's
  `cursor` and `page_size` on lists, and `format`. A view that reads other parameters parses them with an Input
  serializer through `apps.core.api.validated`, which is strict the same way.

`BooleanFilter` (what a model `BooleanField` in `Meta.fields` becomes, and the only boolean filter a FilterSet may
declare): `true`/`false` (also `1`/`0`, any case); anything else is 400 `validation_error` naming the parameter
(django-filter's own boolean filter read an unknown spelling as "no filter" and answered the whole list).

Choices are strict: a filter on a model field with `choices` (generated from `Meta.fields`, or declared as a plain
`CharFilter` on it) is a `ChoiceFilter` over those choices, so an unknown value is 400 `validation_error` naming
the parameter, never `200 []`. A field without choices in the model (a role valid by a check constraint) declares
its `ChoiceFilter` itself.

An empty value is not "no filter" for a parameter whose schema is not a free string (uuid, date-time, number,
boolean, choice): `?project=` is 400 `validation_error`, `errors: {"project": ["This parameter may not be empty."]}`;
only free-text filters (`CharFilter`) read an empty value as absent. One rule, in `FilterBackend`, for every list.

`NameContainsFilter` (`name_contains`): the name search of a tenant's lists, a case-insensitive substring of `name`.

`IsoDateTimeFilter`: an ISO 8601 instant, converted to UTC before it reaches the query. Any offset ISO 8601
allows (up to ±23:59) is accepted and means the same instant in UTC; PostgreSQL itself takes offsets only up to
±15:59, so passing the offset through was a 500. An instant that has no UTC representation (year 1 with a positive
offset, year 9999 with a negative one) is 400 `validation_error` naming the parameter.
"""
from __future__ import annotations

import datetime as dt

import django_filters
from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django_filters.fields import IsoDateTimeField
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.settings import api_settings

from .clock import to_utc
from .errors import ValidationFailed

UNKNOWN = "Unknown parameter."
NOT_BOOLEAN = "Must be true or false."
EMPTY = "This parameter may not be empty."


class StrictBooleanField(forms.Field):
    """`true`/`1` -> True, `false`/`0` -> False (any case), absent or empty -> no filter, else invalid."""

    widget = forms.TextInput
    TRUE, FALSE = frozenset({"true", "1"}), frozenset({"false", "0"})

    def to_python(self, value):
        if value is None or value == "":
            return None
        text = str(value).strip().lower()
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise forms.ValidationError(NOT_BOOLEAN, code="invalid")


class BooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class FilterSet(django_filters.FilterSet):
    """Base of every API FilterSet: no generated filter on a relation (declare a `VisibleFilter`), booleans
    strict (`BooleanFilter`)."""

    FILTER_DEFAULTS = {**django_filters.FilterSet.FILTER_DEFAULTS,
                       models.BooleanField: {"filter_class": BooleanFilter}}

    @classmethod
    def get_filters(cls):
        filters = super().get_filters()
        model = getattr(cls._meta, "model", None)
        for name, f in list(filters.items()):
            if type(f) is django_filters.CharFilter and f.lookup_expr == "exact" and not f.method and model:
                try:
                    field = model._meta.get_field(f.field_name)
                except Exception:  # noqa: BLE001 - a path across relations, not a column of this model
                    field = None
                if field is not None and field.choices:
                    filters[name] = django_filters.ChoiceFilter(field_name=f.field_name, choices=field.choices,
                                                                label=f.label, **f.extra)
        for name, f in filters.items():
            if isinstance(f, django_filters.BooleanFilter) and not isinstance(f, BooleanFilter):
                raise ImproperlyConfigured(
                    f"{cls.__name__}.{name}: a boolean filter must be apps.core.filters.BooleanFilter (strict)")
        return filters

    @classmethod
    def filter_for_field(cls, field, field_name, lookup_expr=None):
        if field.is_relation:
            raise ImproperlyConfigured(
                f"{cls.__name__}.{field_name}: a filter on a relation must be declared as "
                f"apps.core.references.VisibleFilter(<the *_list_visible_to selector>)")
        return super().filter_for_field(field, field_name, lookup_expr)


def filter_parameter_map(filterset_class) -> dict[str, django_filters.Filter]:
    """Each query parameter name `filterset_class` reads -> the filter reading it."""
    params: dict[str, django_filters.Filter] = {}
    for name, f in (filterset_class.base_filters.items() if filterset_class else ()):
        widget = f.extra.get("widget") or getattr(f.field_class, "widget", None)
        suffixes = getattr(widget, "suffixes", None)
        params.update({f"{name}_{s}" if s else name: f for s in suffixes} if suffixes else {name: f})
    return params


def filter_parameters(filterset_class) -> set[str]:
    """The query parameter names `filterset_class` reads."""
    return set(filter_parameter_map(filterset_class))


def empty_refused(f: django_filters.Filter) -> bool:
    """Whether an empty value of `f` is a 400 (not a free-text filter)."""
    return not isinstance(f, django_filters.CharFilter)


class FilterBackend(DjangoFilterBackend):
    """django-filter's backend, strict about the query string (see the module docstring)."""

    def allowed_parameters(self, request, queryset, view) -> set[str]:
        allowed = {api_settings.URL_FORMAT_OVERRIDE} - {None}
        allowed |= filter_parameters(self.get_filterset_class(view, queryset))
        paginator = getattr(view, "paginator", None)
        if paginator is not None and not getattr(view, "detail", False):
            allowed |= {getattr(paginator, name) for name in ("cursor_query_param", "page_size_query_param",
                                                              "page_query_param", "limit_query_param",
                                                              "offset_query_param") if getattr(paginator, name, None)}
        return allowed

    def filter_queryset(self, request, queryset, view):
        unknown = sorted(set(request.query_params) - self.allowed_parameters(request, queryset, view))
        if unknown:
            raise ValidationFailed(f"Unknown query parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.",
                                   errors={name: [UNKNOWN] for name in unknown})
        params = filter_parameter_map(self.get_filterset_class(view, queryset))
        empty = sorted(name for name, values in request.query_params.lists()
                       if name in params and "" in values and empty_refused(params[name]))
        if empty:
            raise ValidationFailed(f"Empty query parameter{'s' if len(empty) > 1 else ''}: {', '.join(empty)}.",
                                   errors={name: [EMPTY] for name in empty})
        return super().filter_queryset(request, queryset, view)


def NameContainsFilter(**kwargs) -> django_filters.CharFilter:  # noqa: N802 - reads like the filter classes
    """`name_contains`: the rows whose `name` holds the value, any case (`name` itself is the exact name). An empty
    value is no filter."""
    return django_filters.CharFilter(field_name="name", lookup_expr="icontains",
                                     help_text="Part of the name, any case.", **kwargs)


class UtcIsoDateTimeField(IsoDateTimeField):
    def to_python(self, value):
        parsed = super().to_python(value)
        if isinstance(parsed, dt.datetime):
            try:
                return to_utc(parsed)
            except OverflowError:
                raise forms.ValidationError("This instant is outside the years 1 to 9999 in UTC.",
                                            code="invalid") from None
        return parsed


class IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField
