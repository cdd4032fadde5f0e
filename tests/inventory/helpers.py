"""Small inventory builders for tests (no fleet file needed)."""
from apps.inventory.models import Fabric, Gpu, HcaPort, Host, Rack, Region, ScalableUnit, Switch, Zone


def make_host(name="h1", *, state="available", gpus=0, model="H100-SXM5-80GB", hca=0, zone="z1", **extra) -> Host:
    region = Region.objects.get_or_create(name="r1")[0]
    zone_obj = Zone.objects.get_or_create(name=zone, defaults={"region": region})[0]
    su = ScalableUnit.objects.get_or_create(zone=zone_obj, name="su1")[0]
    rack = Rack.objects.get_or_create(zone=zone_obj, name="rack1", defaults={"scalable_unit": su})[0]
    host = Host.objects.create(name=name, zone=zone_obj, scalable_unit=su, rack=rack, serial=f"SER-{name}",
                               state=state, numa_nodes=2, **extra)
    for i in range(gpus):
        Gpu.objects.create(host=host, index=i, model=model, uuid=f"GPU-{name}-{i}", serial=f"G-{name}-{i}",
                           pci_address=f"0000:{0x18 + i:02x}:00.0", numa_node=i * 2 // max(gpus, 1))
    if hca:
        fabric = Fabric.objects.get_or_create(name="ib", defaults={"kind": "infiniband", "region": region})[0]
        for i in range(hca):
            leaf = Switch.objects.get_or_create(name=f"leaf-r{i}", defaults={"fabric": fabric, "role": "leaf",
                                                                             "rail": i})[0]
            HcaPort.objects.create(host=host, device=f"mlx5_{i}", port_guid=f"0x{name}{i:04x}", fabric=fabric,
                                   rail=i, leaf_switch=leaf, leaf_port=Host.objects.count())
    return host
