"""Images in stored Claude entries: references on the way in, exact bytes on the way out."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from dex_agents._errors import SessionError
from dex_agents.claude._images import IMAGE_REFERENCE_KEY, TranscriptImages
from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.stores._media import InMemoryMediaStore

PNG = b"\x89PNG\r\n\x1a\n one pixel"
JPEG = b"\xff\xd8\xff\xe0 a photo"


def image(data: bytes, media_type: str = "image/png") -> JsonObject:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": media_type,
            "data": base64.b64encode(data).decode(),
        },
    }


def entries() -> list[Any]:
    pdf = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
    }
    read_copy = {"type": "image", "file": {"base64": "aGVsbG8=", "type": "image/png"}}
    return [
        {
            "type": "user",
            "uuid": "u1",
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": "hi"}, image(PNG), pdf],
            },
        },
        {
            "type": "user",
            "uuid": "u2",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [image(JPEG, "image/jpeg")],
                    }
                ],
            },
            "toolUseResult": [image(JPEG, "image/jpeg")],
        },
        {"type": "user", "uuid": "u3", "toolUseResult": read_copy},
    ]


async def test_references_replace_only_claude_image_data_and_restore_exactly() -> None:
    media = InMemoryMediaStore()
    original = entries()
    stored: Any = await TranscriptImages(media).to_references(copy.deepcopy(original))

    text = json.dumps(stored)
    for data in (PNG, JPEG):
        assert base64.b64encode(data).decode() not in text
    assert "JVBE" in text and "aGVsbG8=" in text  # PDF and Read's own shape stay
    source = stored[0]["message"]["content"][1]["source"]
    assert list(source) == ["type", "media_type", "data"]
    ref = ImageReference.from_wire(source["data"][IMAGE_REFERENCE_KEY])
    assert await media.get_image(ref) == PNG
    copies = [
        stored[1]["message"]["content"][0]["content"][0],
        stored[1]["toolUseResult"][0],
    ]
    assert copies[0] == copies[1]

    restored = await TranscriptImages(media).restore(stored)
    assert json.dumps(restored) == json.dumps(original)


async def test_known_images_reuse_their_reference_without_an_upload() -> None:
    media = InMemoryMediaStore()
    ref = await media.put_image(PNG, "image/png")
    images = TranscriptImages(media)
    content = await images.prompt_content(
        [
            {
                "kind": "user_prompt",
                "text": "look",
                "images": [ref.to_wire(), ref.to_wire()],
            }
        ]
    )
    assert [b["type"] for b in content] == ["text", "image", "image"]
    entry: Any = {"type": "user", "message": {"content": content}}
    stored: Any = await images.to_references([entry])
    wire = stored[0]["message"]["content"][1]["source"]["data"]
    assert wire == {IMAGE_REFERENCE_KEY: ref.to_wire()}


async def test_without_a_store_entries_stay_and_references_fail_the_turn() -> None:
    images = TranscriptImages(None)
    assert await images.to_references(entries()) == entries()
    stored = await TranscriptImages(InMemoryMediaStore()).to_references(entries())
    with pytest.raises(SessionError, match="no media store") as caught:
        await images.restore(stored)
    assert not caught.value.retryable


async def test_a_store_read_failure_fails_the_attempt_for_a_retry() -> None:
    stored = await TranscriptImages(InMemoryMediaStore()).to_references(entries())
    with pytest.raises(SessionError, match="could not read") as caught:
        await TranscriptImages(InMemoryMediaStore()).restore(stored)
    assert caught.value.retryable


@pytest.mark.parametrize(
    ("block", "error"),
    [
        (image(PNG, "image/bmp"), "refused"),
        (
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": "image/png",
                    "data": "aGVsbG8\n",
                },
            },
            "base64",
        ),
        (
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "aGk"},
            },
            "base64",
        ),
    ],
)
async def test_an_image_that_cannot_be_stored_by_reference_fails(
    block: JsonObject, error: str
) -> None:
    with pytest.raises(SessionError, match=error):
        await TranscriptImages(InMemoryMediaStore()).to_references(
            [{"type": "user", "message": {"content": [block]}}]
        )
