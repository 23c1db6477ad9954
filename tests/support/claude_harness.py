"""Drives `ClaudeAgentRunner` the way the session engine does, without Temporal.

A turn calls `run_model`; a deferred call is approved or rejected, run through
`execute_deferred_tool` and recorded; the next `run_model` resumes from the
record; a completed turn's messages are committed after its prompt.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest_asyncio
from claude_agent_sdk import ClaudeAgentOptions, SdkMcpTool, ToolAnnotations, tool

from dex_agents._errors import ToolExecutionError
from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.claude import ClaudeAgentDefinition, ClaudeAgentRunner
from dex_agents.session import (
    AgentEvent,
    RunModelContext,
    StoredMessage,
    ToolCall,
    ToolCallsRequested,
    ToolPolicy,
    TurnCompleted,
)
from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.session._policy import ToolEffect, idempotency_key
from dex_agents.session._records import (
    DeferredToolExecution,
    ToolRecord,
    current_deferred_tool_execution,
)
from dex_agents.session._runner import ResumeState
from dex_agents.testing._hermetic import hermetic_cli_env
from dex_agents.testing._refusing_proxy import RefusingProxy
from support.fake_cli import fake_claude_cli_path


class RecordingSink:
    """An EventSink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def emit(self, event: AgentEvent) -> None:
        self.events.append(event)

    def of_type(self, kind: str) -> list[AgentEvent]:
        return [e for e in self.events if e.type == kind]


class MemoryTranscript:
    """The committed transcript of completed turns."""

    def __init__(self) -> None:
        self.committed: list[StoredMessage] = []

    async def messages(self) -> list[StoredMessage]:
        return list(self.committed)


@dataclass(frozen=True, slots=True)
class Reject:
    message: str


Approval = bool | Reject
"""True approves, False or a `Reject` rejects (False with an empty message)."""


@dataclass(kw_only=True)
class TurnResult:
    completed: TurnCompleted
    segments: list[TurnCompleted | ToolCallsRequested] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    records: list[ToolRecord] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.completed.final_text


def approve_all(_call: ToolCall) -> Approval:
    return True


class SessionDriver:
    """One session's engine stand-in."""

    def __init__(
        self,
        runner: ClaudeAgentRunner,
        *,
        session_id: str = "session-1",
        tool_policies: dict[str, ToolPolicy] | None = None,
        default_tool_effect: ToolEffect = "unclassified",
    ) -> None:
        self.runner = runner
        self.session_id = session_id
        self.tool_policies = dict(tool_policies or {})
        self.default_tool_effect: ToolEffect = default_tool_effect
        self.transcript = MemoryTranscript()
        self.sink = RecordingSink()
        self._turns = 0

    def context(
        self,
        *,
        turn_id: str,
        step: int,
        pending: Sequence[JsonObject],
        resume: ResumeState | None,
        attempt: int = 1,
    ) -> RunModelContext:
        return RunModelContext(
            session_id=self.session_id,
            flow_type="TestAgent",
            turn_id=turn_id,
            step_execution_id=f"{turn_id}/run_model-{step}",
            attempt=attempt,
            pending=tuple(pending),
            transcript=self.transcript,
            events=self.sink,
            tool_policies=self.tool_policies,
            default_tool_effect=self.default_tool_effect,
            resume=resume,
        )

    async def turn(
        self,
        text: str,
        *,
        decide: Callable[[ToolCall], Approval] = approve_all,
        max_segments: int = 8,
        images: Sequence[ImageReference] = (),
    ) -> TurnResult:
        self._turns += 1
        turn_id = f"turn-{self._turns}"
        if images:
            item = self.runner.build_user_message_with_images(text, images)
        else:
            item = self.runner.build_user_message(text)
        resume: ResumeState | None = None
        segments: list[TurnCompleted | ToolCallsRequested] = []
        calls: list[ToolCall] = []
        records: list[ToolRecord] = []
        for step in range(1, max_segments + 1):
            context = self.context(
                turn_id=turn_id, step=step, pending=(item,), resume=resume
            )
            result = await self.runner.run_model(context)
            segments.append(result)
            if isinstance(result, TurnCompleted):
                self.transcript.committed.extend(
                    [StoredMessage(role="user", text=text, item=item), *result.messages]
                )
                return TurnResult(
                    completed=result, segments=segments, calls=calls, records=records
                )
            assert len(result.calls) == 1, result.calls
            call = result.calls[0]
            calls.append(call)
            record = await self.settle(turn_id, step, call, decide)
            records.append(record)
            resume = ResumeState(
                run_state=result.run_state, messages=result.messages, records=(record,)
            )
        raise AssertionError(
            f"turn {turn_id} did not complete in {max_segments} segments"
        )

    async def settle(
        self,
        turn_id: str,
        step: int,
        call: ToolCall,
        decide: Callable[[ToolCall], Approval],
    ) -> ToolRecord:
        base = {
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "arguments": call.arguments,
        }
        if call.policy.needs_approval:
            answer = decide(call)
            if answer is not True:
                message = answer.message if isinstance(answer, Reject) else ""
                return ToolRecord(**base, status="rejected", rejection_message=message)
        execution = DeferredToolExecution(
            flow_id=self.session_id,
            turn_id=turn_id,
            tool_call_id=call.tool_call_id,
            step_execution_id=f"{turn_id}/tool-{step}",
            attempt=1,
            idempotency_key=idempotency_key(
                self.session_id, turn_id, call.tool_call_id
            ),
        )
        try:
            outcome = await self.runner.execute_deferred_tool(call, execution)
        except ToolExecutionError as e:
            return ToolRecord(**base, status="failed", output=str(e), attempts=1)
        return ToolRecord(
            **base,
            status="finished",
            output=outcome.output,
            attempts=1,
            finished_by_resumed_turn=outcome.finished_by_resumed_turn,
            images=outcome.images,
        )


