import asyncio

import pytest

from dex_agents.claude._prompt import prompt_stream, prompt_texts, user_message
from dex_agents.session._runner import turn_failure_note


def test_every_unreached_text_becomes_a_block() -> None:
    note = turn_failure_note("turn-1", "boom", [])
    pending = [
        {"kind": "user_prompt", "text": "first"},
        note,
        {"kind": "user_prompt", "text": "now"},
    ]
    texts = prompt_texts(pending)
    assert texts == ["first", note["text"], "now"]
    message = user_message(texts)
    assert message["message"]["content"] == [{"type": "text", "text": t} for t in texts]
    assert message["type"] == "user" and message["parent_tool_use_id"] is None


def test_never_an_empty_prompt() -> None:
    assert prompt_texts([{"kind": "user_prompt", "text": ""}, {"kind": "other"}]) == []
    with pytest.raises(ValueError, match="content: \\[\\]"):
        user_message([])


async def test_the_stream_stays_open_until_the_result() -> None:
    seen = asyncio.Event()
    stream = prompt_stream({"type": "user"}, seen)
    assert await anext(stream) == {"type": "user"}
    waiting = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    seen.set()
    with pytest.raises(StopAsyncIteration):
        await waiting


async def test_a_resumed_segment_sends_nothing() -> None:
    seen = asyncio.Event()
    seen.set()
    assert [m async for m in prompt_stream(None, seen)] == []
