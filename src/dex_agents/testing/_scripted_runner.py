"""A scripted runner: drives the session core without any model or framework.

Each user message is a script, one command per turn:

- `say <text>`: answer `said: <text>`.
- `recall`: answer with every earlier prompt of the session.
- `call <tool> <json>`, joined by ` && `: ask for tool calls in one reply. Calls of
  a tool whose policy is a read without approval run inline; the rest are
  requested as deferred calls, and the resumed segment answers
  `done: <tool>=<result>; ...`.
- `stream <n>`: stream `n` text deltas, then answer `streamed <n>`.
- `api_retry <n>`: say that the model API could not be reached `n` times
  (`model_retry` events, as Claude Code's retry notices), then answer
  `answered after <n> retries`.
- `digest <anything>`: answer `digest: <n> chars, sha256 <hex>` of the whole prompt
  text (the command included), to prove a long message arrived whole.
- `fail`: every attempt of the segment fails. `fail_once`: only the first does.
- a trailing ` ;; pause <gate>`: wait at a gate (a file in `gate_dir`) before answering;
  reaching it writes `<gate>.reached`. ` ;; fail_after_tools`: the resumed segment fails.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path

from .._errors import (
    MessageTooLargeError,
    SessionError,
    UserError,
)
from .._schema import schema_problem
from ..session import (
    AgentEvent,
    EditContext,
    RunModelContext,
    StoredMessage,
    ToolCall,
    ToolCallsRequested,
    ToolOutcome,
    TurnCompleted,
)
from ..session._events import ModelRetryEvent, agent_event
from ..session._json import JsonObject
from ..session._policy import resolve_policy
from ..session._records import DeferredToolExecution
from ..session._usage import ModelCallMetadata, Usage

ToolHandler = Callable[[JsonObject, DeferredToolExecution | None], Awaitable[str]]
SEGMENT_USAGE = Usage(input_tokens=20, output_tokens=5, model_calls=1, cost_usd=0.001)


class ScriptedRunner:
    """An `AgentFrameworkRunner` that follows scripts instead of calling a model."""

    __test__ = False

    def __init__(
        self,
        tools: Mapping[str, ToolHandler] | None = None,
        *,
        input_schemas: Mapping[str, JsonObject] | None = None,
        gate_dir: Path | None = None,
        max_input_bytes: int | None = None,
    ) -> None:
        """A runner with `tools`, handlers by tool name.

        A handler is `async def handler(arguments, execution) -> str`: the call's
        input, and its `DeferredToolExecution` in a tool Step (None inline); it
        returns the text the model reads, or raises `ToolExecutionError` for a
        failed result. A tool's effect comes from the session's policies.
        `input_schemas` (JSON Schema, by tool name) checks a person's edit of a
        call; a tool without one takes any object. `max_input_bytes` plays a
        model's input limit: a segment whose prompts and notes add up to more
        raises `MessageTooLargeError`, as a model would refuse.

        Raises:
            UserError: `input_schemas` names a tool that is not in `tools`.
        """
        self.tools = dict(tools or {})
        self.input_schemas = dict(input_schemas or {})
        unknown = sorted(set(self.input_schemas) - set(self.tools))
        if unknown:
            raise UserError(
                f"`input_schemas` names {unknown}, which are not in `tools` "
                f"({sorted(self.tools)}); fix the names or add the tools"
            )
        self.gate_dir = gate_dir
        self.max_input_bytes = max_input_bytes

    def build_user_message(self, text: str) -> JsonObject:
        """Store prompts in the same shape the Claude adapter uses."""
        return {"kind": "user_prompt", "text": text}

    def validate_session_options(self, *, compaction: object | None) -> None:
        """The scripted runner keeps no summary, so it cannot compact."""
        if compaction is not None:
            raise UserError("the scripted runner cannot compact; remove `compaction`")

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        """Follow the script of the turn's last prompt."""
        prompts = [i for i in context.pending if i.get("kind") == "user_prompt"]
        if self.max_input_bytes is not None:
            size = sum(len(str(i.get("text", "")).encode()) for i in context.pending)
            if size > self.max_input_bytes:
                raise MessageTooLargeError(
                    f"the turn's input of {size} bytes is over the model's limit of "
                    f"{self.max_input_bytes} bytes; send a shorter message"
                )
        script = str(prompts[-1]["text"]) if prompts else ""
        command, _, suffix = script.partition(" ;; ")
        command = command.strip()
        if command == "fail" or (command == "fail_once" and context.attempt == 1):
            raise SessionError(f"scripted failure (attempt {context.attempt})")
        if context.resume is not None:
            if suffix.strip() == "fail_after_tools":
                raise SessionError("scripted failure after tools")
            await self._pause(suffix)
            results = "; ".join(
                f"{r.tool_name}={r.model_text}" for r in context.resume.records
            )
            tool_messages = [
                StoredMessage(
                    role="tool",
                    text=r.model_text,
                    item={
                        "kind": "scripted_tool_result",
                        "tool_call_id": r.tool_call_id,
                        "status": r.status,
                        "text": r.model_text,
                    },
                )
                for r in context.resume.records
            ]
            return self._answer(
                context, f"done: {results}", [*context.resume.messages, *tool_messages]
            )
        notes = [
            str(i["text"])
            for i in context.pending
            if i.get("kind") == "turn_failure_note"
        ]
        if command.startswith("say "):
            await self._pause(suffix)
            return self._answer(context, f"said: {command[4:]}", [], notes)
        if command == "recall":
            earlier = [
                m.text for m in await context.transcript.messages() if m.role == "user"
            ]
            earlier += [str(p["text"]) for p in prompts[:-1]]
            return self._answer(context, "recalled: " + " | ".join(earlier), [], notes)
        if command.startswith("digest"):
            digest = hashlib.sha256(script.encode()).hexdigest()
            return self._answer(
                context, f"digest: {len(script)} chars, sha256 {digest}", [], notes
            )
        if command.startswith("stream "):
            count = int(command.split()[1])
            for i in range(count):
                context.events.emit(
                    AgentEvent(type="text_delta", data={"text": f"t{i} "})
                )
                if i == count // 2:
                    await self._pause(suffix)
            return self._answer(context, f"streamed {count}", [], notes)
        if command.startswith("api_retry "):
            count = int(command.split()[1])
            for attempt in range(1, count + 1):
                retry = ModelRetryEvent(
                    attempt=attempt, max_retries=10, retry_in_ms=1200, error="unknown"
                )
                context.events.emit(agent_event(retry))
            await self._pause(suffix)
            return self._answer(context, f"answered after {count} retries", [], notes)
        if command.startswith("call "):
            return await self._calls(context, command, suffix)
        return self._answer(context, f"unknown script: {script}", [], notes)

    async def execute_deferred_tool(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> ToolOutcome:
        """Run the tool's handler; it raises `ToolExecutionError` for a failed result."""
        handler = self.tools.get(call.tool_name)
        if handler is None:
            raise UserError(f"the scripted runner has no tool {call.tool_name!r}")
        return ToolOutcome(output=await handler(call.arguments, execution))

    async def check_edited_call(
        self, call: ToolCall, arguments: JsonObject, context: EditContext
    ) -> ToolCall:
        """`call` with the edit, checked against the tool's entry in `input_schemas` if any."""
        schema = self.input_schemas.get(call.tool_name)
        if schema is not None:
            problem = schema_problem(schema, arguments, call.tool_name)
            if problem is not None:
                raise problem
        policy = resolve_policy(
            call.tool_name, context.tool_policies, context.default_tool_effect
        )
        return replace(
            call,
            arguments=dict(arguments),
            policy=replace(
                policy,
                requires_approval=policy.requires_approval
                or call.policy.requires_approval,
            ),
        )

    async def _calls(
        self, context: RunModelContext, command: str, suffix: str
    ) -> TurnCompleted | ToolCallsRequested:
        deferred: list[ToolCall] = []
        inline: list[StoredMessage] = []
        for n, part in enumerate(command.split(" && ")):
            words = part.strip().split(" ", 2)
            if len(words) < 2 or words[0] != "call":
                raise UserError(
                    f"bad script command {part!r}; write `call <tool> <json>`"
                )
            name = words[1]
            args: JsonObject = json.loads(words[2]) if len(words) > 2 else {}
            policy = resolve_policy(
                name, context.tool_policies, context.default_tool_effect
            )
            call_id = f"call_{context.turn_id}_{n}"
            if (
                policy.effect == "read"
                and not policy.needs_approval
                and name in self.tools
            ):
                context.events.emit(
                    AgentEvent(
                        type="tool_call_started",
                        data={
                            "tool_call_id": call_id,
                            "tool_name": name,
                            "arguments": args,
                        },
                    )
                )
                output = await self.tools[name](args, None)
                context.events.emit(
                    AgentEvent(
                        type="tool_call_finished",
                        data={
                            "tool_call_id": call_id,
                            "tool_name": name,
                            "status": "finished",
                            "output": output,
                        },
                    )
                )
                inline.append(
                    StoredMessage(
                        role="tool",
                        text=output,
                        item={
                            "kind": "scripted_tool_result",
                            "tool_call_id": call_id,
                            "text": output,
                        },
                    )
                )
                continue
            deferred.append(
                ToolCall(
                    tool_call_id=call_id,
                    tool_name=name,
                    arguments=args,
                    policy=policy,
                    reason=f"{name} is {policy.effect}",
                )
            )
        if not deferred:
            await self._pause(suffix)
            text = "done: " + "; ".join(m.text for m in inline)
            return self._answer(context, text, inline)
        return ToolCallsRequested(
            calls=tuple(deferred),
            run_state={"deferred": [c.tool_call_id for c in deferred]},
            messages=(
                *inline,
                StoredMessage(
                    role="assistant",
                    text=command,
                    item={
                        "kind": "scripted_message",
                        "text": command,
                    },
                ),
            ),
            usage=SEGMENT_USAGE,
        )

    def _answer(
        self,
        context: RunModelContext,
        text: str,
        messages: list[StoredMessage],
        notes: list[str] | None = None,
    ) -> TurnCompleted:
        if notes:
            text += f" (after {len(notes)} failure note(s))"
        context.events.emit(AgentEvent(type="text_delta", data={"text": text}))
        answer = StoredMessage(
            role="assistant",
            text=text,
            item={
                "kind": "scripted_message",
                "text": text,
            },
        )
        return TurnCompleted(
            messages=(*messages, answer),
            final_text=text,
            usage=SEGMENT_USAGE,
            metadata=ModelCallMetadata(
                request_model="scripted", response_model="scripted"
            ),
        )

    async def _pause(self, suffix: str) -> None:
        words = shlex.split(suffix)
        if len(words) != 2 or words[0] != "pause":
            return
        if self.gate_dir is None:
            raise UserError("`pause` needs a ScriptedRunner with `gate_dir`")
        gate = self.gate_dir / words[1]
        (self.gate_dir / f"{words[1]}.reached").write_text("")
        while not gate.exists():
            await asyncio.sleep(0.02)
