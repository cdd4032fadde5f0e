"""cloud-init NoCloud seed images (docs.cloud-init.io, "NoCloud": a filesystem labelled `cidata` holding
`meta-data`, `user-data` and optionally `network-config`), built in memory with pycdlib.

`meta-data` carries `instance-id`, `local-hostname` and `public-keys` (the tenant's SSH keys, which cloud-init's
base datasource installs for the default user); `user-data` is the tenant's own (or an empty #cloud-config).
"""
from __future__ import annotations

import io

import pycdlib
import yaml

from apps.core.drivers import DriverError

from .base import USER_DATA_MAX_BYTES, CloudInitSeed

VOLUME_LABEL = "cidata"


def seed_files(seed: CloudInitSeed) -> dict[str, bytes]:
    """The seed's files by name. Raises `DriverError` (code `user_data_too_large`) past the size limit."""
    user_data = (seed.user_data or "#cloud-config\n{}\n").encode()
    if len(user_data) > USER_DATA_MAX_BYTES:
        raise DriverError(f"user data is {len(user_data)} bytes; the limit is {USER_DATA_MAX_BYTES}",
                          code="user_data_too_large")
    meta = {"instance-id": seed.instance_id, "local-hostname": seed.hostname}
    if seed.ssh_authorized_keys:
        meta["public-keys"] = list(seed.ssh_authorized_keys)
    files = {"meta-data": yaml.safe_dump(meta, sort_keys=True).encode(), "user-data": user_data}
    if seed.network_config:
        files["network-config"] = seed.network_config.encode()
    return files


def seed_iso(seed: CloudInitSeed) -> bytes:
    """An ISO 9660 image (Joliet + Rock Ridge names, volume id `cidata`) with the seed's files."""
    iso = pycdlib.PyCdlib()
    iso.new(interchange_level=3, joliet=3, rock_ridge="1.09", vol_ident=VOLUME_LABEL)
    try:
        for i, (name, data) in enumerate(sorted(seed_files(seed).items())):
            iso.add_fp(io.BytesIO(data), len(data), f"/F{i}.;1", rr_name=name, joliet_path=f"/{name}")
        out = io.BytesIO()
        iso.write_fp(out)
        return out.getvalue()
    finally:
        iso.close()


def read_seed_iso(data: bytes) -> dict[str, bytes]:
    """Read a seed image back (for tests and for operators debugging a seed): file name → bytes."""
    iso = pycdlib.PyCdlib()
    iso.open_fp(io.BytesIO(data))
    try:
        out = {}
        for child in iso.list_children(rr_path="/"):
            raw = child.rock_ridge.name() if child.rock_ridge else b""
            name = raw.decode() if isinstance(raw, bytes) else raw
            if not name or name in (".", ".."):
                continue
            buf = io.BytesIO()
            iso.get_file_from_iso_fp(buf, rr_path=f"/{name}")
            out[name] = buf.getvalue()
        return out
    finally:
        iso.close()
