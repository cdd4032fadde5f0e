"""References to other objects in request bodies and list filters: one answer for an id the caller cannot see.

ADR 0010: an id in a body member or a filter parameter resolves only among the objects the caller's
`*_list_visible_to(user)` selector returns. An id of another tenant's object therefore answers exactly as an id
that does not exist, and so does a malformed one: **400 `validation_error`**, `errors: {"<member>": ["Not found."]}`
(detail `Invalid input: <member>.`), nothing written. Path ids stay 404 (the resource itself is absent).

- `VisibleField(selector)` is the serializer field (a `PrimaryKeyRelatedField`; `many=True` for a list of ids);
  `validated_data[member]` is the object (a list of objects with `many=True`).
- `VisibleFilter(selector)` is the matching django-filter filter; `apps.core.filters.FilterSet` refuses the
  model-choice filters django-filter would generate for a foreign key (their queryset is every row, so another
  tenant's id filtered to `200 []` while a random id was a 400: an existence oracle).
- `reference_not_found(member)` is the same answer for a reference a service resolves itself (e.g. a flavor the
  caller can see that is not offered to the project, an SSH key of another project).

`selector` is the owning app's `*_list_visible_to(user) -> QuerySet`; `narrow(queryset)` optionally narrows it
further (e.g. only enabled service accounts).

A required `project` member that a create leaves out is the caller's project when its API token is bound to one
project (`request.auth.project_id`): the token can reach no other, so it need not name it. The id resolves through
the selector like a sent one (a project the token no longer reaches is `Not found.`). Sessions, organization and
staff tokens still must send it (400 `This field is required.`); a partial update never gets it.
"""
from __future__ import annotations

from collections.abc import Callable

import django_filters
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils.module_loading import import_string
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import build_array_type, build_basic_type
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty
from rest_framework.relations import MANY_RELATION_KWARGS

from .errors import ValidationFailed

NOT_FOUND = "Not found."
PROJECT_DEFAULT_HELP = ("The project (id). Required, except with an API token bound to one project: left out, it is "
                        "the token's project.")

Selector = Callable[[object], QuerySet]


def reference_not_found(member: str) -> ValidationFailed:
    """The one answer for a body reference that does not resolve (absent, invisible or malformed): a 400."""
    return ValidationFailed(f"Invalid input: {member}.", errors={member: [NOT_FOUND]})


@extend_schema_field(OpenApiTypes.UUID)
class VisibleField(serializers.PrimaryKeyRelatedField):
    """The id of an object `selector(request.user)` returns; anything else is `Not found.` (a 400)."""

    default_error_messages = {"does_not_exist": NOT_FOUND, "incorrect_type": NOT_FOUND}

    def __init__(self, selector: Selector | str | None = None, *, narrow: Callable[[QuerySet], QuerySet] | None = None,
                 **kwargs):
        self.selector, self.narrow = selector, narrow
        super().__init__(**kwargs)

    @classmethod
    def many_init(cls, *args, max_length: int | None = None, **kwargs):
        """`many=True`: a list of ids (at most `max_length`); one that does not resolve is `Not found.`."""
        list_kwargs = {k: v for k, v in kwargs.items() if k in MANY_RELATION_KWARGS}
        return VisibleManyField(child_relation=cls(*args, **kwargs), max_length=max_length, **list_kwargs)

    def get_queryset(self):
        request = self.context.get("request")
        queryset = _selector(self.selector)(getattr(request, "user", None))
        return self.narrow(queryset) if self.narrow else queryset

    def bind(self, field_name, parent):
        super().bind(field_name, parent)
        if field_name == "project" and self.required and not self.help_text:
            self.help_text = PROJECT_DEFAULT_HELP

    def validate_empty_values(self, data):
        if data is empty and self.required and self.field_name == "project" and not getattr(self.root, "partial",
                                                                                            False):
            bound = getattr(getattr(self.context.get("request"), "auth", None), "project_id", None)
            if bound is not None:
                return False, str(bound)
        return super().validate_empty_values(data)

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except (TypeError, ValueError, OverflowError, DjangoValidationError):
            self.fail("does_not_exist", pk_value=data)


def _selector(selector: Selector | str) -> Selector:
    return import_string(selector) if isinstance(selector, str) else selector


class VisibleManyField(serializers.ManyRelatedField):
    """A list of `VisibleField` ids; errors name the member, not an index (`{"ssh_keys": ["Not found."]}`)."""

    def __init__(self, *, max_length: int | None = None, **kwargs):
        self.max_length = max_length
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if self.max_length is not None and isinstance(data, list) and len(data) > self.max_length:
            raise serializers.ValidationError(f"Ensure this field has no more than {self.max_length} elements.")
        return super().to_internal_value(data)


class VisibleFilter(django_filters.ModelChoiceFilter):
    """Filter by the id of an object `selector(request.user)` returns; any other id is `Not found.` (a 400).

    `selector` may be a dotted path (resolved on first use) where the owning app may not be imported here; the
    filter compares the object's id, so `field_name` may be a foreign key or a plain id column (`instance_id`)."""

    def __init__(self, selector: Selector | str, *, narrow: Callable[[QuerySet], QuerySet] | None = None,
                 **kwargs):
        self._selector_ref, self.narrow = selector, narrow
        kwargs.setdefault("error_messages", {"invalid_choice": NOT_FOUND})
        super().__init__(queryset=self._visible, **kwargs)

    @property
    def selector(self) -> Selector:
        return _selector(self._selector_ref)

    def _visible(self, request) -> QuerySet:
        queryset = self.selector(getattr(request, "user", None))
        return self.narrow(queryset) if self.narrow else queryset

    def filter(self, qs, value):
        return super().filter(qs, value.pk if hasattr(value, "pk") else value)


class VisibleManyFieldSchema(OpenApiSerializerFieldExtension):
    """OpenAPI: a `VisibleManyField` is an array of UUIDs with its `maxItems`."""

    target_class = VisibleManyField

    def map_serializer_field(self, auto_schema, direction):
        schema = build_array_type(build_basic_type(OpenApiTypes.UUID))
        if self.target.max_length is not None:
            schema["maxItems"] = self.target.max_length
        return schema
