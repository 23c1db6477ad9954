"""The prompt of a segment: what the CLI receives on its standard input.

A new segment sends one user message with one text block per stored text that
never reached a CLI, oldest first: earlier prompts and turn-failure notes of a
failed turn, then this turn's prompt. A prompt with images adds one Claude image
block per image after its text, in reference order (see `_images`). A resumed segment sends nothing (CLI
2.1.327 resumes the pending deferral on its own; a `content: []` message would
start a second turn), but its input stays open until the result arrives (and, for a
result that ends the turn, `_EXIT_DELAY` in `_segment` longer), or the SDK could
not answer the CLI's hook and tool requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..session._json import JsonObject


def prompt_texts(pending: Sequence[JsonObject]) -> list[str]:
    """The texts of the stored items that never reached a CLI, oldest first."""
    texts: list[str] = []
    for item in pending:
        text = item.get("text")
        if isinstance(text, str) and text:
            texts.append(text)
    return texts


def user_message(texts: Sequence[str]) -> dict[str, Any]:
    """The stream-json user message carrying `texts` as text blocks."""
    if not texts:
        raise ValueError("a prompt needs at least one text; never send `content: []`")
    return content_message([{"type": "text", "text": text} for text in texts])


def content_message(content: Sequence[JsonObject]) -> dict[str, Any]:
    """The stream-json user message carrying `content` blocks (text and images)."""
    if not content:
        raise ValueError("a prompt needs at least one block; never send `content: []`")
    return {
        "type": "user",
        "session_id": "",
        "message": {
            "role": "user",
            "content": list(content),
        },
        "parent_tool_use_id": None,
    }


async def prompt_stream(
    message: dict[str, Any] | None, result_seen: asyncio.Event
) -> AsyncIterator[dict[str, Any]]:
    """Yield `message` (or nothing), then hold the CLI's input open until `result_seen`.

    The segment sets `result_seen` at an error or a deferral, and `_EXIT_DELAY`
    after a result that ends the turn.

    An iterable that ended at once would make the SDK close the CLI's input
    before the resumed call ran: CLI 2.1.327 then cannot reach the custom tool
    server and reports `tool_deferred_unavailable`.
    """
    if message is not None:
        yield message
    await result_seen.wait()
