"""Keys of the bare-metal app: BMC credentials encrypted at rest (Fernet, `cryptography`) and the deployment's
Ed25519 key that signs exit receipts. Key material comes from settings (`conf`); without it, keys are derived
from `SECRET_KEY` with HKDF-SHA256 (one label per purpose), which suits development only."""
from __future__ import annotations

import base64
import hashlib
import json

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from .. import conf


def _derived(label: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"gpucloud baremetal " + label).derive(
        settings.SECRET_KEY.encode())


def _fernet() -> MultiFernet:
    keys = conf.credentials_keys() or [base64.urlsafe_b64encode(_derived(b"bmc credentials")).decode()]
    return MultiFernet([Fernet(k) for k in keys])


def credentials_encrypt(credentials: dict) -> str:
    """The Fernet token (text) of `credentials` (a JSON object: username, password)."""
    return _fernet().encrypt(json.dumps(credentials, sort_keys=True).encode()).decode()


def credentials_decrypt(token: str) -> dict:
    """The credentials of a token from `credentials_encrypt`; {} for an empty token. Raises `InvalidToken` when no
    configured key opens it (a key removed before its tokens were re-encrypted)."""
    if not token:
        return {}
    return json.loads(_fernet().decrypt(token.encode()))


def signing_key() -> Ed25519PrivateKey:
    seed = conf.receipt_signing_key()
    raw = base64.urlsafe_b64decode(seed + "=" * (-len(seed) % 4)) if seed else _derived(b"exit receipts")
    return Ed25519PrivateKey.from_private_bytes(raw)


def public_key_raw(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """The first 16 hex digits of SHA-256 over the raw 32-byte public key."""
    return hashlib.sha256(public_key_raw(key)).hexdigest()[:16]


def public_key_info() -> dict:
    """What `GET /bare-metal/receipt-key/` publishes: ``algorithm`` "Ed25519", ``key_id``, ``public_key``
    (urlsafe base64 of the raw 32 bytes) and ``public_key_pem`` (SubjectPublicKeyInfo, for `openssl`)."""
    pub = signing_key().public_key()
    pem = pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return {"algorithm": "Ed25519", "key_id": key_id(pub),
            "public_key": base64.urlsafe_b64encode(public_key_raw(pub)).decode(), "public_key_pem": pem}


def sign(payload: str) -> str:
    """The Ed25519 signature of `payload`'s UTF-8 bytes, standard base64."""
    return base64.b64encode(signing_key().sign(payload.encode())).decode()


__all__ = ["InvalidToken", "credentials_decrypt", "credentials_encrypt", "key_id", "public_key_info", "sign",
           "signing_key"]
