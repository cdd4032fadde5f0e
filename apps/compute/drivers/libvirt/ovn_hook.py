#!/usr/bin/env python3
"""libvirt QEMU hook that binds a VM's tenant NICs to their OVN logical switch ports.

Why: ovn-controller binds a logical switch port to the OVS interface whose `external_ids:iface-id` equals the
port's name (`gpc-p-<port id hex>`, docs/networking.md), but libvirt's `<virtualport type='openvswitch'>`
accepts only a UUID as `interfaceid` (libvirt's networkcommon.rng) and writes that UUID as iface-id. Our domain
XML therefore carries the port UUID there and the OVN name in its metadata
(`<gpucloud:interface mac=... iface-id=...>`); this hook, run by libvirtd with the live domain XML on stdin
(libvirt.org/hooks.html, "/etc/libvirt/hooks/qemu"), sets each tap's iface-id to the OVN name at `started`
and `reconnect`.

Install on each hypervisor (stdlib only, no gpucloud install needed):
    install -m 0755 ovn_hook.py /etc/libvirt/hooks/qemu      # then restart libvirtd once
It must not call libvirt's API (libvirtd waits for it); it only runs `ovs-vsctl`.
"""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET

METADATA_NS = "https://gpucloud.dev/xmlns/instance/1"   # = apps.compute.drivers.libvirt.xml.METADATA_NS
STAGES = {"started", "reconnect", "attach"}


def iface_ids(domain_xml: str) -> list[tuple[str, str]]:
    """(tap device, OVN iface-id) for each OVS interface of the live domain XML that our metadata names.
    Interfaces without a tap yet (`<target dev>` appears once QEMU runs) or without our metadata are skipped."""
    root = ET.fromstring(domain_xml)
    by_mac = {el.get("mac", "").lower(): el.get("iface-id", "")
              for el in root.iterfind(f"metadata/{{{METADATA_NS}}}instance/{{{METADATA_NS}}}interface")}
    out = []
    for iface in root.iterfind("devices/interface"):
        vport, target, mac = iface.find("virtualport"), iface.find("target"), iface.find("mac")
        if vport is None or vport.get("type") != "openvswitch" or target is None or mac is None:
            continue
        ovn = by_mac.get(mac.get("address", "").lower())
        if ovn and target.get("dev"):
            out.append((target.get("dev"), ovn))
    return out


def ovs_commands(pairs: list[tuple[str, str]]) -> list[list[str]]:
    return [["ovs-vsctl", "--timeout=10", "set", "Interface", dev, f"external_ids:iface-id={ovn}"]
            for dev, ovn in pairs]


def main(argv: list[str], stdin) -> int:
    if len(argv) < 3 or argv[2] not in STAGES:
        return 0
    for cmd in ovs_commands(iface_ids(stdin.read())):
        subprocess.run(cmd, check=True)
    return 0


if __name__ == "__main__":   # pragma: no cover - run by libvirtd
    sys.exit(main(sys.argv, sys.stdin))
