"""Helpers shared by the storage services."""
from __future__ import annotations

import re

from apps.core.errors import ValidationFailed
from apps.tenancy.models import ProjectRole

WRITERS = (ProjectRole.ADMIN, ProjectRole.MEMBER)
VOLUME_TARGET, SNAPSHOT_TARGET = "storage.volume", "storage.snapshot"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def validate_name(name: str, *, field: str = "name") -> str:
    """1-63 letters, digits, '.', '_' or '-', starting with a letter or digit (our rule); 400 otherwise."""
    if not isinstance(name, str) or not NAME.match(name):
        raise ValidationFailed(f"{field} must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or "
                               "digit.", errors={field: ["1-63 of [A-Za-z0-9._-], starting with a letter or digit"]})
    return name
