"""Steps the Claude adapter's tests repeat, each in one place.

- `script_call`, `start_idle`, `start_to_interrupt`, `call_events`: a session of
  the suite's agent on the fake CLI, started on a scripted tool call.
- `tool_permissions`: one segment's `ToolPermissions` with the tests' defaults;
  `PermissionsRig`: a rig's CLI side and gate decisions over such permissions.
- `fallback_segment`: what a `SegmentObserver` saw of a segment whose model fell
  back from claude-opus to claude-sonnet-fallback.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from claude_agent_sdk import (
    AssistantMessage,
    HookMatcher,
    ResultMessage,
    SystemMessage,
    TextBlock,
)

from dex_agents.claude._definition import ClaudeCodeToolPermission
from dex_agents.claude._gate import ToolCallGate
from dex_agents.claude._hooks import ToolPermissions
from dex_agents.claude._pending_call import PendingCall
from dex_agents.claude._tools import CustomTool
from dex_agents.claude._usage import SegmentObserver
from dex_agents.session import RunModelContext, ToolPolicy
from dex_agents.session._state import Interrupt
from dex_agents.temporal import SessionClient
from dex_agents.temporal._snapshot import AgentSnapshot
from support.fake_suite_rig import SuiteRig
from support.gate_rig import CliSide


def script_call(tool: str, **arguments: Any) -> str:
    """The fake CLI's script for one call of `tool` with `arguments` as JSON."""
    return f"dex-script: call {tool} {json.dumps(arguments)}"


async def start_idle(sessions: SessionClient, sid: str, message: str) -> AgentSnapshot:
    """Start session `sid` on `message`; its snapshot once it is idle."""
    await sessions.start(sid, initial_message=message)
    return await sessions.wait_for_idle(sid)


async def start_to_interrupt(rig: SuiteRig, sid: str, message: str) -> Interrupt:
    """Start session `sid` on `message`; the one approval it then waits for."""
    await rig.sessions.start(sid, initial_message=message)
    return await rig.interrupt(sid)


def call_events(events: Iterable[Any], event_type: str, tool_call_id: str) -> list[Any]:
    """The events of `event_type` about the tool call `tool_call_id`, in order."""
    return [
        e
        for e in events
        if e.type == event_type and e.data.get("tool_call_id") == tool_call_id
    ]


def tool_permissions(
    context: RunModelContext,
    gate: ToolCallGate,
    tools: dict[str, CustomTool],
    *,
    policies: dict[str, ToolPolicy] | None = None,
    matchers: list[HookMatcher] | None = None,
    permission: ClaudeCodeToolPermission | None = None,
    pending: PendingCall | None = None,
    answered: frozenset[str] = frozenset(),
) -> ToolPermissions:
    """A segment's ToolPermissions on server "tools", unclassified by default;
    without `policies`, only Read has one (a read)."""
    return ToolPermissions(
        context=context,
        gate=gate,
        tools=tools,
        server_name="tools",
        policies=policies or {"Read": ToolPolicy(effect="read")},
        default_effect="unclassified",
        app_matchers=matchers or [],
        permission=permission,
        pending=pending,
        answered=answered,
    )


class PermissionsRig:
    """A rig of one segment's ToolPermissions, gate and served tools: the CLI's
    side against them, and what the gate decided."""

    gate: ToolCallGate
    tools: dict[str, CustomTool]
    permissions: ToolPermissions | None

    @asynccontextmanager
    async def cli(self) -> AsyncIterator[CliSide]:
        """Play the CLI against the permissions and the custom tool server."""
        assert self.permissions is not None
        async with CliSide.for_permissions(
            self.permissions, self.gate, self.tools
        ) as side:
            yield side

    def kind(self, tool_use_id: str) -> str | None:
        """The kind of the gate's decision for `tool_use_id`, None without one."""
        decision = self.gate.decision(tool_use_id)
        return None if decision is None else decision.kind


def fallback_segment(first_answer_model: str) -> tuple[SegmentObserver, ResultMessage]:
    """A segment without a subagent: init model claude-opus, a first answer from
    `first_answer_model`, a second from claude-sonnet-fallback, and a result whose
    model usage names claude-opus and claude-sonnet-fallback. Returns the observer
    that saw the messages and the result."""
    observer = SegmentObserver()
    for message in (
        SystemMessage(subtype="init", data={"model": "claude-opus"}),
        AssistantMessage(
            content=[TextBlock(text="a")], model=first_answer_model, message_id="m1"
        ),
        AssistantMessage(
            content=[TextBlock(text="b")],
            model="claude-sonnet-fallback",
            message_id="m2",
        ),
    ):
        observer.observe(message)
    result = ResultMessage(
        subtype="success",
        duration_ms=1,
        duration_api_ms=1,
        is_error=False,
        num_turns=1,
        session_id="s",
        model_usage={
            "claude-opus": {"provider": "firstParty"},  # pyright: ignore[reportArgumentType]
            "claude-sonnet-fallback": {"provider": "firstParty"},  # pyright: ignore[reportArgumentType]
        },
    )
    return observer, result
