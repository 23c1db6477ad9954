"""The README's example, on the dev server, the real bundled CLI and the scripted API."""

from __future__ import annotations

from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig


async def test_support_agent_example(claude_rig: ClaudeRig, client: Client) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "session-42"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid,
            initial_message='Is order 7 broken? dex-script: call lookup_order {"orderId": "7"}',
        )
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].status == "completed", snap.turns[0].error
        assert "arrived broken" in snap.turns[0].final_text
        assert snap.pending_interrupts == []

        await sessions.send_user_message(
            sid, 'Refund it. dex-script: call create_refund {"orderId": "7"}'
        )
        snap = await sessions.wait_for_idle(sid)
        (interrupt,) = snap.pending_interrupts
        assert (interrupt.tool_name, interrupt.effect) == (
            "create_refund",
            "non_idempotent_write",
        )
        assert interrupt.arguments == {"orderId": "7"}
        assert claude_rig.example.refunds() == []
        for pending in snap.pending_interrupts:
            assert await sessions.resolve_interrupt(
                sid, pending.interrupt_id, approved=True
            )
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[1].status == "completed", snap.turns[1].error
        assert "refunded order 7" in snap.turns[1].final_text
        assert claude_rig.example.refunds() == [
            ("7", f"{sid}/turn-2/{interrupt.tool_call_id}")
        ]

        await sessions.send_user_message(sid, "Thanks. dex-script: say you're welcome")
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[2].final_text == "said: you're welcome"
        assert snap.usage.model_calls >= 5
        kinds = {str(m.item.get("kind")) for m in snap.messages}
        assert kinds == {"user_prompt", "claude_transcript"}
    await store.close()
