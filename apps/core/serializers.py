"""Base serializers of every app's API: no input gets past validation that a column cannot hold.

Every serializer in `apps/*/api/serializers.py` derives from `Serializer` or `ModelSerializer` here (a test walks
them). Their fields get these defaults, in `get_fields`, so the same bounds apply to validation and show in the
OpenAPI schema (`minimum` / `maximum`):

* an `IntegerField` declared without `min_value` / `max_value` gets the range of a PostgreSQL `integer`
  (`INT_MIN` .. `INT_MAX`); a field stored in a `bigint` or `smallint` column declares its own bound
  (`BIGINT_MAX`, `SMALLINT_MAX`). A model serializer's fields already carry their column's range (Django's
  model validators). Out of range: 400 `validation_error` naming the field;
* the same inside a `ListField` / `DictField` child;
* an `EmailField` declared without `max_length` gets 254 (`EMAIL_MAX_LENGTH`, the column of Django's
  `models.EmailField` and the longest address SMTP carries): every e-mail the API takes is stored in such a column
  (a user, an invitation, a billing e-mail). Longer: 400 `validation_error` naming the field, not a 500 from the
  database. A string stored in a `CharField` column declares its column's `max_length` itself;
* a `CharField` whose default is ``""`` accepts ``""`` too (sending the default is the same as omitting it), so
  the schema never gives a default its own `minLength` refuses.

Datetimes need no default: DRF's `DateTimeField` converts an offset to UTC and answers 400 for an instant that
has none (year 1 with a positive offset); `apps.core.filters.IsoDateTimeFilter` does the same for query strings.
"""
from __future__ import annotations

from django.core.validators import MaxLengthValidator, MaxValueValidator, MinValueValidator
from rest_framework import serializers

INT_MIN, INT_MAX = -(2 ** 31), 2 ** 31 - 1
BIGINT_MAX = 2 ** 63 - 1
SMALLINT_MAX = 2 ** 15 - 1
EMAIL_MAX_LENGTH = 254


def bound_field(field: serializers.Field) -> serializers.Field:
    """Give `field` (and a list or dict field's child) the default integer range, or an e-mail field the default
    length, if it declares none."""
    if isinstance(field, serializers.IntegerField):
        if field.min_value is None:
            field.min_value = INT_MIN
            field.validators.append(MinValueValidator(INT_MIN, message=field.error_messages["min_value"].format(
                min_value=INT_MIN)))
        if field.max_value is None:
            field.max_value = INT_MAX
            field.validators.append(MaxValueValidator(INT_MAX, message=field.error_messages["max_value"].format(
                max_value=INT_MAX)))
    if isinstance(field, serializers.EmailField) and field.max_length is None and not field.read_only:
        field.max_length = EMAIL_MAX_LENGTH
        field.validators.append(MaxLengthValidator(EMAIL_MAX_LENGTH, message=field.error_messages["max_length"].format(
            max_length=EMAIL_MAX_LENGTH)))
    if isinstance(field, serializers.CharField) and field.default == "" and not field.allow_blank:
        field.allow_blank = True
    child = getattr(field, "child", None)
    if isinstance(field, serializers.ListField | serializers.DictField) and child is not None:
        bound_field(child)
    return field


class BoundedFieldsMixin:
    def get_fields(self):
        fields = super().get_fields()
        for field in fields.values():
            bound_field(field)
        return fields


class Serializer(BoundedFieldsMixin, serializers.Serializer):
    """`rest_framework.serializers.Serializer` with the bounds of the module docstring."""


class ModelSerializer(BoundedFieldsMixin, serializers.ModelSerializer):
    """`rest_framework.serializers.ModelSerializer` with the bounds of the module docstring."""
