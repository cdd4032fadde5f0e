"""Tenant-owned compute resources: SSH keys, instances and clusters."""
from django.db import models

from apps.core.models import ProjectOwned

from ..states import ClusterStatus, InstanceStatus


class SshKey(ProjectOwned):
    """An OpenSSH public key (`public_key`, one line) of a project; `fingerprint` is OpenSSH's
    ``SHA256:<base64>`` of the key blob."""

    name = models.CharField(max_length=63)
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=64)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="compute_sshkey_project_name"),
            models.UniqueConstraint(fields=["project", "fingerprint"], name="compute_sshkey_project_fp"),
        ]

    def __str__(self) -> str:
        return self.name


class Cluster(ProjectOwned):
    """N instances of one flavor placed together, all-or-nothing, and deleted together."""

    name = models.CharField(max_length=63)
    flavor = models.ForeignKey("compute.Flavor", on_delete=models.PROTECT, related_name="+")
    image = models.ForeignKey("compute.Image", on_delete=models.PROTECT, related_name="+")
    size = models.PositiveSmallIntegerField()
    sla_tier = models.CharField(max_length=32, blank=True, help_text=(
        "SLA tier code the cluster (every member) is bought at; '' = the organization's default tier"))
    placement_policy = models.CharField(max_length=8, blank=True, default="", db_default="", help_text=(
        "the tenant's hint: pack (fill the fullest hosts) | spread (the emptiest) | '' = the zone's or default"))
    topology = models.JSONField(default=dict, db_default={}, blank=True, help_text=(
        "the tenant's topology constraint on the members' hosts: {max_leaves_per_rail, max_spine_groups} "
        "(placement.TopologyConstraint); the members are always on one InfiniBand fabric"))
    status = models.CharField(max_length=16, choices=ClusterStatus.choices, default=ClusterStatus.PENDING)
    error_code = models.CharField(max_length=64, blank=True)
    error_reason = models.CharField(max_length=1000, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], condition=~models.Q(status="deleted"),
                                               name="compute_cluster_project_name_live")]


class Instance(ProjectOwned):
    """A VM. `status` is ours (`states.INSTANCE_TRANSITIONS`); `observed_state` is the hypervisor's power state
    (`drivers.base.PowerState`) with `observed_at`. `host` is set once placement claimed capacity; `devices`
    records what the create workflow prepared (PCI addresses, mdev UUIDs, MIG GPU instances, NVSwitch partition)
    so retries and delete find them. `network` is what the tenant asked for at create (subnet id, security group
ids, InfiniBand partition id); the create workflow makes the port and partition memberships from it (they live
in `apps.networking`, keyed by the instance id). `user_data` is the tenant's cloud-init user data (<= 16 KiB)."""

    name = models.CharField(max_length=63)
    flavor = models.ForeignKey("compute.Flavor", on_delete=models.PROTECT, related_name="+")
    image = models.ForeignKey("compute.Image", on_delete=models.PROTECT, related_name="+")
    ssh_keys = models.ManyToManyField(SshKey, blank=True, related_name="+")
    user_data = models.TextField(blank=True)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, null=True, blank=True, related_name="members")
    status = models.CharField(max_length=16, choices=InstanceStatus.choices, default=InstanceStatus.PENDING,
                              db_index=True)
    observed_state = models.CharField(max_length=16, blank=True)
    observed_at = models.DateTimeField(null=True, blank=True)
    host = models.ForeignKey("inventory.Host", on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    devices = models.JSONField(default=dict, blank=True)
    network = models.JSONField(default=dict, blank=True, help_text=(
        "requested tenant networks: {subnet, security_groups, ib_partition} (ids; checked at create)"))
    error_code = models.CharField(max_length=64, blank=True)
    error_reason = models.CharField(max_length=1000, blank=True)
    launched_at = models.DateTimeField(null=True, blank=True)
    sla_tier = models.CharField(max_length=32, blank=True, help_text=(
        "SLA tier code the instance is bought at (its usage records carry it); '' = the organization's default"))
    placement_policy = models.CharField(max_length=8, blank=True, default="", db_default="", help_text=(
        "the tenant's hint: pack (fill the fullest hosts) | spread (the emptiest) | '' = the zone's or default"))
    deleted_at = models.DateTimeField(null=True, blank=True)
    holds_gpu_quota = models.BooleanField(default=True, help_text=(
        "until placed, the instance holds its flavor's GPUs against the GPU quotas (false inside a lease, "
        "whose own allocation holds them)"))

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], condition=~models.Q(status="deleted"),
                                               name="compute_instance_project_name_live")]
        indexes = [models.Index(fields=["host", "status"], name="compute_instance_host_status")]

    def __str__(self) -> str:
        return self.name


class InstanceFlavorChange(models.Model):
    """One resize: from `at` on, `instance` has `to_flavor` instead of `from_flavor`.

    `at` is the start of the ledger rows the resize claimed (the instant the old allocation ended), so billing can
    rate every ledger period at the flavor the instance had then (`apps.compute.billing`): a period ending at or
    before `at` had `from_flavor`.
    """

    id = models.BigAutoField(primary_key=True)
    instance = models.ForeignKey(Instance, on_delete=models.CASCADE, related_name="flavor_changes")
    from_flavor = models.ForeignKey("compute.Flavor", on_delete=models.PROTECT, related_name="+")
    to_flavor = models.ForeignKey("compute.Flavor", on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["instance", "at"], name="compute_flavorchange_at")]
