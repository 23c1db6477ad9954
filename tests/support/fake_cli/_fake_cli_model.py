"""The fake Claude CLI's scripted model: the next reply, from what it sees.

It follows the grammar of `_script` (`parse_script`) and answers as the mock
Messages API does where both know a command, so a test reads the same with the
fake and the real CLI. The command is the last text block of the turn's last
real prompt, or what follows `dex-script: ` in it. The fake-only commands:

- `stall <gate>` calls `lookup` (input `{"orderId": "stall"}`), then streams its
  answer and waits at `<gate>` half-way.
- `fail` ends the turn with an error result; `<command> ;; fail` does so once
  every call has a result.
- `<command> ;; reuse <tool> <json>` calls `<tool>` under the tool use ID of the
  turn's first call once the other calls have results, then answers
  `reused <tool>: <result>`.

Pure: the session runs tools and gates; this only decides.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import JsonValue

from dex_agents._scripted._script import (
    MARKER,
    Call,
    Fail,
    Recall,
    Say,
    Script,
    ScriptError,
    Stall,
    ToolCallSpec,
    parse_script,
)

from ._fake_cli_transcript import ViewMessage, text_of

STALL_INPUT: dict[str, JsonValue] = {"orderId": "stall"}
_REFUSAL_START = "did not run"
_REFUSAL_END = "Call again by itself."
_AGENT_NAMES = ("Agent", "Task")


@dataclass(frozen=True, kw_only=True, slots=True)
class PlannedCall:
    """One tool_use block of a reply."""

    name: str
    input: dict[str, JsonValue]
    use_id: str | None = None
    """An ID to reuse (`;; reuse`); None draws a fresh one."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """Answer with text and end the turn."""

    kind: Literal["answer"] = "answer"
    text: str
    pause: str | None = None
    """Gate to wait at before answering."""
    stall: str | None = None
    """Gate to wait at after streaming half the text."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallTools:
    """Call tools in one reply; the turn goes on once they have results."""

    kind: Literal["call"] = "call"
    calls: tuple[PlannedCall, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    """End the turn with an error result."""

    kind: Literal["failure"] = "failure"
    pause: str | None = None


Plan = Answer | CallTools | Failure


def command_of(messages: Sequence[ViewMessage]) -> tuple[int, str] | None:
    """The index of the turn's last real prompt with text, and its command."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        texts = [b for b in message.content if b.get("type") == "text"]
        if message.is_prompt and texts:
            text = str(texts[-1].get("text", ""))
            if MARKER in text:
                text = text.split(MARKER)[-1].splitlines()[0]
            return index, text.strip()
    return None


def plan_reply(messages: Sequence[ViewMessage], tool_names: Collection[str]) -> Plan:
    """Decide the model's next reply to `messages`.

    Raises:
        ScriptError: No prompt holds a command, or it does not parse.
    """
    found = command_of(messages)
    if found is None:
        raise ScriptError("no prompt holds a script command")
    index, command_text = found
    script = parse_script(command_text)
    turn = messages[index + 1 :]
    match script.command:
        case Say(text=text):
            return Answer(text=f"said: {text}", pause=script.pause)
        case Recall():
            earlier = _prompt_texts(messages[:index])
            listed = "\n".join(earlier) if earlier else "nothing"
            return Answer(text=f"recalled:\n{listed}", pause=script.pause)
        case Fail():
            return Failure(pause=script.pause)
        case Stall(gate=gate):
            if not _last_user_has_results(messages):
                lookup = _resolve(
                    ToolCallSpec(name="lookup", input=STALL_INPUT), tool_names
                )
                return CallTools(calls=(lookup,))
            return Answer(text=_summary(turn), pause=script.pause, stall=gate)
        case Call(calls=calls):
            if not _last_user_has_results(messages):
                return CallTools(calls=tuple(_resolve(c, tool_names) for c in calls))
            return _after_results(script, turn, tool_names)


def _after_results(
    script: Script, turn: Sequence[ViewMessage], tool_names: Collection[str]
) -> Plan:
    retry = _pending_retry(turn)
    if retry is not None:
        return CallTools(calls=(_resolve(retry, tool_names),))
    if script.reuse is not None:
        uses = [b for m in turn for b in m.content if b.get("type") == "tool_use"]
        first_id = str(uses[0].get("id")) if uses else None
        if first_id is not None:
            if sum(1 for b in uses if b.get("id") == first_id) < 2:
                call = _resolve(script.reuse, tool_names)
                return CallTools(
                    calls=(
                        PlannedCall(name=call.name, input=call.input, use_id=first_id),
                    )
                )
            result = _last_result(turn, first_id)
            text = f"reused {script.reuse.name}: {result}"
            return _final(script, text)
    return _final(script, _summary(turn))


def _final(script: Script, text: str) -> Plan:
    if script.fail_after_results:
        return Failure(pause=script.pause)
    return Answer(text=text, pause=script.pause)


def _resolve(call: ToolCallSpec, tool_names: Collection[str]) -> PlannedCall:
    """Name a call as the CLI offers the tool: `lookup` may be `mcp__tools__lookup`."""
    if call.name in tool_names or call.name in _AGENT_NAMES:
        return PlannedCall(name=call.name, input=call.input)
    suffixed = [n for n in tool_names if n.endswith(f"__{call.name}")]
    name = suffixed[0] if len(suffixed) == 1 else call.name
    return PlannedCall(name=name, input=call.input)


def _prompt_texts(messages: Sequence[ViewMessage]) -> list[str]:
    """Every earlier prompt: its `dex-script:` blocks, else its last text block."""
    texts: list[str] = []
    for message in messages:
        if not message.is_prompt:
            continue
        blocks = [
            str(b.get("text", "")) for b in message.content if b.get("type") == "text"
        ]
        marked = [t.strip() for t in blocks if MARKER in t]
        texts.extend(marked or [t.strip() for t in blocks[-1:]])
    return texts


def _last_user_has_results(messages: Sequence[ViewMessage]) -> bool:
    for message in reversed(messages):
        if message.role == "user":
            return any(b.get("type") == "tool_result" for b in message.content)
    return False


def result_text(block: dict[str, JsonValue]) -> str:
    """The text of a tool_result block, whose content is a string or blocks."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return text_of(b for b in content if isinstance(b, dict))
    return ""


def _is_refusal(text: str) -> bool:
    return _REFUSAL_START in text and _REFUSAL_END in text


def _results(turn: Sequence[ViewMessage]) -> list[dict[str, JsonValue]]:
    return [
        b
        for m in turn
        if m.role == "user"
        for b in m.content
        if b.get("type") == "tool_result"
    ]


def _last_result(turn: Sequence[ViewMessage], use_id: str) -> str:
    matching = [b for b in _results(turn) if b.get("tool_use_id") == use_id]
    return result_text(matching[-1]) if matching else ""


def _pending_retry(turn: Sequence[ViewMessage]) -> ToolCallSpec | None:
    """The first refused call of the turn that was not called again since."""
    uses: dict[str, ToolCallSpec] = {}
    refused: list[tuple[int, ToolCallSpec]] = []
    for position, message in enumerate(turn):
        for block in message.content:
            name, input_ = block.get("name"), block.get("input")
            if block.get("type") == "tool_use" and isinstance(name, str):
                if isinstance(input_, dict):
                    uses[str(block.get("id"))] = ToolCallSpec(name=name, input=input_)
            elif block.get("type") == "tool_result" and _is_refusal(result_text(block)):
                call = uses.get(str(block.get("tool_use_id")))
                if call is not None:
                    refused.append((position, call))
    for position, call in refused:
        again = any(
            b.get("type") == "tool_use"
            and b.get("name") == call.name
            and b.get("input") == call.input
            for m in turn[position + 1 :]
            for b in m.content
        )
        if not again:
            return call
    return None


def _summary(turn: Sequence[ViewMessage]) -> str:
    texts = [result_text(b) for b in _results(turn)]
    return "done: " + "; ".join(t for t in texts if not _is_refusal(t))
