"""References to user-sized values kept in the runtime store instead of workflow history."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

PREVIEW_CHARS = 200
"""Characters of a referenced value (a long message, a long tool output) kept as its preview."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BlobReference:
    """A user-sized value kept in the runtime store, named by its content."""

    blob_id: str
    """The store's key: `<prefix>-<sha256>`, so a retried write is the same write."""
    size: int
    """Length in bytes."""
    sha256: str
    """Hex SHA-256 of the bytes, checked when they are read back."""


def blob_reference(prefix: str, data: bytes) -> BlobReference:
    """The content-addressed reference of `data`."""
    digest = hashlib.sha256(data).hexdigest()
    return BlobReference(blob_id=f"{prefix}-{digest}", size=len(data), sha256=digest)


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` cut to `limit` characters, with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
