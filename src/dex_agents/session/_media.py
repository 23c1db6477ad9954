"""Image references: how a session names image bytes that live in a media store.

Images never enter workflow history or the transcript as bytes: a client
uploads them to the media store and sends references, and runners store
references where a framework would keep base64. A reference is content
addressed, so the same bytes always get the same `key`, and a reader can check
what it got back against `sha256` and `size`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._json import JsonObject

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""The media types a Claude image block accepts, and so the ones a store keeps."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageReference:
    """One stored image, by content.

    Its fields are the wire form (`to_wire`), which stored items and transcript
    entries keep; two references are equal when they name the same bytes.
    """

    media_type: str
    """An `IMAGE_MEDIA_TYPES` value, such as `image/png`."""
    key: str
    """Where the store keeps the bytes, relative to the store (`<sha256>.png`)."""
    sha256: str
    """Hex SHA-256 of the bytes."""
    size: int
    """Length of the bytes."""

    def to_wire(self) -> JsonObject:
        """The reference as stored JSON: exactly the four fields."""
        return {
            "media_type": self.media_type,
            "key": self.key,
            "sha256": self.sha256,
            "size": self.size,
        }

    @classmethod
    def from_wire(cls, value: Any) -> ImageReference:
        """Parse `to_wire`'s output.

        Raises:
            ValueError: `value` is not a reference's wire form.
        """
        if not isinstance(value, dict):
            raise ValueError(f"an image reference must be an object, got {value!r}")
        fields: dict[str, Any] = dict(value)  # pyright: ignore[reportUnknownArgumentType]
        match fields:
            case {
                "media_type": str(media_type),
                "key": str(key),
                "sha256": str(sha256),
                "size": int(size),
            } if not isinstance(size, bool):
                return cls(media_type=media_type, key=key, sha256=sha256, size=size)
            case _:
                raise ValueError(
                    "an image reference needs `media_type`, `key`, `sha256` (strings) "
                    f"and `size` (an integer), got {value!r}"
                )
