"""Chat spans of Claude segments carry only what the CLI reported (real CLI, scripted API)."""

from __future__ import annotations

from opentelemetry.trace import SpanKind
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig
from support.tracing_support import span_exporter


async def test_chat_spans_of_answer_read_turn_and_deferred_write(
    claude_rig: ClaudeRig, client: Client
) -> None:
    exporter = span_exporter()
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "claude-tracing"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say hi")
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(
            sid, 'dex-script: call lookup_order {"orderId": "7"}'
        )
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(
            sid, 'dex-script: call create_refund {"orderId": "8"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
    await store.close()
    spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes and s.attributes.get("dex_agents.session_id") == sid
    ]
    by_step = {
        str(s.attributes["dex_agents.step_execution_id"]): s
        for s in spans
        if s.attributes
    }
    assert sorted(by_step) == [
        "turn-1/run_model/1",
        "turn-2/run_model/1",
        "turn-3/run_model/1",
        "turn-3/run_model/2",
    ]
    answer = by_step["turn-1/run_model/1"]
    assert answer.kind == SpanKind.CLIENT
    attrs = dict(answer.attributes or {})
    assert attrs["gen_ai.provider.name"] == "anthropic"
    assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"]
    assert str(attrs["gen_ai.response.id"]).startswith("msg_mock_")
    assert attrs["gen_ai.response.finish_reasons"] == ("end_turn",)
    assert int(attrs["gen_ai.usage.input_tokens"]) > 0  # pyright: ignore[reportArgumentType]
    read_turn = by_step["turn-2/run_model/1"]
    assert read_turn.kind == SpanKind.INTERNAL
    read_attrs = dict(read_turn.attributes or {})
    assert "gen_ai.usage.input_tokens" not in read_attrs
    assert "gen_ai.response.id" not in read_attrs
    deferred = by_step["turn-3/run_model/1"]
    assert deferred.kind == SpanKind.CLIENT
    deferred_attrs = dict(deferred.attributes or {})
    assert deferred_attrs["gen_ai.response.finish_reasons"] == ("tool_use",)
    assert by_step["turn-3/run_model/2"].kind == SpanKind.CLIENT
