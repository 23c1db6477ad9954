"""One conversation loop of the fake Claude CLI: model calls, tool rounds, subagents.

Each model call is emitted as CLI 2.1.327 emits a streamed API message: with
`--include-partial-messages`, `stream_event` frames (`message_start`, per block
`content_block_start`, two `content_block_delta`s, `content_block_stop`, then
`message_delta` with the stop reason and `message_stop`); always one `assistant`
frame per content block, sharing the message ID and naming the dated response
model; and one transcript entry per block. After a tool-use reply every call
goes through `Tools`; a deferred call ends the loop without a next model call.
A subagent is the same loop on its own transcript, under `parent_tool_use_id`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

from pydantic import JsonValue

from dex_agents._scripted._script import ScriptError

from ._fake_cli_args import CliArgs, JsonObject
from ._fake_cli_model import Answer, CallTools, Failure, Plan, PlannedCall, plan_reply
from ._fake_cli_tools import Caller, ToolResult, Tools, ToolUse
from ._fake_cli_transcript import Transcript, now_iso
from ._fake_cli_usage import (
    SUBAGENT_MODEL,
    UsageLedger,
    message_usage,
    output_tokens,
    response_model,
)
from ._fake_cli_wire import Wire

FAKE_CLAUDE_GATE_DIR_ENV = "DEX_FAKE_CLAUDE_GATE_DIR"
"""Directory of gate files: `<gate>.reached` is written, `<gate>` opens it."""

_GATE_POLL_S = 0.02
_MAX_MODEL_CALLS = 50
"""A script that keeps calling tools (a refusal answered by another) fails here."""
_message_numbers = itertools.count(1)


class GateError(RuntimeError):
    """A script waits at a gate, but no gate directory was given."""


async def wait_at_gate(gate: str | None) -> None:
    """Write `<gate>.reached`, then wait until the file `<gate>` exists.

    Raises:
        GateError: `DEX_FAKE_CLAUDE_GATE_DIR` is not set.
    """
    if gate is None:
        return
    directory = os.environ.get(FAKE_CLAUDE_GATE_DIR_ENV)
    if not directory:
        raise GateError(
            f"script waits at gate {gate!r} but {FAKE_CLAUDE_GATE_DIR_ENV} is unset"
        )
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    parent = os.getppid()
    (path / f"{gate}.reached").touch()
    while not (path / gate).exists():
        if os.getppid() != parent:
            # The host died (a test SIGKILLed it); a gate nobody will open
            # would keep this process alive forever.
            os._exit(1)
        await asyncio.sleep(_GATE_POLL_S)


@dataclass(kw_only=True, slots=True)
class Segment:
    """What the next result frame reports about the main conversation."""

    num_turns: int = 0
    stop_reason: str | None = None
    denials: list[JsonValue] = field(default_factory=lambda: [])
    deferred: list[ToolUse] = field(default_factory=lambda: [])


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    """One conversation: the main one, or a subagent's."""

    transcript: Transcript
    caller: Caller
    model: str
    """The requested model; answers name its dated form."""
    parent_tool_use_id: str | None = None

    @property
    def main(self) -> bool:
        """Whether this is the main conversation."""
        return self.parent_tool_use_id is None


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnEnd:
    """How a conversation loop ended."""

    kind: Literal["answered", "deferred", "failed"]
    text: str = ""


