import pytest
from django.db import IntegrityError, transaction

from apps.inventory.models import Gpu, Host, Region, Zone

pytestmark = pytest.mark.django_db


def _host(name="h1", serial="S1"):
    region = Region.objects.get_or_create(name="r1")[0]
    zone = Zone.objects.get_or_create(region=region, name="z1")[0]
    return Host.objects.create(name=name, zone=zone, serial=serial)


def test_host_defaults_to_enrolling_and_uuid7_id():
    host = _host()
    assert host.state == "enrolling"
    assert host.id.version == 7


def test_gpu_serial_is_unique_across_hosts():
    h1, h2 = _host("h1", "S1"), _host("h2", "S2")
    Gpu.objects.create(host=h1, index=0, model="H100-SXM5-80GB", uuid="GPU-a", serial="G1", pci_address="0000:18:00.0")
    with pytest.raises(IntegrityError), transaction.atomic():
        Gpu.objects.create(host=h2, index=0, model="H100-SXM5-80GB", uuid="GPU-b", serial="G1",
                           pci_address="0000:18:00.0")
