"""Reservations API: /leases (with cancel/extend/shrink), /capacity, /instance-requests, /queued-requests,
/instances/{id}/capacity, /webhooks. Querysets come from `*_visible_to` selectors (another tenant's object is
a 404; in a body, "Not found.", a 400). Refusals are problem+json: 409 `capacity_unavailable` carries ``constraint`` and ``explanation``."""
import datetime as dt

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.api import ApiViewMixin
from apps.core.errors import NotFound, ValidationFailed, dry_run
from apps.core.idempotency import idempotent_create
from apps.core.request_context import get_request_id
from apps.core.schema import problems
from apps.identity.permissions import IsStaffOperator
from apps.scheduling.api.serializers import PLACEMENT_RULE_RESPONSES, PlacementCheckOutput

from .. import selectors
from ..models import OnDemandReserve, QueuedRequest, QueuePriority, WebhookEndpoint
from ..services import leases, policy, queue, webhooks
from . import filters
from . import serializers as s

QUOTA_422 = problems({422: "quota_exceeded: the moved, extended or grown lease would pass a GPU quota at the busiest "
                            "moment of its window (resource, limit, usage, requested, exceeded; docs/adr/"
                            "0802-lease-gpu-quota.md)."})


class _Base(ApiViewMixin, viewsets.GenericViewSet):
    pass


class LeaseViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _Base):
    """Private-cloud leases: capacity reserved for ``[start, end)``. DELETE cancels."""

    serializer_class = s.LeaseOutput
    filterset_class = filters.LeaseFilter

    def get_queryset(self):
        return selectors.lease_list_visible_to(self.request.user).select_related("project__organization")

    @extend_schema(request=s.LeaseCreateInput, responses={201: s.LeaseOutput, **PLACEMENT_RULE_RESPONSES})
    @idempotent_create
    def create(self, request):
        data = dict(self._input(s.LeaseCreateInput))
        lease = leases.lease_create(actor=request.user, **data)
        return Response(s.LeaseOutput(lease).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.LeaseCreateInput, responses={200: PlacementCheckOutput},
                   description="Dry run of the lease create with the same body: whether its capacity exists for "
                               "the whole window now, the code the create would answer, why, the earliest start "
                               "(same duration) at which it would fit, the quota and the reserved price over the "
                               "window. Same validation (400), permission (403) and references (ADR 0010) as the "
                               "create; writes nothing (docs/adr/0405-launch-checks.md).")
    @action(detail=False, methods=["post"])
    @dry_run
    def check(self, request):
        data = dict(self._input(s.LeaseCreateInput))
        return Response(PlacementCheckOutput(leases.lease_check(actor=request.user, **data)).data)

    @extend_schema(request=s.LeaseUpdateInput, responses={200: s.LeaseOutput, **QUOTA_422})
    def partial_update(self, request, pk=None):
        lease = leases.lease_update(actor=request.user, lease=self.get_object(), **self._input(s.LeaseUpdateInput))
        return Response(s.LeaseOutput(lease).data)

    @extend_schema(request=None, responses={200: s.LeaseOutput, **problems({
        409: "invalid_state: the lease cannot be cancelled in its current state (allowed_states); "
             "consumer_generation_conflict: its allocations changed meanwhile, send it again."})})
    def destroy(self, request, pk=None):
        return Response(s.LeaseOutput(leases.lease_cancel(actor=request.user, lease=self.get_object())).data)

    @extend_schema(request=None, responses={200: s.LeaseOutput, **problems({
        409: "invalid_state: the lease cannot be cancelled in its current state (allowed_states); "
             "consumer_generation_conflict: its allocations changed meanwhile, send it again."})})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        return Response(s.LeaseOutput(leases.lease_cancel(actor=request.user, lease=self.get_object())).data)

    def _move_end(self, request, *, later: bool):
        lease = self.get_object()
        end = self._input(s.LeaseEndInput)["end"]
        from ..services.windows import parse_instant, zone_get

        new_end = parse_instant(end, zone_get(lease.time_zone), "end")
        if (new_end > lease.end) != later or new_end == lease.end:
            word = "after" if later else "before"
            raise ValidationFailed(f"end must be {word} the current end", errors={"end": [f"{word} {lease.end}"]})
        return Response(s.LeaseOutput(leases.lease_update(actor=request.user, lease=lease, end=new_end)).data)

    @extend_schema(request=s.LeaseEndInput, responses={200: s.LeaseOutput, **QUOTA_422})
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        return self._move_end(request, later=True)

    @extend_schema(request=s.LeaseEndInput, responses={200: s.LeaseOutput, **QUOTA_422})
    @action(detail=True, methods=["post"])
    def shrink(self, request, pk=None):
        return self._move_end(request, later=False)


