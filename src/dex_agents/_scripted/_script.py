"""The scripted model: a tiny command language that tests write into prompts.

A test drives the model by ending a prompt with `dex-script: <command>`. The mock
Messages API (and the fake CLI that will share this module) reads the command of
the turn's prompt (in the last user message of a person, not one the CLI added)
and answers deterministically:

```
say <text>                      -> text "said: <text>"
recall                          -> text listing every earlier dex-script prompt
digest                          -> text "digest: <n> chars, sha256 <hex>" of the
                                   prompt (Messages API mock only; see `Digest`)
call <tool> <json> [&& call ...] -> one reply with one tool_use block per call
stall <gate>                    -> (fake CLI only)
fail                            -> (fake CLI only)
<command> ;; pause <gate>       -> wait at <gate> before the turn's final answer
<command> ;; fail               -> (fake CLI only)
<command> ;; reuse <tool> <json> -> (fake CLI only)
```

While tool results are pending (the last user message holds `tool_result`
blocks) the model summarizes the turn's results as `done: <r1>; <r2>`, except
that a result saying the call "did not run ... Call again by itself." makes it
call that tool again, alone: that is how the adapter asks for one write per
segment.

A prompt without a command (a person's "thanks!") is not scripted: `plan_reply`
raises `ScriptError` rather than reaching back to an earlier turn's command and
calling its tools again. The CLI's own additions never count as the prompt and
are never quoted back: its `<system-reminder>` blocks (in prompts and inside tool
results) and the "Continue from where you left off." it sends after a resumed
call. Everything here is pure so both doubles answer alike.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

MARKER = "dex-script: "
"""What precedes a command in a prompt's text block."""

_REFUSAL_START = "did not run"
_REFUSAL_END = "Call again by itself."
_CONTINUE_TEXT = "Continue from where you left off."
"""The prompt CLI 2.1.327 sends after a resumed call; the turn's prompt is earlier."""
_SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)


def without_system_reminders(text: str) -> str:
    """`text` without the `<system-reminder>` blocks the Claude Code CLI adds.

    The CLI appends them to prompts and tool results on their way to the model
    (the environment, the date, tokens left); a model that quoted them would
    show the CLI's notes to a person as its own words.
    """
    return _SYSTEM_REMINDER.sub("", text)


class ScriptError(ValueError):
    """A prompt's script cannot be parsed or answered; fix the test's prompt."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallSpec:
    """One tool call the model makes: the tool's name and its input."""

    name: str
    input: dict[str, JsonValue]


