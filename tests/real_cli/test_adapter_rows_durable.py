"""Adapter rows of docs/spec-coverage.md proved on the dev server (fake CLI, in-process worker).

Rows 55, 70, 76 and 242; the agent is `adapter_rows_agent`.
"""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.trace import SpanKind
from temporalio.client import Client

from support.adapter_rows_agent import (
    FORBIDDEN_PREFIX,
    RUN_MODEL_ATTEMPTS,
    TOOL_ATTEMPTS,
    rows_agent,
)
from support.tracing_support import span_exporter


async def test_row55_a_forbidden_option_fails_the_turn_without_a_retry(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    """Row 55: the TypeError of `bypassPermissions` fails the turn after one attempt."""
    exporter = span_exporter()
    async with rows_agent(client, flow_type, tmp_path) as agent:
        sid = f"{FORBIDDEN_PREFIX}bypass"
        await agent.sessions.start(sid, initial_message="dex-script: say hi")
        snap = await agent.sessions.wait_for_idle(sid)
        [turn] = snap.turns
        assert turn.status == "failed"
        assert turn.error is not None and "permission_mode" in turn.error
        assert "bypassPermissions" in turn.error
        assert RUN_MODEL_ATTEMPTS > 1
        assert [(c.turn_id, c.attempt) for c in agent.attempts_of(sid)] == [
            ("turn-1", 1)
        ]
        # The session goes on: a later turn of an allowed session still answers.
        ok = "row55-allowed"
        await agent.sessions.start(ok, initial_message="dex-script: say hi")
        answered = await agent.sessions.wait_for_idle(ok)
        assert answered.turns[0].final_text == "said: hi"
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("dex_agents.session_id") == sid
    ]
    assert [dict(s.attributes or {})["dex_agents.attempt"] for s in spans] == [1]
    assert not spans[0].status.is_ok


async def test_row70_an_approved_custom_read_runs_in_its_call_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    """Row 70: `requires_approval` on a read: it waits, then runs in CallTool."""
    async with rows_agent(client, flow_type, tmp_path) as agent:
        sid = "approved-read"
        await agent.sessions.start(
            sid,
            initial_message='dex-script: call inspect_order {"orderId": "7", '
            '"fail_first": true}',
        )
        snap = await agent.sessions.wait_for_idle(sid)
        assert snap.status == "waiting_for_approval"
        [interrupt] = snap.pending_interrupts
        assert (interrupt.tool_name, interrupt.effect) == ("inspect_order", "read")
        # Not run inline: nothing ran before the approval.
        assert agent.runs_of("inspect_order") == []
        assert await agent.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await agent.sessions.wait_for_idle(sid)
        [record] = snap.turns[0].tool_calls
        assert (record.status, record.output) == ("finished", "order 7: inspected")
        assert record.attempts == 2
        assert snap.turns[0].final_text == "done: order 7: inspected"
        runs = agent.runs_of("inspect_order")
        key = f"{sid}/turn-1/{interrupt.tool_call_id}"
        # Both runs were attempts of one retried tool Step (CallTool), under one key;
        # a single-attempt Step would have recorded outcome_unknown after the first.
        assert [
            (r.execution.attempt, r.execution.idempotency_key)
            for r in runs
            if r.execution is not None
        ] == [(1, key), (2, key)]
        assert len(runs) == 2


async def test_row76_a_throwing_idempotent_write_retries_then_is_outcome_unknown(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    """Row 76: an idempotent_write that throws runs `tool_attempts` times."""
    async with rows_agent(client, flow_type, tmp_path) as agent:
        sid = "idempotent-throws"
        await agent.sessions.start(
            sid, initial_message='dex-script: call sync_crm {"account": "a"}'
        )
        snap = await agent.sessions.wait_for_idle(sid)
        [record] = snap.turns[0].tool_calls
        assert (record.tool_name, record.status) == ("sync_crm", "outcome_unknown")
        assert record.attempts == 3
        runs = agent.runs_of("sync_crm")
        key = f"{sid}/turn-1/{record.tool_call_id}"
        assert [
            (r.execution.attempt, r.execution.idempotency_key)
            for r in runs
            if r.execution is not None
        ] == [(n, key) for n in range(1, TOOL_ATTEMPTS + 1)]
        assert len(runs) == TOOL_ATTEMPTS
        assert "The outcome of sync_crm is unknown" in snap.turns[0].final_text
        assert snap.turns[0].status == "completed"


async def test_row76_a_throwing_single_attempt_write_is_outcome_unknown_at_once(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    """Row 76: a non_idempotent_write that throws is never retried."""
    async with rows_agent(client, flow_type, tmp_path) as agent:
        sid = "single-attempt-throws"
        await agent.sessions.start(
            sid, initial_message='dex-script: call charge_card {"amount": 5}'
        )
        snap = await agent.sessions.wait_for_idle(sid)
        [interrupt] = snap.pending_interrupts
        assert interrupt.effect == "non_idempotent_write"
        assert await agent.sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True
        )
        snap = await agent.sessions.wait_for_idle(sid)
        [record] = snap.turns[0].tool_calls
        assert (record.tool_name, record.status) == ("charge_card", "outcome_unknown")
        assert record.attempts == 1
        runs = agent.runs_of("charge_card")
        assert len(runs) == 1
        assert runs[0].execution is not None and runs[0].execution.attempt == 1
        assert "The outcome of charge_card is unknown" in snap.turns[0].final_text
        assert snap.turns[0].status == "completed"


SUBAGENT = {
    "description": "sub",
    "prompt": "say sub",
    "subagent_type": "general-purpose",
}


async def test_row242_chat_span_of_a_segment_with_a_subagent_call(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    """Row 242: a subagent's calls drop the request model and provider from the span."""
    exporter = span_exporter()
    async with rows_agent(client, flow_type, tmp_path) as agent:
        plain, sub = "plain-answer", "with-subagent"
        await agent.sessions.start(plain, initial_message="dex-script: say hi")
        await agent.sessions.wait_for_idle(plain)
        await agent.sessions.start(
            sub, initial_message=f"dex-script: call Agent {json.dumps(SUBAGENT)}"
        )
        snap = await agent.sessions.wait_for_idle(sub)
        assert snap.turns[0].final_text == "done: said: sub"
        assert snap.turns[0].usage.model_calls == 3
    spans = {
        str((s.attributes or {})["dex_agents.session_id"]): s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("dex_agents.session_id") in (plain, sub)
    }
    answer = dict(spans[plain].attributes or {})
    assert spans[plain].kind == SpanKind.CLIENT
    assert answer["gen_ai.request.model"]
    assert answer["gen_ai.provider.name"] == "anthropic"
    span = spans[sub]
    attrs = dict(span.attributes or {})
    assert attrs["dex_agents.step_execution_id"] == "turn-1/run_model/1"
    assert span.kind == SpanKind.INTERNAL
    assert span.name == "chat"
    for absent in (
        "gen_ai.request.model",
        "gen_ai.provider.name",
        "gen_ai.response.model",
        "gen_ai.response.id",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
    ):
        assert absent not in attrs, absent
    assert attrs["gen_ai.operation.name"] == "chat"
