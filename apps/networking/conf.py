"""Where the fabrics are: read from Django settings, falling back to environment variables (12-factor).

- `NETWORKING_OVN_NB_DB` (env `GPUCLOUD_OVN_NB_DB`): the OVN northbound DB, e.g. `unix:/run/ovn/ovnnb_db.sock`.
  Empty: OVN reconcile is skipped.
- `NETWORKING_OVN_GATEWAY_CHASSIS` (env `GPUCLOUD_OVN_GATEWAY_CHASSIS`, default `gw-1`): the chassis that hosts
  the routers' external (NAT) ports.
- `NETWORKING_IB_FABRICS` (env `GPUCLOUD_IB_FABRICS`, JSON): per InfiniBand fabric name, its subnet manager::

      {"ib-compute": {"driver": "opensm", "partitions_path": "/etc/opensm/partitions.conf",
                      "pid_file": "/run/opensm.pid", "verify_sample": 16, "verify_timeout": 10,
                      "env": {}},
       "ib-storage": {"driver": "ufm", "url": "https://ufm.example", "username": "...", "password": "..."}}

  A fabric not listed is not reconciled.
- `NETWORKING_BAREMETAL_VLANS` (env `GPUCLOUD_BAREMETAL_VLANS`, default `100-3999`): the VLAN ids given to subnets
  that bare-metal servers join (one per subnet, the tag of its localnet ports; the switches must carry them to the
  servers' ports, ADR 1212).
"""
from __future__ import annotations

import json
import os

from django.conf import settings


def ovn_nb_db() -> str:
    return getattr(settings, "NETWORKING_OVN_NB_DB", None) or os.environ.get("GPUCLOUD_OVN_NB_DB", "")


def ovn_gateway_chassis() -> str:
    return (getattr(settings, "NETWORKING_OVN_GATEWAY_CHASSIS", None)
            or os.environ.get("GPUCLOUD_OVN_GATEWAY_CHASSIS", "gw-1"))


def ib_fabrics() -> dict[str, dict]:
    value = getattr(settings, "NETWORKING_IB_FABRICS", None)
    if value is None:
        value = json.loads(os.environ.get("GPUCLOUD_IB_FABRICS", "") or "{}")
    return dict(value)


def baremetal_vlans() -> tuple[int, int]:
    raw = getattr(settings, "NETWORKING_BAREMETAL_VLANS", None) or os.environ.get("GPUCLOUD_BAREMETAL_VLANS",
                                                                                    "100-3999")
    first, _, last = str(raw).partition("-")
    return int(first), int(last or first)
