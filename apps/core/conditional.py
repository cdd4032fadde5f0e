"""Optimistic concurrency for single objects: a strong `ETag` on every object representation, `If-Match` on writes.

ADR 0011. The entity tag of an object is a digest of its representation (what `GET /<collection>/{id}` answers),
so it changes exactly when something a client can read changes, whichever code path (service, transition
compare-and-set, reconciler) changed the row.

- `GET` of one object and a `PATCH`/`PUT` answering the object (200) carry `ETag: "<digest>"`.
- `PATCH`, `PUT` and `DELETE` of one object honour `If-Match` (RFC 9110 §13.1.1): a list of entity tags or `*`;
  when none matches the object's current tag the answer is 412 `precondition_failed` and nothing is written. The
  object is locked (`SELECT ... FOR UPDATE`) from the comparison until the request's write commits, so two clients
  holding the same tag cannot both write. Weak tags (`W/"..."`) never match (strong comparison).
- Without `If-Match` a write proceeds as before (the header is optional).

`ConditionalMixin` is part of `apps.core.api.ApiViewMixin`, which every API viewset uses; the OpenAPI schema
declares the `ETag` response header and the `If-Match` parameter with its 412 (`apps.core.schema`).
"""
from __future__ import annotations

import hashlib
import json

from django.db import transaction
from rest_framework.utils.encoders import JSONEncoder

from .errors import PreconditionFailed

WRITE_METHODS = frozenset({"PATCH", "PUT", "DELETE"})
OBJECT_ACTIONS = frozenset({"retrieve", "partial_update", "update", "destroy"})
TAGGED_ACTIONS = frozenset({"retrieve", "partial_update", "update"})


def etag_of(representation) -> str:
    """The strong entity tag of a representation: `"<sha256 of its canonical JSON, 32 hex>"`."""
    body = json.dumps(representation, cls=JSONEncoder, sort_keys=True, separators=(",", ":"))
    return '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'


def _tags(header: str) -> list[str]:
    return [tag.strip() for tag in header.split(",") if tag.strip()]


class ConditionalMixin:
    """ETag / If-Match for the object actions (retrieve, update, partial_update, destroy) of a viewset."""

    def _conditional(self, request) -> bool:
        return (request.method in WRITE_METHODS and bool(request.headers.get("If-Match"))
                and getattr(self, "action", None) in OBJECT_ACTIONS)

    def dispatch(self, request, *args, **kwargs):
        if request.method in WRITE_METHODS and request.headers.get("If-Match"):
            with transaction.atomic():  # the row lock taken by the If-Match check lasts until the write commits
                return super().dispatch(request, *args, **kwargs)
        return super().dispatch(request, *args, **kwargs)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self._conditional(request):
            self._check_if_match(request.headers["If-Match"])

    def current_etag(self, obj) -> str:
        """The entity tag `GET` of `obj` answers (its retrieve representation)."""
        action = self.action
        self.action = "retrieve"
        try:
            return etag_of(self.get_serializer(obj).data)
        finally:
            self.action = action

    def _check_if_match(self, header: str) -> None:
        obj = self.get_object()  # 404 for an object the caller cannot see, before any precondition
        type(obj)._default_manager.select_for_update().filter(pk=obj.pk).first()
        obj = self.get_object()  # re-read under the lock: the latest committed state
        tags = _tags(header)
        if "*" in tags:
            return
        current = self.current_etag(obj)
        if current not in tags:
            raise PreconditionFailed("The object changed since it was read (If-Match does not match its ETag).",
                                     errors={"If-Match": [f"current ETag is {current}"]})

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if (response.status_code == 200 and getattr(self, "action", None) in TAGGED_ACTIONS
                and isinstance(getattr(response, "data", None), dict) and "ETag" not in response):
            response["ETag"] = etag_of(response.data)
        return response
