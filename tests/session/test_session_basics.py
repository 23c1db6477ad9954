"""A session on the real dev server: turns, inline reads, approvals, rejections."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import AgentSessionOptions, UnknownInterruptError, UserError
from dex_agents.temporal import SessionClient, create_agent_session_flow
from dex_agents.testing import ScriptedRunner
from dex_agents.testing._ledger_flow import ledger_flow
from support.session_harness import Harness, ledger_config


async def test_say_turn_completes_and_snapshot_holds_messages(harness: Harness) -> None:
    sid = harness.session_id()
    assert await harness.sessions.start(sid, initial_message="say hello")
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.status == "idle"
    assert [t.status for t in snap.turns] == ["completed"]
    assert snap.turns[0].final_text == "said: hello"
    assert [(m.role, m.text) for m in snap.messages] == [
        ("user", "say hello"),
        ("assistant", "said: hello"),
    ]
    assert snap.usage.model_calls == 1


async def test_start_is_idempotent(harness: Harness) -> None:
    sid = harness.session_id()
    assert await harness.sessions.start(sid, initial_message="say one")
    await harness.sessions.wait_for_idle(sid)
    assert await harness.sessions.start(sid, initial_message="say two")
    snap = await harness.sessions.wait_for_idle(sid)
    assert [t.final_text for t in snap.turns] == ["said: one", "said: two"]


async def test_read_tool_runs_inline_without_approval(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call lookup_order {"orderId": "7"}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.pending_interrupts == []
    assert snap.turns[0].final_text == "done: order 7: arrived broken"
    assert harness.ledger.count("lookup_order") == 1


async def test_rejected_write_never_runs_and_runner_sees_message(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "7"}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.status == "waiting_for_approval"
    (interrupt,) = snap.pending_interrupts
    assert (interrupt.tool_name, interrupt.effect) == (
        "create_refund",
        "non_idempotent_write",
    )
    assert interrupt.arguments == {"orderId": "7"}
    assert await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=False, rejection_message="not today"
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == (
        "done: create_refund=The user rejected this call: not today"
    )
    assert harness.ledger.count("create_refund_started") == 0
    # A repeat returns False and changes nothing.
    assert not await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    again = await harness.sessions.wait_for_idle(sid)
    assert [t.tool_calls for t in again.turns] == [t.tool_calls for t in snap.turns]
    assert harness.ledger.count("create_refund_started") == 0


async def test_unknown_interrupt_is_a_clear_error(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="say hi")
    before = await harness.sessions.wait_for_idle(sid)
    with pytest.raises(UnknownInterruptError, match="intr_nope"):
        await harness.sessions.resolve_interrupt(sid, "intr_nope", approved=True)
    after = await harness.sessions.snapshot(sid)
    assert after.version == before.version


async def test_approved_write_runs_once_with_idempotency_key(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid, initial_message='call create_refund {"orderId": "9"}'
    )
    snap = await harness.sessions.wait_for_idle(sid)
    (interrupt,) = snap.pending_interrupts
    assert await harness.sessions.resolve_interrupt(
        sid, interrupt.interrupt_id, approved=True
    )
    snap = await harness.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: create_refund=refunded order 9"
    (row,) = harness.ledger.entries("create_refund")
    assert row["key"] == f"{sid}/turn-1/{interrupt.tool_call_id}"


async def test_later_call_of_a_reply_is_skipped_after_a_rejection(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid,
        initial_message='call create_refund {"orderId": "1"} && call create_refund {"orderId": "2"}',
    )
    (first,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
    assert first.arguments == {"orderId": "1"}
    await harness.sessions.resolve_interrupt(sid, first.interrupt_id, approved=False)
    snap = await harness.sessions.wait_for_idle(sid)
    assert [r.status for r in snap.turns[0].tool_calls] == ["rejected", "skipped"]
    assert harness.ledger.count("create_refund_started") == 0


async def test_two_approved_writes_of_one_reply_run_in_order(harness: Harness) -> None:
    sid = harness.session_id()
    await harness.sessions.start(
        sid,
        initial_message='call create_refund {"orderId": "1"} && call create_refund {"orderId": "2"}',
    )
    for _ in range(2):
        (pending,) = (await harness.sessions.wait_for_idle(sid)).pending_interrupts
        await harness.sessions.resolve_interrupt(
            sid, pending.interrupt_id, approved=True
        )
    snap = await harness.sessions.wait_for_idle(sid)
    assert [r.status for r in snap.turns[0].tool_calls] == ["finished", "finished"]
    assert [e["order_id"] for e in harness.ledger.entries("create_refund")] == [
        "1",
        "2",
    ]


async def test_empty_user_message_is_a_clear_error_that_writes_nothing(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    before = await harness.sessions.wait_for_idle(sid)
    with pytest.raises(UserError, match="non-empty string"):
        await harness.sessions.send_user_message(sid, "   ")
    assert (await harness.sessions.snapshot(sid)).version == before.version


def test_compaction_is_refused_by_a_runner_that_cannot_compact() -> None:
    with pytest.raises(UserError, match="cannot compact"):
        create_agent_session_flow(
            ScriptedRunner(), "NoCompaction", AgentSessionOptions(compaction=object())
        )


def test_a_scripted_runner_refuses_a_schema_for_a_tool_it_does_not_have() -> None:
    async def lookup(arguments: object, execution: object) -> str:
        return "found"

    with pytest.raises(UserError, match=r"names \['refnud'\], which are not in"):
        ScriptedRunner({"lookup": lookup}, input_schemas={"refnud": {"type": "object"}})


async def test_long_answers_are_clipped_in_the_summary_and_whole_in_messages(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    long = "x" * 3000
    await harness.sessions.start(sid, initial_message=f"say {long}")
    snap = await harness.sessions.wait_for_idle(sid)
    assert len(snap.turns[0].final_text) == 1000
    assert snap.turns[0].final_text.endswith("…")
    assert snap.messages[-1].text == f"said: {long}"


async def test_a_session_id_held_by_another_flow_type_is_a_clear_error(
    harness: Harness, client: Client, tmp_path: Path
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid, initial_message="say first")
    await harness.sessions.wait_for_idle(sid)
    other = ledger_flow(ledger_config(tmp_path, f"Other{uuid.uuid4().hex[:8]}"))
    # Without the check this would wait forever: no worker serves the other type.
    async with asyncio.timeout(20):
        with pytest.raises(UserError, match=f"session '{sid}' already exists as a"):
            await SessionClient(client, other).start(sid, initial_message="hi")
    snap = await harness.sessions.wait_for_idle(sid)
    assert [t.final_text for t in snap.turns] == ["said: first"]
