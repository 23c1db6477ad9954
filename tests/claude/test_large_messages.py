"""Large user messages through the real bundled CLI and the scripted Messages API.

A pasted log of several megabytes must reach the model whole: the scripted
model's `dex-script: digest` answers the length and SHA-256 of the text it
received, which each test computes itself. A message the API refuses as too
large (HTTP 413) or that the CLI finds longer than the model's context window
must fail the segment at once with an error that says so.

The scripted model has no context window, but CLI 2.1.327 refuses, before any
request, a prompt it estimates longer than the model's (1M tokens for its
default model: a 3 MB log can already end with "Prompt is too long"). Tests that
need a big prompt answered tell the CLI the model's window is larger:
`CLAUDE_CODE_MAX_CONTEXT_TOKENS`, which the CLI reads only with
`DISABLE_COMPACT` set.
"""

import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from pydantic import JsonValue

from dex_agents._errors import SessionError
from dex_agents._scripted._script import TextReply, plan_reply
from dex_agents.claude import _segment
from dex_agents.claude._limits import CLI_OUTPUT_LINE_LIMIT
from dex_agents.claude._transcript import transcript_entries
from support.claude_harness import Hermetic, SessionDriver, runner_for

MB = 1_000_000
LARGE_WINDOW_ENV = {
    "DISABLE_COMPACT": "1",
    "CLAUDE_CODE_MAX_CONTEXT_TOKENS": "100000000",
}
"""Makes the CLI take the scripted model's context window for 100M tokens."""


def pasted_log(size: int) -> str:
    """A `dex-script: digest` prompt of at least `size` UTF-8 bytes, like a pasted log.

    Every line differs, and the text has what JSON and terminals treat
    specially: quotes, backslashes, tabs, CRLF, ANSI colour codes, NUL, and
    characters outside ASCII.
    """
    lines = ["dex-script: digest"]
    total = len(lines[0]) + 1
    number = 0
    while total < size:
        line = (
            f"2026-11-29T10:{number // 60 % 60:02d}:{number % 60:02d}Z\t"
            f"\x1b[3{number % 8}mINFO\x1b[0m worker-{number % 97} "
            f'request={number:08x} path="C:\\logs\\{number}.txt" '
            f"état=✓ 日本 🚀 nul=\x00 took={number % 997}ms"
        )
        line += "\r" if number % 5 == 0 else ""
        lines.append(line)
        total += len(line.encode()) + 1
        number += 1
    return "\n".join(lines)


def digest_of(text: str) -> str:
    return (
        f"digest: {len(text)} chars, sha256 {hashlib.sha256(text.encode()).hexdigest()}"
    )


def user_texts(messages: JsonValue) -> list[str]:
    """The text blocks of the user messages of a request's `messages`."""
    assert isinstance(messages, list)
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                str(b["text"])
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return texts


def request_messages(hermetic: Hermetic, index: int) -> JsonValue:
    body = hermetic.api.requests[index].body
    assert isinstance(body, dict)
    return body["messages"]


@pytest.mark.parametrize("size", [3 * MB, 20 * MB], ids=["3MB", "20MB"])
async def test_a_large_message_is_answered_whole_and_survives_the_next_turn(
    hermetic: Hermetic, size: int
) -> None:
    prompt = pasted_log(size)
    assert len(prompt.encode()) >= size
    driver = SessionDriver(
        runner_for(hermetic, env={**hermetic.env, **LARGE_WINDOW_ENV})
    )
    started = time.monotonic()

    first = await driver.turn(prompt)

    assert first.text == digest_of(prompt)
    assert len(first.segments) == 1
    # The CLI's own transcript of the turn keeps the whole message.
    entries = transcript_entries(driver.transcript.committed)
    stored: list[JsonValue] = [e.get("message") for e in entries if e["type"] == "user"]
    assert user_texts(stored) == [prompt]

    second = await driver.turn("dex-script: say after the log")

    assert second.text == "said: after the log"
    # The next segment resumed from the stored transcript: the model saw the
    # message again, unchanged.
    assert user_texts(request_messages(hermetic, -1)) == [
        prompt,
        "dex-script: say after the log",
    ]
    assert len(hermetic.api.requests) == 2
    assert hermetic.proxy.attempts == []
    assert time.monotonic() - started < 25


