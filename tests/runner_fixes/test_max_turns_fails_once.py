"""A segment that reaches `max_turns` fails its turn once, and the log says what comes next.

On the dev server, a real worker and the bundled CLI against the scripted
Messages API. The CLI stops at `ClaudeAgentOptions.max_turns` with an
`error_max_turns` result; another attempt makes the same model calls and stops
at the same turn, so a rerun only runs the segment's inline tools again. The
worker's log line for a failed segment must say whether another attempt
follows: the last one of a retryable failure does not.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ToolAnnotations, tool
from temporalio.client import Client

from dex_agents import AgentSessionOptions
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(180)

_ACTIVITY_LOGGER = "temporalio.activity"


def _segment_lines(caplog: pytest.LogCaptureFixture, session_id: str) -> list[str]:
    """The worker's lines for the failed model segments of `session_id`, in order."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == _ACTIVITY_LOGGER
        and r.getMessage().startswith(f"model segment of {session_id},")
    ]


async def test_a_segment_that_reaches_max_turns_fails_its_turn_without_a_rerun(
    claude_rig: ClaudeRig, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    looked_up: list[dict[str, Any]] = []

    @tool(
        "lookup",
        "Look up a product",
        {"sku": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def lookup(args: dict[str, Any]) -> dict[str, Any]:
        looked_up.append(args)  # an inline read: it runs inside the segment
        return {"content": [{"type": "text", "text": f"{args['sku']}: in stock"}]}

    def one_turn(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        return dataclasses.replace(claude_rig.example.options(context), max_turns=1)

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=one_turn, custom_tools=[lookup]),
        "MaxTurnsAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "max-turns-once"
    caplog.set_level(logging.WARNING, logger=_ACTIVITY_LOGGER)
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call lookup {"sku": "A"}'
        )
        snap = await sessions.wait_for_idle(sid)

    (turn,) = snap.turns
    assert turn.status == "failed"
    assert turn.error is not None
    assert "reached `max_turns` (1)" in turn.error
    assert "raise `max_turns` in the agent's ClaudeAgentOptions" in turn.error
    assert "starts a new count" in turn.error
    # One attempt: the read ran once, and nothing reran.
    assert looked_up == [{"sku": "A"}]
    assert turn.reruns == 0
    events = await sessions.events(sid)
    assert [e for e in events if e.type == "segment_rerun"] == []
    (line,) = _segment_lines(caplog, sid)
    assert "attempt 1 failed (the turn fails: another attempt would fail" in line
    await store.close()


async def test_the_last_attempts_log_line_does_not_promise_another(
    claude_rig: ClaudeRig, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A retryable failure on the last attempt: the line says the turn fails."""

    def broken(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        options = claude_rig.example.options(context)
        # The CLI refuses a flag it does not know and exits 1: a retryable failure.
        return dataclasses.replace(
            options, extra_args={**options.extra_args, "dex-no-such-flag": None}
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=broken),
        "TwoAttemptsAgent",
        AgentSessionOptions(run_model_attempts=2),
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "last-attempt-line"
    caplog.set_level(logging.WARNING, logger=_ACTIVITY_LOGGER)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say hi")
        snap = await sessions.wait_for_idle(sid)

    assert snap.turns[0].status == "failed"
    assert "unknown option '--dex-no-such-flag'" in (snap.turns[0].error or "")
    first, last = _segment_lines(caplog, sid)
    assert "attempt 1 failed (it is tried again)" in first
    assert "attempt 2 failed (the turn fails: no attempt is left)" in last
    assert "tried again" not in last
    await store.close()


async def test_a_parked_attempts_line_says_the_segment_runs_again_cold(
    claude_rig: ClaudeRig, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A parked segment's Step has one attempt; the workflow then runs it cold."""
    built: list[str] = []

    def broken_after_the_first(
        context: ClaudeAgentOptionsContext,
    ) -> ClaudeAgentOptions:
        options = claude_rig.example.options(context)
        built.append(context.turn_id)
        if len(built) == 1:
            return options  # the first segment defers the refund
        # Every later segment (the parked resume, then the cold ones) cannot start.
        return dataclasses.replace(
            options, extra_args={**options.extra_args, "dex-no-such-flag": None}
        )

    example = claude_rig.example
    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=broken_after_the_first,
            custom_tools=[example.lookup_order, example.create_refund],
        ),
        "ParkedFailureAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "parked-attempt-line"
    caplog.set_level(logging.WARNING, logger=_ACTIVITY_LOGGER)
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        snap = await sessions.wait_for_idle(sid)

    assert snap.turns[0].status == "failed"
    lines = _segment_lines(caplog, sid)
    assert [line.split(" failed (")[1].split(")")[0] for line in lines] == [
        "it is tried again",  # the parked Step's one attempt: cold comes next
        "it is tried again",
        "the turn fails: no attempt is left",
    ]
    # The first is the parked Step's (the logger names its activity).
    assert "attempt 1 failed" in lines[0]
    assert "'activity_id': 'turn-1/run_model/2/parked'" in lines[0]
    assert "attempt 3 failed" in lines[2]
    await store.close()
