"""What tenants choose from: flavors (instance types) and images. Both are written by provider staff."""
from django.db import models

from apps.core.models import TimestampedModel

from ..states import GpuForm, ProvisioningKind, Visibility


class Flavor(TimestampedModel):
    """An instance type. Units: `memory_mib` MiB, `disk_gib` GiB, `share_milli` milli-GPU (1000 = one GPU).

    GPU spec, one form (`gpu_form`): `gpu` = `gpu_count` whole GPUs of catalog model `gpu_model`; `mig` = one
    GPU instance of `mig_profile` (e.g. ``3g.40gb``) on a `gpu_model`, handed to the VM as a MIG-backed vGPU;
    `vgpu` = one vGPU of `vgpu_type`; `share` = `share_milli`; `none` = CPU only.
    `visibility` `organization` offers it only to `organizations`.
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=16, choices=ProvisioningKind.choices, default=ProvisioningKind.VM)
    vcpus = models.PositiveIntegerField()
    memory_mib = models.PositiveIntegerField()
    disk_gib = models.PositiveIntegerField(default=0)
    gpu_form = models.CharField(max_length=8, choices=GpuForm.choices, default=GpuForm.NONE)
    gpu_model = models.CharField(max_length=32, blank=True, help_text="catalog key, e.g. H100-SXM5-80GB")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    mig_profile = models.CharField(max_length=32, blank=True)
    vgpu_type = models.CharField(max_length=32, blank=True)
    share_milli = models.PositiveSmallIntegerField(default=0)
    hugepages = models.BooleanField(default=False, help_text="back memory with 1 GiB pages")
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.PUBLIC)
    organizations = models.ManyToManyField("tenancy.Organization", blank=True, related_name="+")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                name="compute_flavor_gpu_form",
                condition=(models.Q(gpu_form="none", gpu_count=0, mig_profile="", vgpu_type="", share_milli=0)
                           | models.Q(gpu_form="gpu", gpu_count__gte=1, mig_profile="", vgpu_type="",
                                      share_milli=0)
                           | models.Q(gpu_form="mig", gpu_count=0, vgpu_type="", share_milli=0)
                           & ~models.Q(mig_profile="")
                           | models.Q(gpu_form="vgpu", gpu_count=0, mig_profile="", share_milli=0)
                           & ~models.Q(vgpu_type="")
                           | models.Q(gpu_form="share", gpu_count=0, mig_profile="", vgpu_type="",
                                      share_milli__gte=1, share_milli__lte=999)),
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Image(TimestampedModel):
    """A boot image: `source_url` (qcow2 or raw) with `checksum` (``sha256:<hex>``), OS and architecture.
    `cloud_init` says whether the image reads a NoCloud seed (SSH keys, hostname, network). `secure_boot` boots
    it with UEFI Secure Boot (Microsoft's keys enrolled); off by default, because a Secure Boot kernel refuses
    unsigned modules such as the NVIDIA driver built by DKMS (docs/compute.md, "Firmware")."""

    name = models.SlugField(max_length=63, unique=True)
    os = models.CharField(max_length=32, help_text="e.g. ubuntu")
    os_version = models.CharField(max_length=32, blank=True, help_text="e.g. 24.04")
    arch = models.CharField(max_length=16, default="x86_64", choices=[("x86_64", "x86_64"), ("aarch64", "aarch64")])
    cloud_init = models.BooleanField(default=True)
    source_url = models.URLField(max_length=500)
    checksum = models.CharField(max_length=100, help_text="sha256:<64 hex digits>")
    disk_format = models.CharField(max_length=8, default="qcow2", choices=[("qcow2", "qcow2"), ("raw", "raw")])
    min_disk_gib = models.PositiveIntegerField(default=0)
    secure_boot = models.BooleanField(default=False, help_text="boot with UEFI Secure Boot")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
