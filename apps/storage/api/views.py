"""Storage API: /volume-types (tenants read, staff write), /volumes (with the extend, attach and detach actions),
/snapshots.

The attach shape is Cinder's volume actions (`POST /volumes/{id}/attach` with the instance in the body; `detach`
likewise), with the attachments listed in the volume (`attachments`), as Cinder's volume shows them. Querysets
come from the `*_list_visible_to` selectors, so another tenant's object is a 404. Long actions answer 202 with the
volume (or snapshot) and its Operation, and `Location: /api/v1/operations/{id}`. Creates accept an
`Idempotency-Key` header (`apps.core.idempotency`).
"""
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.api import ApiViewMixin
from apps.core.idempotency import idempotent_create
from apps.core.request_context import get_request_id
from apps.core.schema import problems

from .. import selectors
from ..services import attachments, snapshots, volume_types, volumes
from . import filters
from . import serializers as s

STATE_409 = "invalid_state: not allowed in the current state (allowed_states lists those that are)."


class _Base(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    pass


def _accepted(volume, op) -> Response:
    volume.refresh_from_db()
    body = s.VolumeAccepted({"volume": volume, "operation": op}).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/operations/{op.pk}"})


class VolumeTypeViewSet(_Base):
    """Block storage tiers; staff operators define them (docs/storage.md)."""

    staff_actions = {"create", "partial_update"}
    serializer_class = s.VolumeTypeOutput
    filterset_class = filters.VolumeTypeFilter

    def get_queryset(self):
        return selectors.volume_type_list_visible_to(self.request.user)

    @extend_schema(request=s.VolumeTypeCreateInput, responses={201: s.VolumeTypeOutput, **problems({
        409: "name_taken: a volume type has this name."})})
    def create(self, request):
        data = dict(self._input(s.VolumeTypeCreateInput))
        volume_type = volume_types.volume_type_create(actor=request.user, **data)
        return self._out(volume_type, status.HTTP_201_CREATED)

    @extend_schema(request=s.VolumeTypeUpdateInput, responses={200: s.VolumeTypeOutput, **problems({
        409: "conflict: the pool of a type with volumes cannot change; name_taken."})})
    def partial_update(self, request, pk=None):
        data = dict(self._input(s.VolumeTypeUpdateInput))
        volume_type = volume_types.volume_type_update(actor=request.user, volume_type=self.get_object(), **data)
        return self._out(volume_type)


class VolumeViewSet(_Base):
    """Block storage volumes of a project. `status` follows Cinder's names (creating, available, attaching,
    in-use, detaching, extending, deleting, deleted, error)."""

    serializer_class = s.VolumeOutput
    filterset_class = filters.VolumeFilter

    def get_queryset(self):
        return selectors.volume_list_visible_to(self.request.user)

    @extend_schema(request=s.VolumeCreateInput, responses={202: s.VolumeAccepted, **problems({
        400: "validation_error (size outside the type's range, a snapshot with another type), zone_not_served, "
             "host_local_needs_instance, volume_type_inactive.",
        409: "name_taken; instance_not_placed; invalid_state (the source snapshot is not available).",
        422: "quota_exceeded: volumes or volume_gib (resource, limit, usage, requested); idempotency_key_reused "
             "(this Idempotency-Key was sent with another body)."})})
    @idempotent_create
    def create(self, request):
        data = self._input(s.VolumeCreateInput)
        volume, op = volumes.volume_create(actor=request.user, request_id=get_request_id(), **data)
        return _accepted(volume, op)

    @extend_schema(request=s.VolumeUpdateInput, responses={200: s.VolumeOutput, **problems({
        409: "name_taken: a volume of the project has this name; invalid_state: the volume is deleted."})})
    def partial_update(self, request, pk=None):
        data = self._input(s.VolumeUpdateInput)
        return self._out(volumes.volume_update(actor=request.user, volume=self.get_object(), **data))

    @extend_schema(request=None, responses={202: s.VolumeAccepted, **problems({
        409: STATE_409 + " A volume with any attachment (instances names them): detach it first."})})
    def destroy(self, request, pk=None):
        volume = self.get_object()
        return _accepted(volume, volumes.volume_delete(actor=request.user, volume=volume))

    @extend_schema(request=s.VolumeExtendInput, responses={202: s.VolumeAccepted, **problems({
        400: "size_must_grow: the new size is not larger (volumes never shrink); validation_error (over the "
             "type's maximum).",
        409: STATE_409 + " volume_in_use: a multi-attach volume attached to several instances, or a guest "
             "holds the image so it cannot grow.", 422: "quota_exceeded: volume_gib."})})
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        volume = self.get_object()
        size = self._input(s.VolumeExtendInput)["size_gib"]
        return _accepted(volume, volumes.volume_extend(actor=request.user, volume=volume, size_gib=size))

    @extend_schema(request=s.VolumeAttachInput, responses={202: s.VolumeAccepted, **problems({
        409: STATE_409 + " already_attached, attachment_limit_reached (16 per instance), host_mismatch, "
             "zone_mismatch, instance_not_placed."})})
    @action(detail=True, methods=["post"])
    def attach(self, request, pk=None):
        volume = self.get_object()
        instance = self._input(s.VolumeAttachInput)["instance"]
        _, op = attachments.volume_attach(actor=request.user, volume=volume, instance=instance)
        return _accepted(volume, op)

    @extend_schema(request=s.VolumeAttachInput, responses={202: s.VolumeAccepted, **problems({
        409: STATE_409 + " not_attached; boot_volume_detach_not_allowed (a boot volume stays attached while its "
             "instance exists; with instances and instance_status)."})})
    @action(detail=True, methods=["post"])
    def detach(self, request, pk=None):
        volume = self.get_object()
        instance = self._input(s.VolumeAttachInput)["instance"]
        return _accepted(volume, attachments.volume_detach(actor=request.user, volume=volume, instance=instance))


class SnapshotViewSet(_Base):
    """Point-in-time copies of volumes; restore one with `POST /volumes/` and `source_snapshot`."""

    serializer_class = s.SnapshotOutput
    filterset_class = filters.SnapshotFilter

    def get_queryset(self):
        return selectors.snapshot_list_visible_to(self.request.user)

    @extend_schema(request=s.SnapshotCreateInput, responses={202: s.SnapshotAccepted, **problems({
        409: STATE_409 + " volume_in_use: a running instance holds the volume (instances); name_taken.",
        422: "quota_exceeded: snapshots (resource, limit, usage, requested); idempotency_key_reused (this "
             "Idempotency-Key was sent with another body)."})})
    @idempotent_create
    def create(self, request):
        data = self._input(s.SnapshotCreateInput)
        snap, op = snapshots.snapshot_create(actor=request.user, request_id=get_request_id(), **data)
        return self._snapshot_accepted(snap, op)

    @extend_schema(request=None, responses={202: s.SnapshotAccepted, **problems({
        409: STATE_409 + " snapshot_in_use: a volume is being created from it."})})
    def destroy(self, request, pk=None):
        snap = self.get_object()
        return self._snapshot_accepted(snap, snapshots.snapshot_delete(actor=request.user, snapshot=snap))

    @staticmethod
    def _snapshot_accepted(snap, op) -> Response:
        snap.refresh_from_db()
        body = s.SnapshotAccepted({"snapshot": snap, "operation": op}).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/operations/{op.pk}"})