class CapacityViewSet(_Base):
    """Capacity calendar: free GPUs / hosts by GPU model, zone and time bucket (staff: whole fleet with totals)."""

    serializer_class = s.CapacityBucket
    pagination_class = None

    def get_queryset(self):
        return QueuedRequest.objects.none()

    @extend_schema(parameters=[s.CapacityQuery], responses={200: s.CapacityBucket(many=True)})
    def list(self, request):
        q = self._input(s.CapacityQuery, data=request.query_params)
        step = dt.timedelta(seconds=q["step_s"])
        if q["end"] <= q["start"] or (q["end"] - q["start"]) / step > selectors.MAX_BUCKETS:
            raise ValidationFailed(f"end must be after start, at most {selectors.MAX_BUCKETS} buckets",
                                   errors={"end": ["after start", f"<= {selectors.MAX_BUCKETS} buckets"]})
        rows = selectors.capacity_calendar(user=request.user, start=q["start"], end=q["end"], step=step,
                                           gpu_model=q["gpu_model"], zone=q["zone"])
        return Response(s.CapacityBucket(rows, many=True).data)

    @extend_schema(parameters=[], responses={200: s.FleetCapacityFigures, **problems({
        404: "not_found: the caller is not provider staff."})},
        description="Staff: the fleet's GPUs per model and zone in the heat map's states (the capacity screen's "
                    "counts, without the heat map's cells), its fragmentation now per GPU model and zone (free whole "
                    "GPUs stranded for the typical requests, FGD's measure against the whole-GPU requests running "
                    "and queued) and the "
                    "on-demand queue (depth, waits now and over the last 24 h). Tenants 404.")
    @action(detail=False, methods=["get"], url_path="fleet-figures", permission_classes=[IsStaffOperator],
            pagination_class=None)
    def fleet_figures(self, request):
        from apps.core.clock import now
        from apps.scheduling.selectors import fleet_gpu_counts

        at = now()
        return Response(s.FleetCapacityFigures({"generated_at": at, "gpus": fleet_gpu_counts(at),
                                                "fragmentation": selectors.fleet_fragmentation(at),
                                                "queue": selectors.queue_figures(at)}).data)


class QueuedRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _Base):
    """On-demand requests waiting for capacity: position, reason, expiry."""

    serializer_class = s.QueuedRequestOutput
    filterset_class = filters.QueuedRequestFilter

    def get_queryset(self):
        return selectors.queued_request_list_visible_to(self.request.user)

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "positions": queue.queue_positions()}


