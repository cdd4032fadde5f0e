"""Unit tests of the NoCloud seed builder and the domain XML builder (no libvirt connection)."""
from __future__ import annotations

import uuid
import xml.etree.ElementTree as ET

import pytest
import yaml

from apps.compute.drivers.base import USER_DATA_MAX_BYTES, CloudInitSeed, DomainSpec, VolumeDisk
from apps.compute.drivers.libvirt.xml import domain_xml, parse_metadata, pci_parts
from apps.compute.drivers.seed import read_seed_iso, seed_iso
from apps.core.drivers import DriverError


def test_seed_iso_holds_meta_user_and_network_config():
    seed = CloudInitSeed("i-42", "web-1", ("ssh-ed25519 AAAA a", "ssh-rsa BBBB b"), "#cloud-config\nruncmd: [ls]\n",
                         "version: 2\nethernets: {}\n")
    data = seed_iso(seed)
    assert data[32808:32814] == b"cidata"  # ISO 9660 primary volume descriptor, volume identifier
    files = read_seed_iso(data)
    assert sorted(files) == ["meta-data", "network-config", "user-data"]
    assert yaml.safe_load(files["meta-data"]) == {
        "instance-id": "i-42", "local-hostname": "web-1", "public-keys": ["ssh-ed25519 AAAA a", "ssh-rsa BBBB b"]}
    assert files["user-data"] == b"#cloud-config\nruncmd: [ls]\n"
    assert files["network-config"] == b"version: 2\nethernets: {}\n"


def test_seed_rejects_user_data_over_the_limit():
    with pytest.raises(DriverError) as exc:
        seed_iso(CloudInitSeed("i", "h", (), "x" * (USER_DATA_MAX_BYTES + 1)))
    assert exc.value.code == "user_data_too_large"


def test_pci_parts_and_errors():
    assert pci_parts("0000:3B:00.1") == {"domain": "0x0000", "bus": "0x3b", "slot": "0x00", "function": "0x1"}
    for bad in ("3b:00.0", "0000:3b:00.8", "0000:3b:0.0"):
        with pytest.raises(DriverError):
            pci_parts(bad)


def test_hugepages_need_whole_gib():
    with pytest.raises(DriverError) as exc:
        domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=1536, hugepages=True))
    assert exc.value.code == "invalid_memory_for_hugepages"


def test_cpuset_shorter_than_vcpus_is_rejected():
    with pytest.raises(DriverError) as exc:
        domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=4, memory_mib=1024, cpuset=(0, 1), dedicated_cpus=True))
    assert exc.value.code == "invalid_cpuset"


def test_metadata_round_trip_and_tcg_has_no_kvm_features():
    u = uuid.uuid4()
    xml = domain_xml(DomainSpec(uuid=u, vcpus=1, memory_mib=64, project_id="proj-9", virt_type="qemu",
                                uefi=False, machine="pc"))
    assert parse_metadata(xml) == (True, "proj-9")
    root = ET.fromstring(xml)
    assert root.get("type") == "qemu" and root.find("features/kvm") is None and root.find("cpu") is None
    assert root.find("os").get("firmware") is None
    assert parse_metadata("<domain type='kvm'><name>x</name></domain>") == (False, "")


def test_attached_volumes_are_disks_after_the_root_disk():
    vols = (VolumeDisk("/dev/vg/v1", "vdc", serial="abc", format="raw", source_type="block"),
            VolumeDisk("/srv/ssd/v2", "vdb", serial="def"))
    root = ET.fromstring(domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, volumes=vols)))
    disks = [(d.get("type"), d.find("source").attrib, d.find("target").get("dev"), d.findtext("serial"),
              d.find("driver").get("type")) for d in root.iterfind("devices/disk")]
    assert disks == [("block", {"dev": "/dev/vg/v1"}, "vdc", "abc", "raw"),
                     ("file", {"file": "/srv/ssd/v2"}, "vdb", "def", "qcow2")]
    with pytest.raises(DriverError) as exc:
        domain_xml(DomainSpec(uuid=uuid.uuid4(), vcpus=1, memory_mib=64, volumes=(VolumeDisk("rel", "vdb"),)))
    assert exc.value.code == "invalid_disk_attachment"
