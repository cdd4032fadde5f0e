"""Fleet import/export: the sample fleet, idempotent re-import, diffs, and invalid files (line numbers)."""
from pathlib import Path

import pytest

from apps.inventory.fleet.export import fleet_export_yaml
from apps.inventory.fleet.sync import fleet_apply, fleet_plan
from apps.inventory.models import Fabric, Gpu, HcaPort, Host, Nic, Switch, SwitchLink

pytestmark = pytest.mark.django_db
SAMPLE = (Path(__file__).resolve().parents[2] / "apps/inventory/fleets/sample.yaml").read_text()


def snapshot():
    return {
        "hosts": sorted(Host.objects.values_list("name", "serial", "state", "zone__name", "rack__name")),
        "gpus": sorted(Gpu.objects.values_list("host__name", "index", "model", "uuid", "serial", "numa_node", "mode")),
        "hca": sorted(HcaPort.objects.values_list("port_guid", "leaf_switch__name", "leaf_port", "rail")),
        "links": SwitchLink.objects.count(), "nics": Nic.objects.count(), "switches": Switch.objects.count(),
    }


@pytest.fixture
def sample():
    plan = fleet_plan(SAMPLE)
    assert plan.errors == []
    fleet_apply(plan)
    return plan


def test_sample_fleet_shape(sample):
    assert Host.objects.filter(zone__name="eu-west-a").count() == 64
    assert Gpu.objects.filter(host__zone__name="eu-west-a", model="H100-SXM5-80GB").count() == 512
    assert Gpu.objects.filter(model="H200-SXM-141GB").count() == 64
    assert Gpu.objects.filter(model="L40S").count() == 32
    assert HcaPort.objects.count() == 512
    assert not HcaPort.objects.filter(host__zone__name="eu-west-b").exists()
    assert Switch.objects.filter(role="leaf", fabric__kind="infiniband").count() == 16
    # one leaf per rail per SU: the 8 ports of a node land on 8 different leaves of its own SU
    host = Host.objects.get(name="a-su2-n05")
    assert sorted(host.hca_ports.values_list("rail", "leaf_switch__name", "leaf_port")) == [
        (r, f"ib-leaf-su2-rail{r}", 5) for r in range(8)]
    ib = Fabric.objects.get(name="ib-compute")
    assert sorted(ib.subnet_managers.values_list("role", "priority")) == [("primary", 15), ("standby", 14)]
    assert SwitchLink.objects.filter(a_switch__role="leaf", b_switch__role="spine",
                                     a_switch__fabric=ib).count() == 16 * 8 * 4
    assert set(Host.objects.values_list("libvirt_uri", flat=True)) == {"test:///default"}
    assert set(Host.objects.values_list("state", flat=True)) == {"available"}


def test_reimport_changes_nothing(sample):
    before = snapshot()
    again = fleet_plan(SAMPLE)
    assert again.errors == [] and again.changes == []
    fleet_apply(again)
    assert snapshot() == before


def test_export_reimports_without_change(sample):
    text = fleet_export_yaml()
    plan = fleet_plan(text)
    assert plan.errors == [] and plan.diff_lines() == []


def test_changed_file_shows_a_diff_and_applies_it(sample):
    changed = SAMPLE.replace("driver_version: 550.90.07\n    libvirt_uri: \"test:///default\"\n    state: available\n"
                             "    gpus:\n      count: 8\n      index: \"{i}\"\n      model: H200",
                             "driver_version: 560.35.03\n    libvirt_uri: \"test:///default\"\n    state: available\n"
                             "    gpus:\n      count: 8\n      index: \"{i}\"\n      model: H200", 1)
    assert changed != SAMPLE
    plan = fleet_plan(changed)
    assert len(plan.changes) == 8
    assert plan.diff_lines()[0] == "~ host b-h200-n01: driver_version: '550.90.07' -> '560.35.03'"
    assert Host.objects.get(name="b-h200-n01").driver_version == "550.90.07"  # planning writes nothing
    fleet_apply(plan)
    assert Host.objects.get(name="b-h200-n01").driver_version == "560.35.03"


BASE = """\
version: 1
regions: [{name: r1}]
zones: [{name: z1, region: r1}]
fabrics: [{name: ib, kind: infiniband, region: r1}]
switches:
  - {name: leaf1, fabric: ib, role: leaf, ports: 8}
hosts:
  - name: h1
    zone: z1
    serial: S1
    numa_nodes: 2
    gpus:
      - {index: 0, model: H100-SXM5-80GB, uuid: GPU-1, serial: G1, pci_address: "0000:18:00.0", numa_node: 0}
    hca_ports:
      - {device: mlx5_0, port_guid: "0x01", fabric: ib, leaf_switch: leaf1, leaf_port: 1}
  - name: h2
    zone: z1
    serial: S2
    gpus:
      - {index: 0, model: H100-SXM5-80GB, uuid: GPU-2, serial: G2, pci_address: "0000:18:00.0", numa_node: 0}
    hca_ports:
      - {device: mlx5_0, port_guid: "0x02", fabric: ib, leaf_switch: leaf1, leaf_port: 2}
"""


def test_base_document_is_valid():
    assert fleet_plan(BASE).errors == []


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("model: H100-SXM5-80GB, uuid: GPU-2", "model: H900-SXM, uuid: GPU-2",
     "line 20: gpu h2/0: unknown GPU model 'H900-SXM'"),
    ("serial: S2", "serial: S1", "line 18: duplicate host serial 'S1' (also line 10)"),
    ("serial: G2", "serial: G1", "line 20: duplicate gpu serial 'G1' (also line 13)"),
    ('port_guid: "0x02"', 'port_guid: "0x01"', "line 22: duplicate hca_port port_guid '0x01' (also line 15)"),
    ("leaf_port: 2", "leaf_port: 1",
     "line 22: switch port leaf1:1 used twice: HCA port h2/mlx5_0 and HCA port h1/mlx5_0 (line 15)"),
    ('"0000:18:00.0", numa_node: 0}\n    hca_ports:\n      - {device: mlx5_0, port_guid: "0x01"',
     '"0000:18:00.0", numa_node: 2}\n    hca_ports:\n      - {device: mlx5_0, port_guid: "0x01"',
     "line 13: gpu h1/0: NUMA node 2 but host h1 has 2 NUMA node(s)"),
])
def test_invalid_file_rejected_with_line_and_nothing_written(old, new, expected):
    bad = BASE.replace(old, new, 1)
    assert bad != BASE
    plan = fleet_plan(bad)
    assert [str(e) for e in plan.errors] == [expected]
    with pytest.raises(ValueError):
        fleet_apply(plan)
    assert Host.objects.count() == 0


def test_serial_owned_by_another_host_in_the_inventory(sample):
    doc = BASE.replace("serial: S1", "serial: S4H1000001")
    assert "line 10: host serial 'S4H1000001' already belongs to host a-su1-n01 in the inventory" in [
        str(e) for e in fleet_plan(doc).errors]


def test_yaml_syntax_error_names_the_line():
    plan = fleet_plan("version: 1\nhosts:\n  - {name: h1\n")
    assert len(plan.errors) == 1 and plan.errors[0].line == 4