class InstanceRequestViewSet(_Base):
    """Create an instance with capacity terms: on-demand (optionally queued), spot, or inside a lease."""

    serializer_class = s.InstanceRequestAccepted

    def get_queryset(self):
        return selectors.instance_terms_list_visible_to(self.request.user)

    @extend_schema(request=s.InstanceRequestInput,
                       responses={202: s.InstanceRequestAccepted, **PLACEMENT_RULE_RESPONSES})
    @idempotent_create
    def create(self, request):
        data = self._input(s.InstanceRequestInput)
        inst, op, terms, queued = queue.instance_request_create(
            actor=request.user, project=data["project"], name=data["name"],
            flavor_id=data["flavor"].pk, image_id=data["image"].pk, ssh_key_ids=[k.pk for k in data["ssh_keys"]],
            user_data=data["user_data"], market=data["market"], lease_id=data["lease"] and data["lease"].pk,
            queue_timeout_s=data["queue_timeout_s"], request_id=get_request_id())
        inst.refresh_from_db()
        ctx = {"queued": queued, "positions": queue.queue_positions() if queued else {}}
        body = {"instance": s.InstanceOutput(inst).data, "operation": s.OperationOutput(op).data,
                "capacity": s.InstanceCapacityOutput(terms, context=ctx).data}
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/operations/{op.pk}"})


class InstanceCapacityViewSet(_Base):
    """GET /instances/{id}/capacity: market, lease, queued request (position, reason, expiry), interruption."""

    serializer_class = s.InstanceCapacityOutput

    def get_queryset(self):
        return selectors.instance_terms_list_visible_to(self.request.user)

    def retrieve(self, request, pk=None):
        terms = self.get_queryset().filter(instance_id=pk).first()
        if terms is None:
            raise NotFound("No capacity terms for this instance.")
        queued = QueuedRequest.objects.filter(instance_id=pk).first()
        ctx = {"queued": queued, "positions": queue.queue_positions() if queued else {}}
        return Response(s.InstanceCapacityOutput(terms, context=ctx).data)


class WebhookEndpointViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _Base):
    """An organization's webhook endpoints (owners/admins). Payloads are signed (see docs/reservations.md)."""

    serializer_class = s.WebhookEndpointOutput

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation: no user, no database
            return WebhookEndpoint.objects.none()
        return selectors.webhook_endpoint_list_visible_to(self.request.user)

    @extend_schema(request=s.WebhookEndpointCreateInput, responses={201: s.WebhookEndpointCreated})
    @idempotent_create(unstored=("secret",))
    def create(self, request):
        data = self._input(s.WebhookEndpointCreateInput)
        ep = webhooks.webhook_endpoint_create(actor=request.user, organization=data["organization"], url=data["url"],
                                              events=data["events"])
        return Response(s.WebhookEndpointCreated(ep).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        webhooks.webhook_endpoint_delete(actor=request.user, endpoint=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class OnDemandReserveViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, _Base):
    """Provider staff: GPUs kept free for on-demand work (leases are refused when they would eat into it).
    POST creates or replaces the row of (gpu_model, zone)."""

    serializer_class = s.OnDemandReserveSerializer
    permission_classes = [IsStaffOperator]

    def get_queryset(self):
        return OnDemandReserve.objects.order_by("gpu_model", "zone")

    @extend_schema(request=s.OnDemandReserveSerializer, responses={201: s.OnDemandReserveSerializer})
    def create(self, request):
        data = self._input(s.OnDemandReserveSerializer)
        row = policy.on_demand_reserve_set(actor=request.user, gpu_model=data["gpu_model"],
                                           zone=data.get("zone", ""), gpus=data["gpus"])
        return Response(s.OnDemandReserveSerializer(row).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request, pk=None):
        policy.on_demand_reserve_delete(actor=request.user, reserve=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)


class QueuePriorityViewSet(mixins.ListModelMixin, _Base):
    """Provider staff: per-project priority in the on-demand queue (higher first). POST sets it."""

    serializer_class = s.QueuePrioritySerializer
    permission_classes = [IsStaffOperator]

    def get_queryset(self):
        return QueuePriority.objects.order_by("-priority", "project_id")

    @extend_schema(request=s.QueuePrioritySerializer, responses={201: s.QueuePrioritySerializer})
    def create(self, request):
        data = self._input(s.QueuePrioritySerializer)
        row = policy.queue_priority_set(actor=request.user, project=data["project"], priority=data["priority"])
        return Response(s.QueuePrioritySerializer(row).data, status=status.HTTP_201_CREATED)