class Conversations:
    """Runs conversation loops for one CLI process."""

    def __init__(
        self,
        *,
        wire: Wire,
        args: CliArgs,
        usage: UsageLedger,
        session_id: str,
        tools: Tools,
        tool_names: Callable[[], list[str]],
        subagent_transcript: Callable[[str], Transcript],
    ) -> None:
        self._wire = wire
        self._args = args
        self._usage = usage
        self._session_id = session_id
        self._tools = tools
        self._tool_names = tool_names
        self._subagent_transcript = subagent_transcript

    async def run(self, ctx: Context, seg: Segment) -> TurnEnd:
        """Call the model until it answers, fails, or a call is deferred."""
        for _ in range(_MAX_MODEL_CALLS):
            try:
                plan: Plan = plan_reply(ctx.transcript.view(), self._tool_names())
            except ScriptError as e:
                if ctx.main:
                    return TurnEnd(kind="failed", text=str(e))
                plan = Answer(text=f"said: {_prompt_of(ctx)}")
            try:
                match plan:
                    case Failure(pause=pause):
                        await wait_at_gate(pause)
                        return TurnEnd(kind="failed", text="scripted failure (`fail`)")
                    case Answer(text=text, pause=pause, stall=stall):
                        await wait_at_gate(pause)
                        block: JsonObject = {"type": "text", "text": text}
                        await self._model_call(
                            ctx, seg, [block], "end_turn", stall=stall
                        )
                        return TurnEnd(kind="answered", text=text)
                    case CallTools(calls=calls):
                        if await self._call_tools(ctx, seg, calls):
                            return TurnEnd(kind="deferred")
            except GateError as e:
                return TurnEnd(kind="failed", text=str(e))
        return TurnEnd(
            kind="failed", text=f"the script made {_MAX_MODEL_CALLS} model calls"
        )

    async def _call_tools(
        self, ctx: Context, seg: Segment, calls: tuple[PlannedCall, ...]
    ) -> bool:
        """One tool-use reply and its tool round; True when a call was deferred."""
        uses = [
            ToolUse(id=c.use_id or _tool_use_id(), name=c.name, input=c.input)
            for c in calls
        ]
        blocks: list[JsonObject] = [
            {"type": "tool_use", "id": u.id, "name": u.name, "input": u.input}
            for u in uses
        ]
        await self._model_call(ctx, seg, blocks, "tool_use")
        return await self._tool_round(ctx, seg, uses)

    async def _tool_round(
        self, ctx: Context, seg: Segment, uses: list[ToolUse]
    ) -> bool:
        """Handle every call of a reply; True when any was deferred."""
        deferred = False
        for use in uses:
            result = await self._tools.handle(use, ctx.caller)
            if result.deferred and ctx.main:
                deferred = True
                seg.deferred.append(use)
                self.append_deferral(ctx.transcript, use)
                continue
            if result.deferred:
                result = ToolResult(
                    content=f"PreToolUse:{use.name} hook error: the fake Claude CLI "
                    "cannot defer a call inside a subagent",
                    is_error=True,
                    denied=True,
                )
            if result.denied:
                seg.denials.append(
                    {
                        "tool_name": use.name,
                        "tool_use_id": use.id,
                        "tool_input": use.input,
                    }
                )
            self.emit_tool_result(ctx, use, result)
        return deferred

    def append_deferral(self, transcript: Transcript, use: ToolUse) -> None:
        """Record a deferred call, with the model's original input (CLI 2.1.327)."""
        transcript.append(
            {
                "type": "attachment",
                "attachment": {
                    "type": "hook_deferred_tool",
                    "toolUseID": use.id,
                    "toolName": use.name,
                    "toolInput": use.input,
                    "hookName": "settings",
                    "hookEvent": "PreToolUse",
                    "permissionMode": self._tools.permission_mode,
                },
            }
        )
        transcript.flush()

    def emit_tool_result(
        self,
        ctx: Context,
        use: ToolUse,
        result: ToolResult,
        *,
        parent: str | None = None,
    ) -> None:
        """Send a call's result to the SDK and append it to the transcript."""
        block: JsonObject = {
            "tool_use_id": use.id,
            "type": "tool_result",
            "content": cast(JsonValue, result.content),
        }
        if result.is_error or isinstance(result.content, str):
            block["is_error"] = result.is_error
        message: JsonObject = {"role": "user", "content": [block]}
        frame_uuid = str(uuid.uuid4())
        self._wire.send(
            {
                "type": "user",
                "message": message,
                "parent_tool_use_id": ctx.parent_tool_use_id,
                "session_id": self._session_id,
                "uuid": frame_uuid,
                "timestamp": now_iso(),
                "tool_use_result": result.tool_use_result,
            }
        )
        entry: JsonObject = {
            "type": "user",
            "message": message,
            "uuid": frame_uuid,
            "toolUseResult": result.tool_use_result,
            "sourceToolAssistantUUID": _assistant_of(ctx.transcript, use.id),
        }
        if ctx.caller.prompt_id is not None:
            entry["promptId"] = ctx.caller.prompt_id
        if result.permission is not None:
            entry["permissionDecision"] = result.permission
        ctx.transcript.append(entry, parent=parent)
        ctx.transcript.flush()

    async def _model_call(
        self,
        ctx: Context,
        seg: Segment,
        blocks: list[JsonObject],
        stop_reason: str,
        *,
        stall: str | None = None,
    ) -> None:
        """Emit one model answer; `stall` waits at a gate half-way through it."""
        number = next(_message_numbers)
        head: JsonObject = {
            "id": f"msg_fake_{number:04d}_{secrets.token_hex(6)}",
            "type": "message",
            "role": "assistant",
            "model": response_model(ctx.model),
        }
        request_id = f"req_fake_{secrets.token_hex(8)}"
        texts = [str(b["text"]) for b in blocks if b.get("type") == "text"]
        output = output_tokens("".join(texts) if texts else json.dumps(blocks))
        self._usage.record(ctx.model, output, main=ctx.main)
        partial = self._args.include_partial_messages and ctx.main
        if ctx.main:
            seg.num_turns += 1
            seg.stop_reason = stop_reason
            self._system({"subtype": "status", "status": "requesting"})
        if partial:
            start = head | {"content": [], "stop_reason": None, "stop_sequence": None}
            start["usage"] = message_usage(1)
            self._event({"type": "message_start", "message": start})
        frame_uuids: list[str] = []
        for index, block in enumerate(blocks):
            await self._stream_block(index, block, partial=partial, stall=stall)
            frame_uuids.append(str(uuid.uuid4()))
            self._send_assistant(ctx, head, block, frame_uuids[-1], request_id)
            if partial:
                self._event({"type": "content_block_stop", "index": index})
        if partial:
            stop: JsonObject = {"stop_reason": stop_reason, "stop_sequence": None}
            usage: JsonObject = {"output_tokens": output}
            self._event({"type": "message_delta", "delta": stop, "usage": usage})
            self._event({"type": "message_stop"})
        for block, frame_uuid in zip(blocks, frame_uuids, strict=True):
            message = head | {
                "content": [block],
                "stop_reason": stop_reason,
                "stop_sequence": None,
                "usage": message_usage(output),
            }
            ctx.transcript.append(
                {
                    "type": "assistant",
                    "message": message,
                    "requestId": request_id,
                    "requestedModel": ctx.model,
                    "uuid": frame_uuid,
                }
            )
        ctx.transcript.flush()

    async def _stream_block(
        self, index: int, block: JsonObject, *, partial: bool, stall: str | None
    ) -> None:
        """Stream a block in two deltas; a stall waits between them."""
        is_text = block.get("type") == "text"
        raw = str(block["text"]) if is_text else json.dumps(block.get("input"))
        if partial:
            opening: JsonObject = (
                {"type": "text", "text": ""} if is_text else block | {"input": {}}
            )
            self._event(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": opening,
                }
            )
        middle = len(raw) // 2
        for number, piece in enumerate((raw[:middle], raw[middle:])):
            if partial and piece:
                delta: JsonObject = (
                    {"type": "text_delta", "text": piece}
                    if is_text
                    else {"type": "input_json_delta", "partial_json": piece}
                )
                self._event(
                    {"type": "content_block_delta", "index": index, "delta": delta}
                )
            if number == 0 and stall is not None:
                await wait_at_gate(stall)

    def _send_assistant(
        self,
        ctx: Context,
        head: JsonObject,
        block: JsonObject,
        frame_uuid: str,
        request_id: str,
    ) -> None:
        """One `assistant` frame per content block, as CLI 2.1.327 sends them."""
        message = head | {
            "content": [block],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": message_usage(1),
            "context_management": None,
        }
        frame: JsonObject = {
            "type": "assistant",
            "message": message,
            "parent_tool_use_id": ctx.parent_tool_use_id,
            "session_id": self._session_id,
            "uuid": frame_uuid,
            "timestamp": now_iso(),
            "request_id": request_id,
        }
        if ctx.caller.agent_id is not None:
            frame["agent_id"] = ctx.caller.agent_id
        self._wire.send(frame)

    async def run_subagent(
        self, use: ToolUse, tool_input: dict[str, JsonValue], caller: Caller
    ) -> ToolResult:
        """Run an `Agent` call: a conversation on its own transcript and model."""
        agent_id = f"a{secrets.token_hex(8)}"
        agent_type = str(tool_input.get("subagent_type") or "general-purpose")
        prompt = str(tool_input.get("prompt", ""))
        transcript = self._subagent_transcript(agent_id)
        transcript.append_plain(
            {
                "type": "agent_metadata",
                "agentType": agent_type,
                "description": str(tool_input.get("description", "")),
                "toolUseId": use.id,
                "model": SUBAGENT_MODEL,
            }
        )
        transcript.append(
            {"type": "user", "message": {"role": "user", "content": prompt}}
        )
        ctx = Context(
            transcript=transcript,
            caller=Caller(
                prompt_id=caller.prompt_id, agent_id=agent_id, agent_type=agent_type
            ),
            model=SUBAGENT_MODEL,
            parent_tool_use_id=use.id,
        )
        end = await self.run(ctx, Segment())
        transcript.flush()
        content: list[JsonObject] = [{"type": "text", "text": end.text}]
        return ToolResult(
            content=content,
            is_error=end.kind != "answered",
            tool_use_result={
                "status": "completed" if end.kind == "answered" else "failed",
                "prompt": prompt,
                "agentId": agent_id,
                "content": cast(JsonValue, content),
            },
        )

    def _event(self, event: JsonObject) -> None:
        self._wire.send(
            {
                "type": "stream_event",
                "event": event,
                "session_id": self._session_id,
                "parent_tool_use_id": None,
                "uuid": str(uuid.uuid4()),
            }
        )

    def _system(self, fields: JsonObject) -> None:
        self._wire.send(
            {
                "type": "system",
                **fields,
                "session_id": self._session_id,
                "uuid": str(uuid.uuid4()),
            }
        )


def _tool_use_id() -> str:
    return f"toolu_fake_{secrets.token_hex(8)}"


def _prompt_of(ctx: Context) -> str:
    view = ctx.transcript.view()
    texts = [str(b.get("text", "")) for m in view[:1] for b in m.content]
    return "".join(texts)


def _assistant_of(transcript: Transcript, tool_use_id: str) -> str | None:
    """The uuid of the assistant entry that holds the tool_use `tool_use_id`."""
    for entry in reversed(transcript.entries):
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("id") == tool_use_id for b in content
        ):
            return str(entry.get("uuid"))
    return None