@dataclass(frozen=True, kw_only=True, slots=True)
class Say:
    """Answer `said: <text>`."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Recall:
    """Answer with every earlier prompt of the session, proving history survived."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Digest:
    """Answer with the length and SHA-256 of the prompt's text (Messages API mock only).

    The answer is `digest: <n> chars, sha256 <hex>` where the text is the
    concatenation, with no separator, of the `text` of every text block of the
    user message that holds the command, exactly as the request carried it
    (command line included, nothing stripped); `<n>` is its length in
    characters (`len` of the Python string) and `<hex>` the hex SHA-256 of its
    UTF-8 encoding (a lone surrogate, which JSON can carry, is encoded with
    `surrogatepass`). A prompt sent as one text block `text` gives
    `len(text)` and `hashlib.sha256(text.encode()).hexdigest()`, so a test
    proves a large message reached the model whole and unchanged.

    It takes no modifiers. `parse_script`, which the fake CLI shares, does not
    know it (and refuses it as unknown): `parse_digest` does.
    """


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """Call every tool in `calls` in one assistant reply."""

    calls: tuple[ToolCallSpec, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Stall:
    """Call lookup, stream text, then wait at `gate` (fake CLI only)."""

    gate: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Fail:
    """End the turn with an error result (fake CLI only)."""


Command = Say | Recall | Call | Stall | Fail
"""The commands both doubles parse; `Digest` is the Messages API mock's alone."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Script:
    """A parsed prompt script: the command and its `;;` modifiers."""

    command: Command
    pause: str | None = None
    """Gate to wait at before the turn's final answer."""
    fail_after_results: bool = False
    """Fail once every call has a result (fake CLI only)."""
    reuse: ToolCallSpec | None = None
    """Call this tool under the turn's first tool use ID (fake CLI only)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TextReply:
    """The model answers with text and ends the turn."""

    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolUseReply:
    """The model calls tools; the turn goes on once their results arrive."""

    calls: tuple[ToolCallSpec, ...]


Reply = TextReply | ToolUseReply


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedReply:
    """What the model answers to one request, and where it waits first."""

    reply: Reply
    pause: str | None = None


def parse_script(text: str) -> Script:
    """Parse one command, e.g. `call lookup {"orderId": "7"} ;; pause g1`.

    Raises:
        ScriptError: The command is unknown or malformed.
    """
    head, *modifiers = (part.strip() for part in text.strip().split(";;"))
    pause: str | None = None
    fail_after_results = False
    reuse: ToolCallSpec | None = None
    for modifier in modifiers:
        verb, _, rest = modifier.partition(" ")
        match verb:
            case "pause" if rest.strip():
                pause = rest.strip()
            case "fail" if not rest.strip():
                fail_after_results = True
            case "reuse":
                reuse = _parse_call(rest)
            case _:
                raise ScriptError(f"unknown script modifier {modifier!r}")
    return Script(
        command=_parse_command(head),
        pause=pause,
        fail_after_results=fail_after_results,
        reuse=reuse,
    )


def parse_digest(text: str) -> Digest | None:
    """The `digest` command, if `text` is one; None for any other command."""
    return Digest() if text.strip() == "digest" else None


def _parse_command(text: str) -> Command:
    verb, _, rest = text.partition(" ")
    match verb:
        case "say":
            return Say(text=rest.strip())
        case "recall" if not rest.strip():
            return Recall()
        case "call":
            parts = [p.strip() for p in text.split("&&")]
            calls: list[ToolCallSpec] = []
            for part in parts:
                if not part.startswith("call "):
                    raise ScriptError(f"expected `call <tool> <json>`, got {part!r}")
                calls.append(_parse_call(part.removeprefix("call ")))
            return Call(calls=tuple(calls))
        case "stall" if rest.strip():
            return Stall(gate=rest.strip())
        case "fail" if not rest.strip():
            return Fail()
        case _:
            raise ScriptError(f"unknown script command {text!r}")


def _parse_call(text: str) -> ToolCallSpec:
    name, _, raw = text.strip().partition(" ")
    try:
        value: JsonValue = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as e:
        raise ScriptError(f"tool input of {name!r} is not JSON: {raw!r}") from e
    if not name or not isinstance(value, dict):
        raise ScriptError(f"expected `call <tool> <json object>`, got {text!r}")
    return ToolCallSpec(name=name, input=value)


def plan_reply(
    messages: Sequence[JsonValue], *, tool_names: Sequence[str] = ()
) -> PlannedReply:
    """Decide the model's next reply to a Messages API request.

    Args:
        messages: The request's `messages`, as sent on the wire.
        tool_names: Names of the request's tools; a scripted `call lookup`
            resolves to the one tool named `lookup` or ending in `__lookup`
            (the CLI exposes SDK MCP tools as `mcp__<server>__<tool>`).

    Raises:
        ScriptError: The turn's prompt holds no command (an earlier turn's
            command is never reused), or the command is not one the Messages
            API mock can answer.
    """
    found = _find_prompt(messages)
    if found is None:
        raise ScriptError(f"no user text holds a {MARKER.strip()!r} command")
    index, prompt_text = found
    if MARKER not in prompt_text:
        raise ScriptError(
            f"the prompt {_clip(prompt_text)!r} holds no {MARKER.strip()!r} command"
        )
    line = command_line(prompt_text)
    if parse_digest(line) is not None:
        return PlannedReply(reply=_digest_reply(messages[index]))
    script = parse_script(line)
    command = script.command
    if (
        not isinstance(command, Say | Recall | Call)
        or script.reuse is not None
        or script.fail_after_results
    ):
        raise ScriptError(f"{prompt_text!r} needs the fake CLI, not the mock API")
    match command:
        case Say(text=text):
            reply: Reply = TextReply(text=f"said: {text}")
        case Recall():
            earlier = [t for t in _prompt_texts(messages[:index])]
            listed = "\n".join(earlier) if earlier else "nothing"
            reply = TextReply(text=f"recalled:\n{listed}")
        case Call(calls=calls):
            if not _last_user_has_results(messages):
                resolved = tuple(_resolve(call, tool_names) for call in calls)
                return PlannedReply(reply=ToolUseReply(calls=resolved))
            retry = _pending_retry(messages[index + 1 :])
            if retry is not None:
                return PlannedReply(reply=ToolUseReply(calls=(retry,)))
            reply = TextReply(text=_summary(messages[index + 1 :]))
    return PlannedReply(reply=reply, pause=script.pause)


def _digest_reply(message: JsonValue) -> TextReply:
    """The answer to `digest`, from the message that holds it; see `Digest`."""
    text = "".join(_texts(message))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return TextReply(text=f"digest: {len(text)} chars, sha256 {digest}")


_LINE = re.compile(r"[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]*")
"""The characters up to the first line boundary `str.splitlines` knows."""


def command_line(text: str) -> str:
    """The command of a prompt text: the line after its last `dex-script: `.

    Found without splitting the rest into lines, so a many-megabyte prompt
    costs one scan.
    """
    rest = text.rpartition(MARKER)[2]
    match = _LINE.match(rest)
    return match.group(0) if match else ""


def _resolve(call: ToolCallSpec, tool_names: Sequence[str]) -> ToolCallSpec:
    if call.name in tool_names:
        return call
    suffixed = [n for n in tool_names if n.endswith(f"__{call.name}")]
    if len(suffixed) == 1:
        return ToolCallSpec(name=suffixed[0], input=call.input)
    return call


def _blocks(message: JsonValue) -> list[dict[str, JsonValue]]:
    """The content blocks of a message; a string content is one text block."""
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _texts(message: JsonValue) -> list[str]:
    """The `text` of every text block of a message, in order."""
    texts: list[str] = []
    for block in _blocks(message):
        text = block.get("text")
        if block.get("type") == "text" and isinstance(text, str):
            texts.append(text)
    return texts


def _role(message: JsonValue) -> JsonValue:
    return message.get("role") if isinstance(message, dict) else None


def _prompt_texts(messages: Sequence[JsonValue]) -> list[str]:
    """Every user text block holding a command, in order."""
    texts: list[str] = []
    for message in messages:
        if _role(message) != "user":
            continue
        for block in _blocks(message):
            text = block.get("text")
            if block.get("type") == "text" and isinstance(text, str) and MARKER in text:
                texts.append(text.strip())
    return texts


def _find_prompt(messages: Sequence[JsonValue]) -> tuple[int, str] | None:
    """The index and text of the turn's prompt, in the last message of a person.

    That is the last user message with text of its own: messages that carry
    tool results are the CLI's, and so are `<system-reminder>` blocks and the
    "Continue from where you left off." after a resumed call. Its text is the
    last block that holds a command (the CLI may add blocks after a prompt's
    text, such as `[Image: source: ...]`), else its last text: then the
    prompt is unscripted, whatever came before.
    """
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if _role(message) != "user" or any(
            b.get("type") == "tool_result" for b in _blocks(message)
        ):
            continue
        texts = [t for t in _texts(message) if _is_persons(t)]
        if texts:
            scripted = [t for t in texts if MARKER in t]
            return index, (scripted or texts)[-1].strip()
    return None


def _is_persons(text: str) -> bool:
    """Whether a user text is not one the CLI added."""
    visible = without_system_reminders(text).strip()
    return bool(visible) and visible != _CONTINUE_TEXT


def _clip(text: str, limit: int = 80) -> str:
    visible = without_system_reminders(text).strip()
    return visible if len(visible) <= limit else f"{visible[: limit - 1]}…"


def _last_user_has_results(messages: Sequence[JsonValue]) -> bool:
    # CLI 2.1.327 appends a `role: "system"` environment message after the
    # prompt, so the last message is not necessarily the user's.
    for message in reversed(messages):
        if _role(message) == "user":
            return any(b.get("type") == "tool_result" for b in _blocks(message))
    return False


def _result_text(block: Mapping[str, JsonValue]) -> str:
    """A tool result's text as the tool wrote it, without the CLI's reminders."""
    content = block.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    else:
        text = ""
    return without_system_reminders(text).strip()


def _is_refusal(text: str) -> bool:
    return _REFUSAL_START in text and _REFUSAL_END in text


def _pending_retry(turn: Sequence[JsonValue]) -> ToolCallSpec | None:
    """The first refused call of the turn that was not called again since."""
    uses: dict[str, ToolCallSpec] = {}
    refused: list[tuple[int, ToolCallSpec]] = []
    for position, message in enumerate(turn):
        for block in _blocks(message):
            match block.get("type"):
                case "tool_use":
                    name, input_ = block.get("name"), block.get("input")
                    if isinstance(name, str) and isinstance(input_, dict):
                        use_id = str(block.get("id"))
                        uses[use_id] = ToolCallSpec(name=name, input=input_)
                case "tool_result" if _is_refusal(_result_text(block)):
                    call = uses.get(str(block.get("tool_use_id")))
                    if call is not None:
                        refused.append((position, call))
                case _:
                    pass
    for position, call in refused:
        later = [
            b
            for m in turn[position + 1 :]
            for b in _blocks(m)
            if b.get("type") == "tool_use"
            and b.get("name") == call.name
            and b.get("input") == call.input
        ]
        if not later:
            return call
    return None


def _summary(turn: Sequence[JsonValue]) -> str:
    results = [
        _result_text(block)
        for message in turn
        if _role(message) == "user"
        for block in _blocks(message)
        if block.get("type") == "tool_result" and not _is_refusal(_result_text(block))
    ]
    return "done: " + "; ".join(results)
