"""An inline call of a model segment attempt that failed ends `outcome_unknown`.

A call that runs inside the segment has a `tool_call_started`; when the
attempt fails midway (its runner raised, it overran `run_model_limit`) the
call's result never comes. Its `tool_call_finished` says `outcome_unknown` and
why, before the turn's end, so `show`, the web page and any reader following
the events stop showing it as running. (A worker killed midway: see
`tests/crashes/test_crashes.py`, where the next attempt ends the call.)
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ToolAnnotations, tool
from temporalio.client import Client

from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.session import EventRecord, ToolCallFinishedEvent
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.testing import ScriptedRunner
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(180)


def _ends(events: list[EventRecord]) -> list[tuple[str, Any]]:
    return [
        (e.type, e.data.get("status"))
        for e in events
        if e.type in ("tool_call_started", "tool_call_finished", "turn_failed")
    ]


async def _events_until_failed(
    sessions: SessionClient, session_id: str
) -> list[EventRecord]:
    """The session's events once its `turn_failed` was written (it publishes after idle)."""
    async with asyncio.timeout(30):
        while True:
            events = await sessions.events(session_id)
            if any(e.type == "turn_failed" for e in events):
                return events
            await asyncio.sleep(0.05)


async def test_a_read_whose_segment_raised_ends_outcome_unknown_with_the_error(
    client: Client, tmp_path: Path
) -> None:
    async def lookup(arguments: object, execution: object) -> str:
        raise RuntimeError("the orders database went away")

    flow = create_agent_session_flow(
        ScriptedRunner({"lookup": lookup}),
        f"RaisingRead{uuid.uuid4().hex[:8]}",
        AgentSessionOptions(
            tool_policies={"lookup": ToolPolicy(effect="read")},
            run_model_attempts=1,
        ),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "raising-read"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message='call lookup {"orderId": "7"}')
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "failed"
        events = await _events_until_failed(sessions, sid)

    assert _ends(events) == [
        ("tool_call_started", None),
        ("tool_call_finished", "outcome_unknown"),
        ("turn_failed", None),
    ]
    started, finished = [e for e in events if e.type.startswith("tool_call_")]
    payload = finished.payload()
    assert isinstance(payload, ToolCallFinishedEvent)
    assert payload.tool_call_id == started.data["tool_call_id"]
    assert payload.tool_name == "lookup"
    assert payload.error is not None
    assert "the model segment failed while the call ran" in payload.error
    assert "the orders database went away" in payload.error
    await store.close()


async def test_a_tool_of_a_segment_that_overran_its_limit_ends_outcome_unknown(
    claude_rig: ClaudeRig, client: Client
) -> None:
    reached = asyncio.Event()

    @tool(
        "slow",
        "Look something up, slowly",
        {"seconds": int},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def slow(args: dict[str, Any]) -> dict[str, Any]:
        reached.set()
        await asyncio.sleep(args["seconds"])
        return {"content": [{"type": "text", "text": "slept"}]}

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=claude_rig.example.options, custom_tools=[slow]),
        "OverrunningAgent",
        AgentSessionOptions(run_model_limit=timedelta(seconds=4), run_model_attempts=1),
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "overrunning-segment"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call slow {"seconds": 60}'
        )
        async with asyncio.timeout(60):
            await reached.wait()
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "failed"
        assert "run_model_limit" in (snap.turns[0].error or "")
        events = await _events_until_failed(sessions, sid)

    assert _ends(events) == [
        ("tool_call_started", None),
        ("tool_call_finished", "outcome_unknown"),
        ("turn_failed", None),
    ]
    finished = next(e for e in events if e.type == "tool_call_finished")
    assert finished.data["tool_name"] == "slow"
    # Ended by the attempt (its own timer) or by the turn's publish (Temporal's
    # start-to-close timer, whichever fired first): both say why.
    assert "exceeded `run_model_limit` (0:00:04)" in str(finished.data["error"])
    await store.close()
