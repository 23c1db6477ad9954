"""A spend limit that pauses the session and asks for a new one, on the dev server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from dex_agents import (
    AgentSessionOptions,
    InvalidArgumentError,
)
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import (
    SessionClient,
    create_worker,
)
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_argv_recorder import recorded_runs, recording_cli
from support.custom_tools_agent import audit_rig
from support.fake_suite_rig import SuiteEnv
from support.session_harness import RecordingRunner, flow_around, ledger_config

pytestmark = pytest.mark.timeout(120)


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def sessions(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[SessionClient]:
    """A ledger flow whose sessions may spend 0.0015 USD (a scripted segment: 0.001)."""
    flow = ledger_flow(ledger_config(tmp_path, flow_type, spend_limit=0.0015))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        yield SessionClient(client, flow, store)
    await store.close()


async def test_a_session_that_reaches_its_limit_waits_and_goes_on_under_a_new_one(
    sessions: SessionClient,
) -> None:
    sid = "budget-pauses-and-goes-on"
    await sessions.start(sid, initial_message="say one")
    await sessions.send_and_wait(sid, "say two")  # 0.002 USD spent now

    snap = await sessions.send_and_wait(sid, "say three")

    assert snap.status == "budget_reached"
    (interrupt,) = snap.pending_interrupts
    assert (interrupt.kind, interrupt.tool_name) == ("budget", "spend_limit")
    assert interrupt.arguments == {"spent_usd": 0.002, "spend_limit_usd": 0.0015}
    with pytest.raises(InvalidArgumentError) as too_low:
        await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True, new_spend_limit=0.001
        )
    assert too_low.value.argument == "new_spend_limit"
    assert "0.0020 USD spent" in str(too_low.value)
    with pytest.raises(InvalidArgumentError):
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
    assert (await sessions.snapshot(sid)).status == "budget_reached"

    assert await sessions.resolve_interrupt(
        sid,
        interrupt.interrupt_id,
        approved=True,
        new_spend_limit=0.01,
        resolved_by="ana",
    )

    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[-1].status == "completed"
    assert snap.turns[-1].final_text == "said: three"
    assert snap.usage.cost_usd == pytest.approx(0.003)
    events = await sessions.events(sid)
    (resolved,) = [e for e in events if e.type == "interrupt_resolved"]
    assert (resolved.data["new_spend_limit"], resolved.data["resolved_by"]) == (
        0.01,
        "ana",
    )
    # The new limit holds for the rest of the session.
    snap = await sessions.send_and_wait(sid, "say four")
    assert snap.turns[-1].final_text == "said: four"


async def test_a_declined_budget_fails_the_turn_and_the_session_waits_again(
    sessions: SessionClient,
) -> None:
    sid = "budget-declined"
    await sessions.start(sid, initial_message="say one")
    await sessions.send_and_wait(sid, "say two")
    (interrupt,) = (await sessions.send_and_wait(sid, "say three")).pending_interrupts

    assert await sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=False, rejection_message="enough"
    )

    snap = await sessions.wait_for_idle(sid)
    assert snap.turns[-1].status == "failed"
    assert "spend limit reached" in (snap.turns[-1].error or "")
    assert "enough" in (snap.turns[-1].error or "")
    # The next message meets the same limit: it asks again.
    snap = await sessions.send_and_wait(sid, "say four")
    assert snap.status == "budget_reached"


async def test_row146_the_spend_limit_stops_a_turn_before_its_resumed_segment(
    suite: SuiteEnv,
) -> None:
    """Row 146: the limit is checked before every segment: the deferring segment
    alone goes over it, so after the approved call the resumed segment never runs
    and the turn fails (the first segment itself overshot; usage arrives at its end)."""
    script, log = recording_cli(suite.tmp_path)
    async with audit_rig(
        suite.client,
        flow_type=suite.flow_type,
        base=suite.tmp_path,
        session_options=AgentSessionOptions(spend_limit=0.000001),
        cli_path=script,
    ) as rig:
        sid = "audit-spend-limit-per-segment"
        await rig.sessions.start(
            sid, initial_message='dex-script: call audit_refund {"orderId": "9"}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.status == "waiting_for_approval"
        # One segment ran and went over the limit; the turn goes on to its call.
        assert snap.usage.cost_usd > 0.000001
        assert snap.usage.model_calls == 1
        assert len(recorded_runs(log)) == 1
        (interrupt,) = snap.pending_interrupts
        assert await rig.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await rig.sessions.wait_for_idle(sid)
        # The resumed segment would start over the limit: the session asks first.
        assert snap.status == "budget_reached"
        (budget,) = snap.pending_interrupts
        assert await rig.sessions.resolve_interrupt(
            sid, budget.interrupt_id, approved=False
        )
        snap = await rig.sessions.wait_for_idle(sid)
        turn = snap.turns[0]
        assert turn.status == "failed"
        assert "spend limit reached" in (turn.error or "")
        # The approved call ran in its Step; the resumed segment never started.
        assert [(r.tool_name, r.status) for r in turn.tool_calls] == [
            ("audit_refund", "finished")
        ]
        assert rig.ledger.count("audit_refund") == 1
        assert len(recorded_runs(log)) == 1
        assert snap.usage.model_calls == 1
        assert turn.final_text == ""
        events = await rig.sessions.events(sid)
        assert not [e for e in events if e.step_execution_id == "turn-1/run_model/2"]


async def test_spend_limit_failure_says_how_to_continue(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = ledger_config(tmp_path, flow_type)
    runner = RecordingRunner(config)
    flow = flow_around(tmp_path, flow_type, runner, spend_limit=0.0015)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c26-spend", initial_message="say one")
        await sessions.wait_for_idle("audit-eng-c26-spend")
        await sessions.send_user_message("audit-eng-c26-spend", "say two")
        await sessions.wait_for_idle("audit-eng-c26-spend")
        await sessions.send_user_message("audit-eng-c26-spend", "say three")
        (budget,) = (
            await sessions.wait_for_idle("audit-eng-c26-spend")
        ).pending_interrupts
        await sessions.resolve_interrupt(
            "audit-eng-c26-spend", budget.interrupt_id, approved=False
        )
        snap = await sessions.wait_for_idle("audit-eng-c26-spend")
        events = await sessions.events("audit-eng-c26-spend")
    await store.close()
    expected = (
        "spend limit reached: 0.0020 USD of 0.0015 USD (a person declined to raise "
        "it); answer the next spend-limit approval with a new limit, or raise "
        "`spend_limit`, to continue"
    )
    assert [t.status for t in snap.turns] == ["completed", "completed", "failed"]
    assert snap.turns[2].error == expected
    # The segment never started: the limit is checked before the Step.
    assert [a for a, _ in runner.attempts] == [
        "turn-1/run_model/1",
        "turn-2/run_model/1",
    ]
    assert [e.data["error"] for e in events if e.type == "turn_failed"] == [expected]
