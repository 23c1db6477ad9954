"""Images in a Claude session: prompt blocks, and references in stored entries.

The CLI writes image bytes into its transcript as base64. Session storage keeps
references instead: before an entry is stored, the `data` of each Claude image
block's base64 source becomes `{"dex_image_reference": {<reference fields>}}`,
every other key staying in place, wherever the block sits (message content, a
tool result, a copy such as `toolUseResult`). An image without a known
reference, such as one an inline read tool returned, is uploaded first. When a
segment loads the transcript for the CLI, each reference is read back and the
entry restored exactly, so the replayed model input is the same on any Worker.

Only Claude image blocks, `{"type": "image", "source": {"type": "base64",
"media_type": ..., "data": ...}}`, are rewritten. Other base64, such as a PDF
document block or the shape Claude Code's Read tool keeps of an image file, is
stored as the CLI wrote it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from .._errors import SessionError
from ..session._json import JsonObject, JsonValue
from ..session._media import ImageReference
from ..stores import MediaStore

IMAGE_REFERENCE_KEY = "dex_image_reference"
"""The key that replaces an image's base64 `data` in stored entries."""


class TranscriptImages:
    """One segment's image codec over an optional media store.

    It remembers every reference it resolved or created, keyed by the base64
    text, so an image the segment sent or restored is stored under the same
    reference without another upload.
    """

    def __init__(self, store: MediaStore | None) -> None:
        self._store = store
        self._by_data: dict[str, ImageReference] = {}
        self._by_key: dict[str, str] = {}

    async def prompt_content(self, pending: Sequence[JsonObject]) -> list[JsonObject]:
        """The prompt's content blocks: each stored item's text, then its images.

        Raises:
            SessionError: An item has images and the runner has no media store
                (not retryable), or the store cannot read one (retryable).
        """
        content: list[JsonObject] = []
        for item in pending:
            text = item.get("text")
            if isinstance(text, str) and text:
                content.append({"type": "text", "text": text})
            images = item.get("images")
            if not isinstance(images, list):
                continue
            for wire in images:
                ref = _reference(wire)
                data = await self.read(ref)
                content.append(
                    {
                        "type": "image",
                        "source": {
                            "type": "base64",
                            "media_type": ref.media_type,
                            "data": data,
                        },
                    }
                )
        return content

    async def read(self, ref: ImageReference) -> str:
        """The base64 text of `ref`, read from the store once per segment.

        Raises:
            SessionError: There is no media store (not retryable), or the store
                cannot read `ref` (retryable: the RunModel attempt fails).
        """
        cached = self._by_key.get(ref.key)
        if cached is not None:
            return cached
        if self._store is None:
            raise SessionError(
                f"the session's history holds the image reference {ref.key!r}, but "
                "this runner has no media store; pass `media_store` to "
                "`ClaudeAgentDefinition`",
                retryable=False,
            )
        try:
            raw = await self._store.get_image(ref)
        except Exception as e:
            raise SessionError(
                f"the media store could not read image {ref.key!r}: {e!r}"
            ) from e
        data = base64.b64encode(raw).decode("ascii")
        self._by_key[ref.key] = data
        self._by_data[data] = ref
        return data

    async def restore(self, entries: Sequence[JsonObject]) -> list[JsonObject]:
        """`entries` with every image reference replaced by its base64 data again."""
        return [cast(JsonObject, await self._restore(entry)) for entry in entries]

    async def to_references(self, entries: Sequence[JsonObject]) -> list[JsonObject]:
        """`entries` as storage keeps them: image data replaced by references.

        Without a media store the entries stay as the CLI wrote them.

        Raises:
            SessionError: The store refused an image, or its base64 would not
                restore to the same text; the attempt fails rather than store
                bytes.
        """
        if self._store is None:
            return list(entries)
        return [cast(JsonObject, await self._reference(entry)) for entry in entries]

    async def _restore(self, value: JsonValue) -> JsonValue:
        async def restored(source: dict[str, JsonValue]) -> JsonValue | None:
            data = source.get("data")
            if isinstance(data, dict) and IMAGE_REFERENCE_KEY in data:
                ref = _reference(data[IMAGE_REFERENCE_KEY])
                return await self.read(ref)
            return None

        return await _rewrite_images(value, restored)

    async def _reference(self, value: JsonValue) -> JsonValue:
        async def referenced(source: dict[str, JsonValue]) -> JsonValue | None:
            data, media_type = source.get("data"), source.get("media_type")
            if isinstance(data, str) and isinstance(media_type, str):
                ref = await self._upload(data, media_type)
                return {IMAGE_REFERENCE_KEY: ref.to_wire()}
            return None

        return await _rewrite_images(value, referenced)

    async def _upload(self, data: str, media_type: str) -> ImageReference:
        known = self._by_data.get(data)
        if known is not None and known.media_type == media_type:
            return known
        assert self._store is not None
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as e:
            raise SessionError(
                f"an image in the transcript is not valid base64 ({e}); it is not "
                "stored as bytes"
            ) from e
        if base64.b64encode(raw).decode("ascii") != data:
            raise SessionError(
                "an image's base64 in the transcript would not restore to the same "
                "text (non-canonical padding or line breaks); it is not stored as "
                "bytes"
            )
        try:
            ref = await self._store.put_image(raw, media_type)
        except ValueError as e:
            raise SessionError(f"the media store refused an image: {e}") from e
        self._by_data[data] = ref
        self._by_key[ref.key] = data
        return ref


async def _rewrite_images(
    value: JsonValue,
    new_data: Callable[[dict[str, JsonValue]], Awaitable[JsonValue | None]],
) -> JsonValue:
    """`value` with the `data` of each image block's source replaced by `new_data`.

    Where `new_data` answers None, the block is left as it is (and searched).
    """
    if isinstance(value, list):
        return [await _rewrite_images(v, new_data) for v in value]
    if not isinstance(value, dict):
        return value
    source = _image_source(value)
    if source is not None:
        data = await new_data(source)
        if data is not None:
            return {**value, "source": {**source, "data": data}}
    return {k: await _rewrite_images(v, new_data) for k, v in value.items()}


def _image_source(block: dict[str, JsonValue]) -> dict[str, JsonValue] | None:
    """The base64 source of a Claude image block, or None for anything else."""
    if block.get("type") != "image":
        return None
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        return source
    return None


def _reference(wire: object) -> ImageReference:
    try:
        return ImageReference.from_wire(wire)
    except ValueError as e:
        raise SessionError(
            f"a stored image reference is malformed: {e}", retryable=False
        ) from e
