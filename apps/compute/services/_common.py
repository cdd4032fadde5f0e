"""Helpers shared by the compute services."""
from __future__ import annotations

import re

from apps.core.errors import ValidationFailed

HOSTNAME_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
NAME_MAX = 63  # one DNS label (RFC 1035 §2.3.4): the name becomes the guest's hostname


def validate_name(name: str, *, field: str = "name") -> str:
    """A lower-case DNS label of at most 63 characters (RFC 1035 §2.3.4, RFC 1123 §2.1); 400 otherwise."""
    if not isinstance(name, str) or not name or len(name) > NAME_MAX or not HOSTNAME_LABEL.match(name):
        raise ValidationFailed(
            f"{field} must be 1-{NAME_MAX} lower-case letters, digits or '-', not starting or ending with '-'.",
            errors={field: [f"a DNS label of at most {NAME_MAX} characters"]})
    return name