@dataclass(kw_only=True)
class Hermetic:
    """A mock Messages API, a refusing proxy and the CLI environment for both."""

    api: MockMessagesApi
    proxy: RefusingProxy
    env: dict[str, str]
    base: Path

    def options(self, **overrides: object) -> ClaudeAgentOptions:
        """Options for a hermetic real CLI in this test's working directory."""
        cwd = self.base / "cwd"
        cwd.mkdir(exist_ok=True)
        values: dict[str, object] = {
            "tools": [],
            "setting_sources": [],
            "cwd": str(cwd),
            "env": dict(self.env),
        }
        values.update(overrides)
        # Overrides are ClaudeAgentOptions fields; the kwargs are not typed per field.
        return ClaudeAgentOptions(**values)  # pyright: ignore[reportArgumentType]


class Ledger:
    """Counts tool runs and what they saw."""

    def __init__(self) -> None:
        self.lookups: list[dict[str, Any]] = []
        self.refunds: list[dict[str, Any]] = []
        self.executions: list[DeferredToolExecution | None] = []

    def tools(self) -> list[SdkMcpTool[Any]]:
        @tool(
            "lookup_order",
            "Look up an order",
            {"orderId": str},
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
            self.lookups.append(args)
            text = f"order {args['orderId']}: broken"
            return {"content": [{"type": "text", "text": text}]}

        @tool("create_refund", "Refund an order", {"orderId": str})
        async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
            self.refunds.append(args)
            self.executions.append(current_deferred_tool_execution())
            text = f"refunded {args['orderId']}"
            return {"content": [{"type": "text", "text": text}]}

        return [lookup_order, create_refund]


def runner_for(
    hermetic: Hermetic, ledger: Ledger | None = None, **options: object
) -> ClaudeAgentRunner:
    return ClaudeAgentRunner(
        ClaudeAgentDefinition(
            options=hermetic.options(**options),
            custom_tools=(ledger or Ledger()).tools(),
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        )
    )


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def hermetic(
    tmp_path: Path,
    scrubbed_environ: None,
    cli_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> AsyncIterator[Hermetic]:
    """The bundled CLI's hermetic world: every scripted reply must be served."""
    yield Hermetic(
        api=api,
        proxy=proxy,
        env=hermetic_cli_env(tmp_path, api=api, proxy=proxy),
        base=tmp_path,
    )
    assert api.unserved == [], api.unserved


def fake_options(base: Path, **overrides: object) -> ClaudeAgentOptions:
    """Options for the fake CLI in `base/cwd`, Bash its only Claude Code tool."""
    cwd = base / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    values: dict[str, object] = {
        "cli_path": str(fake_claude_cli_path()),
        "cwd": str(cwd.resolve()),
        "tools": ["Bash"],
        "setting_sources": [],
        "env": {},
    }
    values.update(overrides)
    # Overrides are ClaudeAgentOptions fields; the kwargs are not typed per field.
    return ClaudeAgentOptions(**values)  # pyright: ignore[reportArgumentType]


def bash(command: str) -> str:
    """The fake CLI's script for one Bash call running `command`."""
    return f"dex-script: call Bash {json.dumps({'command': command})}"


class PermissionRecorder:
    """A `claude_code_tool_permission` that records what it was asked, and in which context."""

    def __init__(self, answer: ToolPolicy | None) -> None:
        self.answer = answer
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.contexts: list[RunModelContext] = []

    async def __call__(
        self, context: RunModelContext, name: str, tool_input: dict[str, Any]
    ) -> ToolPolicy | None:
        self.contexts.append(context)
        self.asked.append((name, dict(tool_input)))
        return self.answer
