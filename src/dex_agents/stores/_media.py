"""The media store contract, and its directory and in-memory implementations.

Clients upload images to the media store and send sessions references
(`ImageReference`); runners read the bytes back when a model needs them. The
store is content addressed: `put_image` of the same bytes and media type
returns the same reference every time, so an upload that a crashed attempt
repeats costs nothing and stored references never go stale.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path
from typing import Protocol

from .._errors import InvalidArgumentError
from ..session._media import IMAGE_MEDIA_TYPES, ImageReference

_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}


class MediaStore(Protocol):
    """Image bytes by content-addressed reference.

    The contract, which `run_media_store_conformance` checks:

    - `put_image` accepts non-empty bytes of an `IMAGE_MEDIA_TYPES` type and
      raises `ValueError` for anything else; a refused image is never stored.
    - Equal bytes and media type give an equal reference (the key is derived
      from the content), so repeating a put is a no-op.
    - `get_image` returns exactly the bytes that were put, and raises
      `KeyError` for a reference the store does not hold, or whose bytes no
      longer match its `sha256` and `size`.
    """

    async def put_image(self, data: bytes, media_type: str) -> ImageReference:
        """Store `data` and return its reference."""
        ...

    async def get_image(self, ref: ImageReference) -> bytes:
        """The bytes of `ref`."""
        ...


def image_reference(data: bytes, media_type: str) -> ImageReference:
    """The reference every store gives `data`, after checking it is storable.

    Raises:
        InvalidArgumentError: (a `ValueError`) `data` is empty or `media_type` is not an image type a
            model accepts.
    """
    if media_type not in IMAGE_MEDIA_TYPES:
        raise InvalidArgumentError(
            "media_type",
            f"media type {media_type!r} is not a supported image type; use one of "
            f"{sorted(IMAGE_MEDIA_TYPES)}",
        )
    if not data:
        raise InvalidArgumentError("data", "an image needs at least one byte")
    digest = hashlib.sha256(data).hexdigest()
    return ImageReference(
        media_type=media_type,
        key=f"{digest}{_EXTENSIONS[media_type]}",
        sha256=digest,
        size=len(data),
    )


def check_image(ref: ImageReference, data: bytes) -> bytes:
    """`data` if it is what `ref` names.

    Raises:
        KeyError: the bytes differ from `ref`'s size or digest, so the store does
            not hold `ref` any more.
    """
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise KeyError(f"the media store holds other bytes under {ref.key!r}")
    return data


def check_key(ref: ImageReference) -> str:
    """`ref.key` if it is the key this library derives, so it is safe as a path.

    Raises:
        KeyError: the key is not `<sha256><extension>`; no store holds it.
    """
    expected = f"{ref.sha256}{_EXTENSIONS.get(ref.media_type, '')}"
    if ref.key != expected or len(ref.sha256) != 64:
        raise KeyError(f"no image is stored under {ref.key!r}")
    return ref.key


class InMemoryMediaStore:
    """A `MediaStore` in a dict, for tests and single-process demos."""

    def __init__(self) -> None:
        self._images: dict[str, bytes] = {}

    async def put_image(self, data: bytes, media_type: str) -> ImageReference:
        """Store `data` and return its reference; see `MediaStore`."""
        ref = image_reference(data, media_type)
        self._images[ref.key] = bytes(data)
        return ref

    async def get_image(self, ref: ImageReference) -> bytes:
        """The bytes of `ref`; see `MediaStore`."""
        data = self._images.get(ref.key)
        if data is None:
            raise KeyError(f"no image is stored under {ref.key!r}")
        return check_image(ref, data)


class DirectoryMediaStore:
    """A `MediaStore` of files in one directory: the local default.

    Each image is the file `<sha256><extension>`, written to a temporary name
    and renamed into place, so a reader on another process never sees half an
    image.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    async def put_image(self, data: bytes, media_type: str) -> ImageReference:
        """Store `data` and return its reference; see `MediaStore`."""
        ref = image_reference(data, media_type)
        await asyncio.to_thread(self._write, ref.key, bytes(data))
        return ref

    async def get_image(self, ref: ImageReference) -> bytes:
        """The bytes of `ref`; see `MediaStore`."""
        path = self.path / check_key(ref)
        try:
            data = await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise KeyError(f"no image is stored under {ref.key!r}") from None
        return check_image(ref, data)

    def _write(self, key: str, data: bytes) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        target = self.path / key
        if target.exists() and target.stat().st_size == len(data):
            return
        temporary = self.path / f".{key}.{uuid.uuid4().hex}.tmp"
        temporary.write_bytes(data)
        temporary.replace(target)
