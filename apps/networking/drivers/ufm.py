"""NVIDIA UFM adapter: the same partitions, pushed through UFM Enterprise's REST API for P_Keys.

Endpoints used (NVIDIA UFM Enterprise REST API Guide, "PKey GUIDs REST API", resources API that replaced the
deprecated /ufmRest/actions/ calls):

- `GET  /ufmRest/resources/pkeys?guids_data=true&qos_conf=true` — every P_Key: `{"0x12": {"partition": name,
  "ip_over_ib": bool, "qos_conf": {"mtu_limit", "service_level", "rate_limit"}, "guids": [{"guid",
  "membership", "index0"}]}}`
- `POST /ufmRest/resources/pkeys/add` — create a P_Key without GUIDs: `{"pkey": "0x12", "partition_name",
  "index0", "ip_over_ib", "mtu_limit", "service_level", "rate_limit"}`
- `POST /ufmRest/resources/pkeys` — add GUIDs (or change their membership): `{"pkey", "guids": [...],
  "memberships": [...] (same length as guids), "index0", "ip_over_ib"}`; a P_Key is a hex string in
  (0x0, 0x7fff) exclusive; a GUID a hex string of 16-20 characters.
- `DELETE /ufmRest/resources/pkeys/<pkey>/guids/<guid>,<guid>` — remove GUIDs.
- `DELETE /ufmRest/resources/pkeys/<pkey>` — delete a P_Key.

Ownership: partitions we create are named `gpc-...` (`partition_name`); only P_Keys with that prefix are deleted
when the database no longer has them. Authentication: HTTP basic (UFM's default for /ufmRest).
"""
from __future__ import annotations

from collections.abc import Sequence

import requests

from apps.core.drivers import DriverConflict, DriverError, DriverTransientError

from .base import IbApplyResult, PartitionSpec

OWNED_PREFIX = "gpc-"
# IBTA codes → UFM's units: UFM takes mtu_limit as the IBTA MTU code too (2 = 512 ... 5 = 4096, 4 = 2048 by
# default) and rate_limit in Gb/s (2.5, 10, ...).
RATE_BY_CODE = {3: 10, 4: 30, 5: 5, 6: 20, 7: 40, 8: 60, 9: 80, 10: 120, 11: 14, 12: 56, 13: 112, 14: 168, 15: 25,
                16: 100, 17: 200, 18: 300, 19: 28, 20: 50, 21: 400, 22: 600}


def _hex(pkey: int) -> str:
    return f"0x{pkey:x}"


def _guid(text: str) -> str:
    """UFM lists GUIDs as 16 hex digits without 0x; we use `0x` + 16 lowercase digits."""
    raw = text.lower()
    return raw if raw.startswith("0x") else "0x" + raw.rjust(16, "0")


class UfmDriver:
    def __init__(self, *, base_url: str, username: str = "", password: str = "", verify_tls: bool = True,
                 timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        if username:
            self.session.auth = (username, password)
        self.session.verify = verify_tls
        self.timeout = timeout
        self.requests_made = 0

    def _call(self, method: str, path: str, body: dict | None = None):
        try:
            response = self.session.request(method, self.base_url + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise DriverTransientError(f"UFM unreachable: {exc}")
        if method != "GET":
            self.requests_made += 1
        if response.status_code >= 500:
            raise DriverTransientError(f"UFM {method} {path}: {response.status_code} {response.text[:200]}")
        if response.status_code == 409:
            raise DriverConflict(f"UFM {method} {path}: {response.text[:200]}")
        if response.status_code >= 400:
            raise DriverError(f"UFM {method} {path}: {response.status_code} {response.text[:200]}",
                              code="ufm_rejected")
        return response.json() if response.content else None

    def list_pkeys(self) -> dict[int, dict]:
        data = self._call("GET", "/ufmRest/resources/pkeys?guids_data=true&qos_conf=true") or {}
        return {int(key, 16) & 0x7FFF: value for key, value in data.items()}

    def apply(self, partitions: Sequence[PartitionSpec], *, expect_file: bool = False) -> IbApplyResult:
        """Make UFM hold exactly these partitions (of ours); `writes` counts mutating requests (0 when UFM
        already matches). `expect_file` has no meaning for UFM (no file) and is ignored."""
        before = self.requests_made
        current = self.list_pkeys()
        wanted = {p.pkey: p for p in partitions}
        for key, value in sorted(current.items()):
            if key not in wanted and str(value.get("partition", "")).startswith(OWNED_PREFIX):
                self._call("DELETE", f"/ufmRest/resources/pkeys/{_hex(key)}")
        for key, spec in sorted(wanted.items()):
            self._apply_one(spec, current.get(key))
        writes = self.requests_made - before
        return IbApplyResult(changed=writes > 0, writes=writes)

    def _apply_one(self, spec: PartitionSpec, have: dict | None) -> None:
        if have is None:
            body = {"pkey": _hex(spec.pkey), "partition_name": OWNED_PREFIX + spec.name, "index0": spec.index0,
                    "ip_over_ib": spec.ipoib}
            if spec.mtu_code is not None:
                body["mtu_limit"] = spec.mtu_code
            if spec.sl is not None:
                body["service_level"] = spec.sl
            if spec.rate_code is not None:
                body["rate_limit"] = RATE_BY_CODE[spec.rate_code]
            self._call("POST", "/ufmRest/resources/pkeys/add", body)
            have = {"guids": []}
        current = {_guid(g["guid"]): g.get("membership", "full") for g in have.get("guids", [])}
        wanted = {m.guid: m.membership for m in spec.members}
        stale = sorted(set(current) - set(wanted))
        if stale:
            self._call("DELETE", f"/ufmRest/resources/pkeys/{_hex(spec.pkey)}/guids/"
                       + ",".join(g[2:] for g in stale))
        changed = sorted(g for g, m in wanted.items() if current.get(g) != m)
        if changed:
            self._call("POST", "/ufmRest/resources/pkeys", {
                "pkey": _hex(spec.pkey), "guids": [g[2:] for g in changed],
                "memberships": [wanted[g] for g in changed], "index0": spec.index0, "ip_over_ib": spec.ipoib})
