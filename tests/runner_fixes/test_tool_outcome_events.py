"""Every tool outcome is an event: refused calls and calls a cancel stopped.

On the dev server, a real worker and the bundled CLI against the scripted
Messages API. A call the application refuses (its own PreToolUse hook, its
`claude_code_tool_permission`) never reaches the session, and a call that a
`cancel_turn` stops inside the model segment never returns a result: the event
log still says how each one ended.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ToolAnnotations,
    tool,
)
from temporalio.client import Client

from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    ClaudeCodeToolDenial,
    create_claude_agent_session_flow,
)
from dex_agents.session import EventRecord, RunModelContext
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig
from support.processes import cli_processes_in

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="needs /proc"),
]


def _bash(command: str) -> str:
    return f"dex-script: call Bash {json.dumps({'command': command})}"


def _calls(events: list[EventRecord], turn_id: str) -> list[tuple[str, Any, Any]]:
    """The turn's tool call events: (type, tool name, status)."""
    return [
        (e.type, e.data.get("tool_name"), e.data.get("status"))
        for e in events
        if e.turn_id == turn_id and e.type.startswith("tool_call_")
    ]


async def _events_until(
    sessions: SessionClient, session_id: str, kind: str, count: int = 1
) -> list[EventRecord]:
    """The session's events once `count` of type `kind` were written.

    The session publishes its own events (a turn's end) after it went idle.
    """
    async with asyncio.timeout(30):
        while True:
            events = await sessions.events(session_id)
            if sum(e.type == kind for e in events) >= count:
                return events
            await asyncio.sleep(0.05)


async def _gone(cwd: Path) -> None:
    async with asyncio.timeout(20):
        while cli_processes_in(cwd):
            await asyncio.sleep(0.05)


async def test_calls_the_application_refuses_write_their_outcome(
    claude_rig: ClaudeRig, client: Client
) -> None:
    victim = claude_rig.tmp / "victim.txt"
    victim.write_text("keep me")

    async def no_rm(
        hook_input: HookInput, _tool_use_id: str | None, _context: HookContext
    ) -> HookJSONOutput:
        tool_input = cast(Mapping[str, Any], hook_input).get("tool_input") or {}
        command = str(cast(Mapping[str, Any], tool_input).get("command", ""))
        if not command.startswith("rm "):
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "no rm allowed",
            }
        }

    def no_curl(
        _context: RunModelContext, _name: str, tool_input: dict[str, Any]
    ) -> ClaudeCodeToolDenial | None:
        if str(tool_input.get("command", "")).startswith("curl "):
            return ClaudeCodeToolDenial("no curl allowed")
        return None

    def hooked(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        return dataclasses.replace(
            claude_rig.example.options(context),
            hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[no_rm])]},
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=hooked, claude_code_tool_permission=no_curl),
        "RefusingAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "refused-calls"
    rm = f"rm {shlex.quote(str(victim))}"
    curl = "curl http://example.invalid/"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message=_bash(rm))
        snap = await sessions.wait_for_idle(sid)
        assert snap.pending_interrupts == []
        assert snap.turns[0].status == "completed", snap.turns[0].error
        assert "no rm allowed" in snap.turns[0].final_text
        snap = await sessions.send_and_wait(sid, _bash(curl))
        assert snap.pending_interrupts == []
        assert "no curl allowed" in snap.turns[-1].final_text
        events = await _events_until(sessions, sid, "turn_completed", count=2)

    assert victim.read_text() == "keep me"
    for turn_id, command, reason in (
        ("turn-1", rm, "no rm allowed"),
        ("turn-2", curl, "no curl allowed"),
    ):
        assert _calls(events, turn_id) == [
            ("tool_call_started", "Bash", None),
            ("tool_call_finished", "Bash", "rejected"),
        ]
        started, finished = [
            e for e in events if e.turn_id == turn_id and e.type.startswith("tool_")
        ]
        assert started.data["arguments"] == {"command": command}
        assert finished.data["tool_call_id"] == started.data["tool_call_id"]
        assert finished.data["rejection_message"] == reason
    await store.close()


async def test_an_inline_call_a_cancel_stopped_ends_cancelled(
    claude_rig: ClaudeRig, client: Client
) -> None:
    reached = asyncio.Event()
    stopped: list[str] = []

    @tool(
        "slow",
        "Look something up, slowly",
        {"seconds": int},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def slow(args: dict[str, Any]) -> dict[str, Any]:
        reached.set()
        try:
            await asyncio.sleep(args["seconds"])
        except asyncio.CancelledError:
            stopped.append("cancelled")  # the call's task, cancelled with the CLI
            raise
        return {"content": [{"type": "text", "text": "slept"}]}

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=claude_rig.example.options, custom_tools=[slow]),
        "SlowInlineAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "cancelled-inline-call"
    cwd = (claude_rig.tmp / "agents" / sid).resolve()
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call slow {"seconds": 60}'
        )
        async with asyncio.timeout(60):
            await reached.wait()
        assert cli_processes_in(cwd)

        assert await sessions.cancel_turn(sid, reason="too slow")

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        await _gone(cwd)
        events = await _events_until(sessions, sid, "turn_cancelled")

    assert stopped == ["cancelled"]
    ends = [
        (e.type, e.data.get("status"))
        for e in events
        if e.type in ("tool_call_started", "tool_call_finished", "turn_cancelled")
    ]
    assert ends == [
        ("tool_call_started", None),
        ("tool_call_finished", "cancelled"),
        ("turn_cancelled", None),
    ]
    started, finished = [e for e in events if e.type.startswith("tool_call_")]
    assert finished.data["tool_call_id"] == started.data["tool_call_id"]
    assert finished.data["tool_name"] == "slow"
    assert finished.step_execution_id == started.step_execution_id
    assert "cancelled while the call ran" in str(finished.data["rejection_message"])
    await store.close()


async def test_an_approved_bash_a_cancel_stopped_ends_outcome_unknown(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "cancelled-approved-bash"
    cwd = (claude_rig.tmp / "agents" / sid).resolve()
    reached = claude_rig.tmp / "bash.reached"
    command = f"touch {shlex.quote(str(reached))}; sleep 60"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message=_bash(command))
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        async with asyncio.timeout(60):
            while not reached.exists():  # the approved command runs in the CLI
                await asyncio.sleep(0.02)

        assert await sessions.cancel_turn(sid)

        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "cancelled"
        await _gone(cwd)
        events = await _events_until(sessions, sid, "turn_cancelled")

    finished = [e for e in events if e.type == "tool_call_finished"]
    # The approved command was killed midway: it may have acted in part.
    assert [(e.data["tool_name"], e.data["status"]) for e in finished] == [
        ("Bash", "outcome_unknown")
    ]
    assert finished[0].data["tool_call_id"] == interrupt.tool_call_id
    kinds = [e.type for e in events]
    assert kinds.index("tool_call_finished") < kinds.index("turn_cancelled")
    await store.close()
