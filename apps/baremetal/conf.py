"""Bare-metal settings (read at call time, so tests may override them).

- `BAREMETAL_CREDENTIALS_KEYS`: Fernet keys (urlsafe base64 of 32 bytes), comma-separated, newest first; the
  first encrypts, all decrypt (rotation). Default: one key derived from `SECRET_KEY` (HKDF-SHA256).
- `BAREMETAL_RECEIPT_SIGNING_KEY`: the deployment's Ed25519 private key, urlsafe base64 of its 32-byte seed.
  Default: derived from `SECRET_KEY` (HKDF-SHA256), so a development install signs without setup; production sets
  its own and publishes its public key.
- `BAREMETAL_DEPLOY_POLL_S` (default 2.0): seconds between reads of a deploying/cleaning node.
- `BAREMETAL_IRONIC_ENDPOINT` (default http://127.0.0.1:6385): the Ironic API the `ironic` driver talks to.
- `BAREMETAL_FABRIC_VERIFY_S` (default 600): how long a delete waits for the subnet manager to apply the removal
  of the host's GUIDs from the tenant's InfiniBand partitions before it records a failure and holds the node.
- `BAREMETAL_DISK_IMAGES` (default {}): {host name: path} of the disk images of VM-backed nodes (QEMU VMs behind a
  Redfish emulator such as sushy-tools): the delete's erase read-back reads sample blocks of them back.
- `BAREMETAL_GPU_CHECK_S` (default 1800): how long a delete waits for the node agent's GPU reset and validation
  before it records them as unverified and holds the node.
- `BAREMETAL_CLEAN_TIMEOUT_S` (default 21600, six hours): how long the host's cleaning after a tenant's delete may
  run (from the undeploy) before it is given up on: the node is held (its host stays in maintenance, staff see the
  reason) and the receipt says cleaning did not finish. A secure erase or a multi-pass shred of several NVMe drives
  takes hours; the tenant's delete does not wait for it (docs/adr/1215).
- `BAREMETAL_DEMO_ENROLL` (default false; `make run` sets it unless IRONIC=0): `manage.py demo_load` enrolls the
  demo bare-metal hosts into that Ironic (without it they are imported and left `enrolling`).
"""
from django.conf import settings


def credentials_keys() -> list[str]:
    raw = getattr(settings, "BAREMETAL_CREDENTIALS_KEYS", "") or ""
    return [k.strip() for k in raw.split(",") if k.strip()]


def receipt_signing_key() -> str:
    return getattr(settings, "BAREMETAL_RECEIPT_SIGNING_KEY", "") or ""


def deploy_poll_s() -> float:
    return float(getattr(settings, "BAREMETAL_DEPLOY_POLL_S", 2.0))


def ironic_endpoint() -> str:
    return getattr(settings, "BAREMETAL_IRONIC_ENDPOINT", "") or "http://127.0.0.1:6385"


def demo_enroll() -> bool:
    return bool(getattr(settings, "BAREMETAL_DEMO_ENROLL", False))


def fabric_verify_s() -> float:
    return float(getattr(settings, "BAREMETAL_FABRIC_VERIFY_S", 600.0))


def disk_images() -> dict[str, str]:
    return dict(getattr(settings, "BAREMETAL_DISK_IMAGES", None) or {})


def gpu_check_s() -> float:
    return float(getattr(settings, "BAREMETAL_GPU_CHECK_S", 1800.0))


def clean_timeout_s() -> float:
    return float(getattr(settings, "BAREMETAL_CLEAN_TIMEOUT_S", 21600.0))
