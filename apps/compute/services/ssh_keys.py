"""SSH key writes (project members)."""
from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from django.db import transaction

from apps.audit.services import audit_record
from apps.core.db import atomic_with_retry, unique_conflict
from apps.core.errors import Conflict, ValidationFailed
from apps.tenancy.authz import authorize_project
from apps.tenancy.models import ProjectRole

from ..errors import Code
from ..models import Instance, SshKey
from ..states import InstanceStatus

WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
ALLOWED_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa",
                 "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com")
MAX_KEY_CHARS = 16384


def ssh_key_parse(public_key: str) -> tuple[str, str]:
    """Validate one OpenSSH public key line (``<type> <base64> [comment]``); returns (normalised key, fingerprint).

    The fingerprint is OpenSSH's default: ``SHA256:`` + unpadded base64 of SHA-256 over the key blob
    (ssh-keygen(1) -l, "FingerprintHash"). RSA keys under 2048 bits are refused (NIST SP 800-131A rev. 2).
    Raises 400 `invalid_ssh_key`.
    """
    def bad(why: str):
        return ValidationFailed(f"Invalid SSH public key: {why}.", code=Code.INVALID_SSH_KEY,
                                errors={"public_key": [why]})

    text = (public_key or "").strip()
    if not text or len(text) > MAX_KEY_CHARS or "\n" in text:
        raise bad("one OpenSSH public key line is expected")
    parts = text.split(None, 2)
    if len(parts) < 2 or parts[0] not in ALLOWED_TYPES:
        raise bad(f"the key type must be one of {', '.join(ALLOWED_TYPES)}")
    try:
        blob = base64.b64decode(parts[1], validate=True)
        if not parts[0].startswith("sk-"):
            key = load_ssh_public_key(f"{parts[0]} {parts[1]}".encode())
            if parts[0] == "ssh-rsa" and key.key_size < 2048:
                raise bad("RSA keys need at least 2048 bits")
    except ValidationFailed:
        raise
    except Exception as exc:  # binascii.Error, ValueError, UnsupportedAlgorithm
        raise bad("the key data does not decode") from exc
    name_len = int.from_bytes(blob[:4], "big") if len(blob) >= 4 else -1
    if blob[4:4 + name_len].decode(errors="replace") != parts[0]:
        raise bad("the key data does not match its type")
    fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return " ".join(parts), fingerprint


@atomic_with_retry
def ssh_key_create(*, actor, project, name: str, public_key: str) -> SshKey:
    """Add a public key to `project` (member or admin). 400 `invalid_ssh_key`; 409 `ssh_key_exists` when the
    name (`errors.name`) or the fingerprint (`errors.public_key`, naming the key that has it) is already in the
    project (also, without `errors`, when an identical create wins a race)."""
    authorize_project(actor, project, WRITERS)
    if not name or len(name) > 63:
        raise ValidationFailed("name must be 1-63 characters.", errors={"name": ["1-63 characters"]})
    key, fingerprint = ssh_key_parse(public_key)
    exists = "A key with this name or fingerprint exists in the project."
    with transaction.atomic():
        same_name = SshKey.objects.filter(project=project, name=name).first()
        if same_name is not None:
            raise Conflict(f"An SSH key named '{name}' exists in the project.", code=Code.SSH_KEY_EXISTS,
                           errors={"name": ["Another key has this name: choose another."]})
        same_key = SshKey.objects.filter(project=project, fingerprint=fingerprint).first()
        if same_key is not None:
            raise Conflict(f"This public key is already in the project, as '{same_key.name}'.",
                           code=Code.SSH_KEY_EXISTS,
                           errors={"public_key": [f"Already added as '{same_key.name}' ({fingerprint})."]})
        with unique_conflict(exists, code=Code.SSH_KEY_EXISTS):
            obj = SshKey.objects.create(project=project, name=name, public_key=key, fingerprint=fingerprint)
        audit_record(actor=actor, action="compute.ssh_key.create", target=obj,
                     after={"name": name, "fingerprint": fingerprint})
    return obj


def ssh_key_delete(*, actor, ssh_key: SshKey) -> None:
    """Remove a key. Instances keep the key they booted with (it lives in their seed); a key referenced by a live
    instance is refused with 409 `ssh_key_in_use` so the instance's record stays complete."""
    authorize_project(actor, ssh_key.project, WRITERS)
    with transaction.atomic():
        if Instance.objects.filter(ssh_keys=ssh_key).exclude(status=InstanceStatus.DELETED).exists():
            raise Conflict("The key is used by a live instance.", code=Code.SSH_KEY_IN_USE)
        audit_record(actor=actor, action="compute.ssh_key.delete", target=ssh_key, before={"name": ssh_key.name,
                                                                 "fingerprint": ssh_key.fingerprint})
        ssh_key.delete()
