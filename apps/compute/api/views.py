"""Compute API: /flavors, /images, /ssh-keys, /instances (with actions), /clusters.

Querysets come from the `*_list_visible_to` selectors, so another tenant's object is a 404. Long actions answer
202 with the instance and its Operation, and `Location: /api/v1/operations/{id}`. Creates of SSH keys,
instances and clusters accept an `Idempotency-Key` header (`apps.core.idempotency`).
"""
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.core.api import ApiViewMixin
from apps.core.errors import dry_run
from apps.core.idempotency import idempotent_create
from apps.core.request_context import get_request_id
from apps.core.schema import BAREMETAL_UNAVAILABLE, problems
from apps.scheduling.api.serializers import PLACEMENT_RULE_RESPONSES, PlacementCheckOutput

from .. import selectors
from ..services import catalog, clusters, instances, launch, ssh_keys
from . import filters
from . import serializers as s


class _Base(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    pass


class FlavorViewSet(_Base):
    """Instance types offered to the caller's organizations; staff operators create them."""

    staff_actions = {"create"}

    serializer_class = s.FlavorOutput
    filterset_class = filters.FlavorFilter

    def get_queryset(self):
        return selectors.flavor_list_visible_to(self.request.user)

    def get_serializer(self, *args, **kwargs):
        """A page of flavors reads its prices in one query, not one per row."""
        if kwargs.get("many") and args:
            rows = list(args[0])
            context = self.get_serializer_context()
            context["flavor_prices"] = s.flavor_prices_for(self.request, rows)
            kwargs["context"] = context
            args = (rows, *args[1:])
        return super().get_serializer(*args, **kwargs)

    @extend_schema(request=s.FlavorCreateInput, responses={201: s.FlavorOutput})
    def create(self, request):
        data = dict(self._input(s.FlavorCreateInput))
        flavor = catalog.flavor_create(actor=request.user, **data)
        return Response(s.FlavorOutput(flavor).data, status=status.HTTP_201_CREATED)


class ImageViewSet(_Base):
    """Boot images; staff operators register them."""

    staff_actions = {"create"}

    serializer_class = s.ImageOutput
    filterset_class = filters.ImageFilter

    def get_queryset(self):
        return selectors.image_list_visible_to(self.request.user)

    @extend_schema(request=s.ImageCreateInput, responses={201: s.ImageOutput})
    def create(self, request):
        image = catalog.image_create(actor=request.user, **self._input(s.ImageCreateInput))
        return Response(s.ImageOutput(image).data, status=status.HTTP_201_CREATED)


class SshKeyViewSet(_Base):
    """A project's SSH public keys (installed into instances through cloud-init)."""

    serializer_class = s.SshKeyOutput
    filterset_class = filters.SshKeyFilter

    def get_queryset(self):
        return selectors.ssh_key_list_visible_to(self.request.user)

    @extend_schema(request=s.SshKeyCreateInput, responses={201: s.SshKeyOutput})
    @idempotent_create
    def create(self, request):
        data = self._input(s.SshKeyCreateInput)
        key = ssh_keys.ssh_key_create(actor=request.user, project=data["project"],
                                      name=data["name"], public_key=data["public_key"])
        return Response(s.SshKeyOutput(key).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None, **problems({
        409: "ssh_key_in_use: an instance was created with this key (its record keeps it)."})})
    def destroy(self, request, pk=None):
        ssh_keys.ssh_key_delete(actor=request.user, ssh_key=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

def _accepted(instance, op) -> Response:
    instance.refresh_from_db()
    body = s.InstanceAccepted({"instance": instance, "operation": op}).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": f"/api/v1/operations/{op.pk}"})


def _network_fields(data) -> dict:
    return {"subnet_id": _pk(data["subnet_id"]), "security_group_ids": [g.pk for g in data["security_group_ids"]],
            "ib_partition_id": _pk(data["ib_partition_id"])}


def _pk(obj):
    return None if obj is None else obj.pk


def _launch_fields(data) -> dict:
    """The service arguments of an instance or cluster create body (shared by the create and its check)."""
    return {"project": data["project"], "name": data["name"], "flavor_id": data["flavor"].pk,
            "image_id": data["image"].pk if data["image"] is not None else None, "ssh_key_ids": [k.pk for k in data["ssh_keys"]],
            "user_data": data["user_data"], "queue": data["queue"], **_network_fields(data)}


def _volume_requests(data) -> list[dict]:
    """The create body's `volumes` as the service takes them (`instances.instance_create`)."""
    return [dict(v) for v in data.get("volumes", [])]


CHECK_DOC = ("Dry run of the create with the same body: whether it could be placed now, the code the create "
             "would answer, why (the placement rule's explanation, quota lines), when it would fit "
             "(earliest_start) and the price per hour. Same validation (400), permission (403) and references "
             "(ADR 0010) as the create; writes nothing (docs/adr/0405-launch-checks.md).")


class InstanceViewSet(_Base):
    """GPU virtual machines. `status` is ours; `observed_state` is the hypervisor's power state."""

    serializer_class = s.InstanceOutput
    filterset_class = filters.InstanceFilter

    def get_queryset(self):
        return selectors.instance_list_visible_to(self.request.user).select_related("project__organization")

    def get_serializer(self, *args, **kwargs):
        """A page of instances reads its ports and partition members in two queries, not two per row."""
        if kwargs.get("many") and args:
            from ..services.networks import networks_by_instance

            context = self.get_serializer_context()
            context["networks_by_instance"] = networks_by_instance([i.pk for i in args[0]])
            context["maintenance_by_instance"] = selectors.maintenance_by_instance([i.pk for i in args[0]])
            kwargs["context"] = context
        return super().get_serializer(*args, **kwargs)

    @extend_schema(request=s.InstanceCreateInput, responses={202: s.InstanceAccepted, **PLACEMENT_RULE_RESPONSES,
                                                             **problems({503: BAREMETAL_UNAVAILABLE})})
    @idempotent_create
    def create(self, request):
        data = self._input(s.InstanceCreateInput)
        inst, op = instances.instance_create(actor=request.user, request_id=get_request_id(),
                                             sla_tier=data["sla_tier"], volumes=_volume_requests(data),
                                             placement_policy=data.get("placement_policy", ""), **_launch_fields(data))
        return _accepted(inst, op)

    @extend_schema(request=s.InstanceCheckInput, responses={200: PlacementCheckOutput},
                   description=CHECK_DOC + " `name` and `image` may be left out: then only the flavor's placement, "
                                           "quota and price are answered (the name and image are not checked).")
    @action(detail=False, methods=["post"])
    @dry_run
    def check(self, request):
        data = self._input(s.InstanceCheckInput)
        return Response(PlacementCheckOutput(launch.instance_check(
            actor=request.user, sla_tier=data["sla_tier"], volumes=_volume_requests(data),
            **_launch_fields(data))).data)

    @extend_schema(request=None, responses={202: s.InstanceAccepted, **problems({
        409: "invalid_state: not allowed in the current state (allowed_states lists those that are); "
             "not_supported_for_flavor_kind: the flavor's kind has no workflow for this action."})})
    def destroy(self, request, pk=None):
        inst = self.get_object()
        return _accepted(inst, instances.instance_delete(actor=request.user, instance=inst))

    @extend_schema(request=s.InstanceActionInput, responses={202: s.InstanceAccepted})
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        inst = self.get_object()
        hard = self._input(s.InstanceActionInput)["hard"]
        return _accepted(inst, instances.instance_stop(actor=request.user, instance=inst, hard=hard))

    @extend_schema(request=None, responses={202: s.InstanceAccepted, **problems({
        409: "invalid_state: only a stopped instance starts (allowed_states); "
             "capacity_released: a GPU instance whose lease ended or was cancelled holds no GPU any more; "
             "not_supported_for_flavor_kind: the flavor's kind has no workflow for this action."})})
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        inst = self.get_object()
        return _accepted(inst, instances.instance_start(actor=request.user, instance=inst))

    @extend_schema(request=s.InstanceActionInput, responses={202: s.InstanceAccepted})
    @action(detail=True, methods=["post"])
    def reboot(self, request, pk=None):
        inst = self.get_object()
        hard = self._input(s.InstanceActionInput)["hard"]
        return _accepted(inst, instances.instance_reboot(actor=request.user, instance=inst, hard=hard))

    @extend_schema(request=s.InstanceRebuildInput, responses={202: s.InstanceAccepted, **problems({
        409: "invalid_state: only an active or stopped instance is rebuilt (allowed_states); "
             "not_supported_for_flavor_kind: a VM (rebuild is for bare-metal instances)."})})
    @action(detail=True, methods=["post"])
    def rebuild(self, request, pk=None):
        inst = self.get_object()
        image = self._input(s.InstanceRebuildInput)["image"]
        return _accepted(inst, instances.instance_rebuild(actor=request.user, instance=inst,
                                                          image_id=image.pk if image is not None else None))

    @extend_schema(request=s.InstanceResizeInput, responses={202: s.InstanceAccepted, **problems({
        409: "invalid_state: only a stopped instance is resized (allowed_states); flavor_does_not_fit: the GPU "
             "spec differs, or its host (or its lease) lacks room; lease_not_usable: the instance draws from a "
             "lease that is no longer active; capacity_unavailable: spot instances are still giving the lease's "
             "GPUs back (try again after their notice); not_supported_for_flavor_kind: a bare-metal instance "
             "(a whole host) is not resized.",
        422: "quota_exceeded: the larger flavor would pass a quota (resource, limit, usage, "
             "requested)."})})
    @action(detail=True, methods=["post"])
    def resize(self, request, pk=None):
        inst = self.get_object()
        flavor = self._input(s.InstanceResizeInput)["flavor"]
        return _accepted(inst, instances.instance_resize(actor=request.user, instance=inst, flavor_id=flavor.pk))

    @extend_schema(responses={200: s.ConsoleLogOutput,
                              404: OpenApiResponse(description="not_found: no such instance (or another tenant's); "
                                                               "domain_not_found: its domain is gone (deleted, "
                                                               "failed create, removed on the host)."),
                              409: OpenApiResponse(description="domain_not_defined: the instance has no domain "
                                                               "yet (pending, or its create has not defined it)."),
                              503: OpenApiResponse(description="service_unavailable: no worker or hypervisor "
                                                               "answered; console_log_unavailable: the hypervisor "
                                                               "cannot serve the log (remote host, unreadable "
                                                               "file).")})
    @action(detail=True, methods=["get"], url_path="console-log")
    def console_log(self, request, pk=None):
        inst = self.get_object()
        return Response({"log": instances.instance_console_log(actor=request.user, instance=inst)})


class ClusterViewSet(_Base):
    """N instances of one flavor placed together (all-or-nothing) and deleted together."""

    serializer_class = s.ClusterOutput
    filterset_class = filters.ClusterFilter

    def get_queryset(self):
        return (selectors.cluster_list_visible_to(self.request.user).prefetch_related("members")
                .select_related("project__organization"))

    @extend_schema(request=s.ClusterCreateInput, responses={201: s.ClusterOutput, **PLACEMENT_RULE_RESPONSES})
    @idempotent_create
    def create(self, request):
        data = self._input(s.ClusterCreateInput)
        cluster = clusters.cluster_create(actor=request.user, request_id=get_request_id(), size=data["size"],
                                          sla_tier=data["sla_tier"], placement_policy=data.get("placement_policy", ""),
                                          topology=dict(data.get("topology") or {}), **_launch_fields(data))
        return Response(s.ClusterOutput(cluster).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.ClusterCreateInput, responses={200: PlacementCheckOutput}, description=CHECK_DOC)
    @action(detail=False, methods=["post"])
    @dry_run
    def check(self, request):
        data = self._input(s.ClusterCreateInput)
        return Response(PlacementCheckOutput(
            launch.cluster_check(actor=request.user, size=data["size"], sla_tier=data["sla_tier"],
                                 topology=dict(data.get("topology") or {}), **_launch_fields(data))).data)

    @extend_schema(request=None, responses={202: s.ClusterOutput, **problems({
        409: "invalid_state: not allowed in the current state (allowed_states lists those that are); "
             "not_supported_for_flavor_kind: the flavor's kind has no workflow for this action."})})
    def destroy(self, request, pk=None):
        cluster = clusters.cluster_delete(actor=request.user, cluster=self.get_object())
        return Response(s.ClusterOutput(cluster).data, status=status.HTTP_202_ACCEPTED)
