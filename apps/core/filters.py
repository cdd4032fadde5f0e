"""Filters every app's FilterSets share.

`IsoDateTimeFilter`: an ISO 8601 instant, converted to UTC before it reaches the query. Any offset ISO 8601
allows (up to ±23:59) is accepted and means the same instant in UTC; PostgreSQL itself takes offsets only up to
±15:59, so passing the offset through was a 500. An instant that has no UTC representation (year 1 with a positive
offset, year 9999 with a negative one) is 400 `validation_error` naming the parameter.
"""
from __future__ import annotations

import datetime as dt

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from .clock import to_utc


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
