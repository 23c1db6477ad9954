"""Large user messages on their way through the CLI, and a model that refuses one.

A segment's prompt reaches the CLI as one stream-json line on its standard
input, never in argv (where Linux caps one argument at 128 KiB). The CLI then
writes frames that carry the prompt back on its standard output: CLI 2.1.327
mirrors the new `user` transcript entry, with the whole prompt JSON-escaped, as
one `transcript_mirror` line (a 20,000,000-character log came back as a line of
20,190,695 characters; no frame held the prompt twice). The SDK refuses a stdout
line longer than `ClaudeAgentOptions.max_buffer_size` characters, 1 MiB by
default, so without a larger bound any prompt above about 1 MB fails the
segment with "JSON message exceeded maximum buffer size of 1048576 bytes".

A model can still refuse a message the session accepted. The Messages API
answers a body over its limit with HTTP 413 `request_too_large`; CLI 2.1.327
does not retry it and ends the turn at once with an error result
(`api_error_status` 413, `terminal_reason` "image_error", and a text about
"accumulated images" that misleads for a long text). A prompt longer than the
model's context window ends with `terminal_reason` "blocking_limit" (the CLI's
own estimate, before any request) or "prompt_too_long" (the API's answer). The
adapter turns each into a `MessageTooLargeError` that says the message is too
large for the model: not retryable (the same message would be refused again),
and the session drops the turn's messages so the next one is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from claude_agent_sdk import ResultMessage

from .._errors import MessageTooLargeError, SessionError
from ..session._pending import MAX_USER_MESSAGE_BYTES

JSON_ESCAPE_FACTOR = 6
"""Most characters one prompt character takes in a JSON line: `\\u0000` is six.

The CLI escapes control characters (other than `\\n`, `\\t` and the like, which
take two) and lone surrogates this way; every other character takes one or two.
"""

CLI_FRAME_OVERHEAD = 1024 * 1024
"""Room for the rest of the frame that carries a prompt.

The fields of the mirrored `user` entry and its frame measured about 5 KB
(CLI 2.1.327); 1 MiB leaves ample margin.
"""

CLI_OUTPUT_LINE_LIMIT = JSON_ESCAPE_FACTOR * MAX_USER_MESSAGE_BYTES + CLI_FRAME_OVERHEAD
"""The SDK's `max_buffer_size` a segment uses unless the application sets one: 193 MiB.

The SDK reads the CLI's output one JSON line at a time and fails the segment on
a line longer than `max_buffer_size` characters (default 1 MiB). The line that
mirrors a new prompt holds the whole prompt JSON-escaped, so it must fit a
`MAX_USER_MESSAGE_BYTES` message at `JSON_ESCAPE_FACTOR` characters per
character, plus `CLI_FRAME_OVERHEAD`. It is a bound, not an allocation: the SDK
holds a line only as long as the CLI's line is. A prompt with more content than
one message (the texts of a failed turn as well, or images) raises it to fit;
see `cli_output_line_limit`.
"""


def cli_output_line_limit(
    options_limit: int | None, prompt: Mapping[str, Any] | None
) -> int:
    """The `max_buffer_size` of a segment that sends `prompt` (None: resumes).

    Args:
        options_limit: `max_buffer_size` of the application's options, which
            wins when set.
        prompt: The stream-json user message the segment sends.
    """
    if options_limit is not None:
        return options_limit
    needed = JSON_ESCAPE_FACTOR * _content_chars(prompt) + CLI_FRAME_OVERHEAD
    return max(CLI_OUTPUT_LINE_LIMIT, needed)


def too_large_error(
    result: ResultMessage, prompt: Mapping[str, Any] | None
) -> SessionError | None:
    """The error for a result that says the request was too large, else None.

    Args:
        result: An error result of the CLI.
        prompt: The stream-json user message the segment sent, None on resume.
    """
    if result.api_error_status == 413:
        cause = (
            "the Messages API refused the request as too large "
            "(HTTP 413 request_too_large)"
        )
    elif result.terminal_reason in ("blocking_limit", "prompt_too_long"):
        said = (result.result or "").strip() or "Prompt is too long"
        cause = (
            f"it does not fit the model's context window ({result.terminal_reason}: "
            f"{said})"
        )
    else:
        return None
    if prompt is None:
        return SessionError(
            f"the conversation is too large for the model: {cause}. Send smaller "
            "messages or tool results, or start a new session",
            retryable=False,
        )
    size = _text_bytes(prompt)
    return MessageTooLargeError(
        f"the message is too large for the model: {cause}; the message has "
        f"{size:,} bytes of text. Send a smaller message, such as only the part "
        "of the log or file that matters"
    )


def _blocks(prompt: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if prompt is None:
        return []
    # JSON from the CLI: isinstance leaves the key and item types unknown.
    message = prompt.get("message")
    content = (
        cast(Mapping[str, Any], message).get("content")
        if isinstance(message, Mapping)
        else None
    )
    if not isinstance(content, list):
        return []
    return [
        cast(Mapping[str, Any], b)
        for b in cast(list[object], content)
        if isinstance(b, Mapping)
    ]


def _content_chars(prompt: Mapping[str, Any] | None) -> int:
    """Characters of the prompt's texts and image data."""
    total = 0
    for block in _blocks(prompt):
        text = block.get("text")
        source = block.get("source")
        data = (
            cast(Mapping[str, Any], source).get("data")
            if isinstance(source, Mapping)
            else None
        )
        if isinstance(text, str):
            total += len(text)
        elif isinstance(data, str):
            total += len(data)
    return total


def _text_bytes(prompt: Mapping[str, Any]) -> int:
    """UTF-8 bytes of the prompt's texts."""
    return sum(
        len(text.encode())
        for block in _blocks(prompt)
        if isinstance(text := block.get("text"), str)
    )
