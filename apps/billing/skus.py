"""SKU keys: strings, so any resource can add its own.

`sku_for(kind, **attributes)` gives the canonical key ``kind:attr=value,...`` with attributes sorted by name and
values normalised to text: the integer 8, the string "8", Decimal("8") and the float 8.0 all give "8". A price
stored for a SKU built from string metadata therefore matches usage built from numeric metadata (RW-058: numeric
metadata never matched string-stored mappings in CloudKitty, so usage was priced at zero).

Kinds in use: `flavor` (name), `gpu` (model, gpu_count), `mig` (model, profile), `vgpu` (type), `share`
(model, share_milli), `public_ip`, `lease` (model, unit), `volume` (type: a volume type's name; units = GiB).
Examples: ``gpu:gpu_count=8,model=H100-SXM5-80GB``,
``mig:model=H100-SXM5-80GB,profile=3g.40gb``, ``public_ip``.
"""
from __future__ import annotations

import re
from decimal import Decimal

from apps.core.errors import ValidationFailed

from .errors import Code

_KIND = re.compile(r"^[a-z][a-z0-9_]*$")
_VALUE = re.compile(r"^[A-Za-z0-9._\-]+$")


def _text(value) -> str:
    if isinstance(value, bool) or value is None:
        raise ValidationFailed(f"SKU attribute value {value!r} is not allowed.", code=Code.INVALID_SKU)
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        text = format(value.normalize(), "f")
        return text
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return format(Decimal(text).normalize(), "f")
    return text


def sku_for(kind: str, **attributes) -> str:
    """Canonical SKU key; 400 `invalid_sku` for a bad kind or value."""
    if not _KIND.match(kind):
        raise ValidationFailed(f"SKU kind {kind!r} is invalid.", code=Code.INVALID_SKU)
    parts = []
    for name in sorted(attributes):
        text = _text(attributes[name])
        if not _KIND.match(name) or not _VALUE.match(text):
            raise ValidationFailed(f"SKU attribute {name}={text!r} is invalid.", code=Code.INVALID_SKU)
        parts.append(f"{name}={text}")
    return f"{kind}:{','.join(parts)}" if parts else kind


def sku_normalize(sku: str) -> str:
    """Re-canonicalise a SKU written by hand (`gpu:model=H100,gpu_count=08` → `gpu:gpu_count=8,model=H100`)."""
    kind, _, rest = (sku or "").strip().partition(":")
    attributes = {}
    for part in filter(None, rest.split(",")):
        name, sep, value = part.partition("=")
        if not sep:
            raise ValidationFailed(f"SKU part {part!r} is not name=value.", code=Code.INVALID_SKU)
        if name.strip() in attributes:
            raise ValidationFailed(f"SKU attribute {name.strip()!r} is given twice.", code=Code.INVALID_SKU)
        attributes[name.strip()] = value.strip()
    return sku_for(kind, **attributes)
