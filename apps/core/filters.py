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


def filter_parameters(filterset_class) -> set[str]:
    """The query parameter names `filterset_class` reads."""
    names: set[str] = set()
    for name, f in (filterset_class.base_filters.items() if filterset_class else ()):
        widget = f.extra.get("widget") or getattr(f.field_class, "widget", None)
        suffixes = getattr(widget, "suffixes", None)
        names.update(f"{name}_{s}" if s else name for s in suffixes) if suffixes else names.add(name)
    return names


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
        return super().filter_queryset(request, queryset, view)


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
