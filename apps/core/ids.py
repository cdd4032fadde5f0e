"""UUIDv7 identifiers (RFC 9562): time-ordered, so B-tree inserts stay local and cursors sort by creation."""
import uuid

import uuid6


def uuid7() -> uuid.UUID:
    """A new UUIDv7 as a standard `uuid.UUID`."""
    return uuid.UUID(int=uuid6.uuid7().int)
