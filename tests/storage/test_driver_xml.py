"""The storage driver's XML: pools, volumes and the `<disk>` element a volume is attached with (pure functions)."""
from __future__ import annotations

import uuid

import pytest

from apps.core.drivers import DriverError
from apps.storage.drivers.base import DiskAttachment, PoolSpec, VolumeSpec, disk_serial
from apps.storage.drivers.libvirt import xml as stxml

PATH = "/var/lib/gpucloud/pools/local/0192f6c1-7d2e-7000-8000-00000000abcd"


def test_disk_xml_for_a_virtio_volume():
    att = DiskAttachment(volume_path=PATH, target_dev="vdb", serial="0192f6c17d2e70008000")
    assert stxml.disk_xml(att) == (
        "<disk type=\"file\" device=\"disk\">"
        "<driver name=\"qemu\" type=\"qcow2\" cache=\"none\" discard=\"unmap\" io=\"native\" />"
        f"<source file=\"{PATH}\" />"
        "<target dev=\"vdb\" bus=\"virtio\" />"
        "<serial>0192f6c17d2e70008000</serial>"
        "</disk>")


def test_disk_xml_for_a_read_only_scsi_logical_volume():
    att = DiskAttachment(volume_path="/dev/gpc-nvme/v1", target_dev="sdc", bus="scsi", read_only=True,
                         format="raw")
    assert stxml.disk_xml(att, source_type="block", cache="writeback") == (
        "<disk type=\"block\" device=\"disk\">"
        "<driver name=\"qemu\" type=\"raw\" cache=\"writeback\" discard=\"unmap\" />"
        "<source dev=\"/dev/gpc-nvme/v1\" />"
        "<target dev=\"sdc\" bus=\"scsi\" />"
        "<readonly />"
        "</disk>")


def test_parse_disks_reads_back_what_disk_xml_wrote_and_skips_cdroms():
    att = DiskAttachment(volume_path=PATH, target_dev="vdb", serial="abc", read_only=True, format="qcow2")
    domain = ("<domain><devices><disk type='file' device='cdrom'><source file='/seed.iso'/>"
              "<target dev='sda' bus='sata'/></disk>" + stxml.disk_xml(att) + "</devices></domain>")
    assert stxml.parse_disks(domain) == [att]


@pytest.mark.parametrize("att", [
    DiskAttachment(PATH, "sdb"),  # virtio needs vdX
    DiskAttachment(PATH, "vdb", bus="scsi"),  # scsi needs sdX
    DiskAttachment(PATH, "vdb", bus="ide"),
    DiskAttachment("relative/path", "vdb"),
    DiskAttachment(PATH, "vdb", serial="x" * 21),  # virtio-blk keeps 20 bytes
    DiskAttachment(PATH, "vdb", serial="a<b"),
])
def test_invalid_attachments_are_refused(att):
    with pytest.raises(DriverError) as exc:
        stxml.disk_xml(att)
    assert exc.value.code == "invalid_disk_attachment"


def test_disk_serial_is_the_uuid_hex_cut_to_20():
    assert disk_serial(uuid.UUID("0192f6c1-7d2e-7000-8000-00000000abcd")) == "0192f6c17d2e70008000"


def test_pool_xml_for_each_kind():
    assert stxml.pool_xml(PoolSpec("local", "dir", "/var/lib/gpucloud/pools/local")) == (
        "<pool type=\"dir\"><name>local</name><target><path>/var/lib/gpucloud/pools/local</path></target></pool>")
    assert stxml.pool_xml(PoolSpec("lvm", "logical", "/dev/gpc-nvme", source="gpc-nvme")) == (
        "<pool type=\"logical\"><name>lvm</name><source><name>gpc-nvme</name><format type=\"lvm2\" /></source>"
        "<target><path>/dev/gpc-nvme</path></target></pool>")
    assert stxml.pool_xml(PoolSpec("shared", "netfs", "/mnt/shared", source="nfs-1.example:/export/vols")) == (
        "<pool type=\"netfs\"><name>shared</name><source><host name=\"nfs-1.example\" />"
        "<dir path=\"/export/vols\" /><format type=\"nfs\" /></source>"
        "<target><path>/mnt/shared</path></target></pool>")
    assert stxml.parse_pool(stxml.pool_xml(PoolSpec("local", "dir", "/srv/p/"))) == ("dir", "/srv/p")


@pytest.mark.parametrize("spec", [
    PoolSpec("p", "zfs", "/tank"), PoolSpec("p", "dir", "relative"), PoolSpec("p", "logical", "/dev/vg"),
    PoolSpec("p", "netfs", "/mnt/x", source="no-export-path"),
])
def test_invalid_pools_are_refused(spec):
    with pytest.raises(DriverError) as exc:
        stxml.pool_xml(spec)
    assert exc.value.code == "invalid_pool_spec"


def test_volume_xml_with_a_backing_image():
    spec = VolumeSpec(key="v1", pool="local", size_gib=20, backing="/images/ubuntu.qcow2")
    assert stxml.volume_xml(spec, backing_format="qcow2") == (
        "<volume><name>v1</name><capacity unit=\"bytes\">21474836480</capacity>"
        "<target><format type=\"qcow2\" /></target>"
        "<backingStore><path>/images/ubuntu.qcow2</path><format type=\"qcow2\" /></backingStore></volume>")
    assert stxml.parse_volume_format(stxml.volume_xml(VolumeSpec("v2", "local", 1, format="raw"))) == "raw"
    assert stxml.parse_volume_format("<volume><target/></volume>") == "raw"  # LVM reports no format