async def test_a_message_over_the_api_limit_fails_with_a_clear_error(
    hermetic: Hermetic,
) -> None:
    hermetic.api.max_request_bytes = 4 * 1024 * 1024
    prompt = pasted_log(5 * MB)
    driver = SessionDriver(
        runner_for(hermetic, env={**hermetic.env, **LARGE_WINDOW_ENV})
    )
    started = time.monotonic()

    with pytest.raises(SessionError) as caught:
        await driver.turn(prompt)

    assert time.monotonic() - started < 15
    message = str(caught.value)
    assert message.startswith("the message is too large for the model: ")
    assert "HTTP 413 request_too_large" in message
    assert f"{len(prompt.encode()):,} bytes" in message
    assert "Send a smaller message" in message
    assert not caught.value.retryable
    # CLI 2.1.327 does not retry a 413: one request, refused.
    [refused] = hermetic.api.too_large
    assert refused.size > 4 * 1024 * 1024
    assert hermetic.api.requests == [refused]
    assert driver.transcript.committed == []
    assert hermetic.proxy.attempts == []


async def test_a_message_over_the_model_context_window_fails_with_a_clear_error(
    hermetic: Hermetic,
) -> None:
    # About 2M tokens by any estimate, twice the default model's window.
    prompt = pasted_log(8 * MB)
    driver = SessionDriver(runner_for(hermetic))

    with pytest.raises(SessionError) as caught:
        await driver.turn(prompt)

    message = str(caught.value)
    assert message.startswith("the message is too large for the model: ")
    assert "context window (blocking_limit: Prompt is too long)" in message
    assert "Send a smaller message" in message
    assert not caught.value.retryable
    # The CLI refused it itself, before any request.
    assert hermetic.api.requests == []
    assert hermetic.proxy.attempts == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, CLI_OUTPUT_LINE_LIMIT), (8 * 1024 * 1024, 8 * 1024 * 1024)],
    ids=["adapter-default", "application-value"],
)
async def test_max_buffer_size_is_the_adapters_unless_the_options_set_it(
    hermetic: Hermetic,
    monkeypatch: pytest.MonkeyPatch,
    given: int | None,
    expected: int,
) -> None:
    seen: list[ClaudeAgentOptions] = []
    real_query = _segment.query

    def spy(*, prompt: Any, options: ClaudeAgentOptions) -> AsyncIterator[Any]:
        seen.append(options)
        return real_query(prompt=prompt, options=options)

    monkeypatch.setattr(_segment, "query", spy)
    driver = SessionDriver(runner_for(hermetic, max_buffer_size=given))

    result = await driver.turn("dex-script: digest")

    assert result.text == digest_of("dex-script: digest")
    assert [o.max_buffer_size for o in seen] == [expected]


def test_digest_hashes_every_text_block_of_the_message_that_holds_it() -> None:
    blocks: list[JsonValue] = [
        {"type": "text", "text": "earlier note\n"},
        {"type": "image", "source": {"type": "base64", "data": "AAAA"}},
        {"type": "text", "text": "dex-script: digest\n  body  "},
    ]
    messages: list[JsonValue] = [
        {"role": "user", "content": "dex-script: say old"},
        {"role": "assistant", "content": [{"type": "text", "text": "said: old"}]},
        {"role": "user", "content": blocks},
        {"role": "system", "content": "# Environment"},
    ]

    reply = plan_reply(messages).reply

    assert isinstance(reply, TextReply)
    assert reply.text == digest_of("earlier note\ndex-script: digest\n  body  ")
