"""Edit-and-approve and expiry through the real bundled CLI, on the dev server."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client

from dex_agents import AgentSessionOptions, InvalidEditError, ToolPolicy
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(180)

NOTE = "A person edited this call's input before approving it"


def _requests(rig: ClaudeRig) -> list[str]:
    """Every model request's messages, as JSON text."""
    return [
        json.dumps(r.body.get("messages"))
        for r in rig.api.requests
        if isinstance(r.body, dict)
    ]


def _tool_results(rig: ClaudeRig) -> list[dict[str, Any]]:
    """The tool results of the last model request."""
    last = [r.body for r in rig.api.requests if isinstance(r.body, dict)][-1]
    results: list[dict[str, Any]] = []
    messages: list[Any] = last["messages"]  # pyright: ignore[reportAssignmentType]
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            results += [b for b in content if b.get("type") == "tool_result"]
    return results


def _text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [])


async def test_an_edited_refund_runs_once_with_the_edit_through_the_real_cli(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-edited-refund"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        with pytest.raises(InvalidEditError) as refused:
            await sessions.resolve_interrupt(
                sid, interrupt.interrupt_id, approved=True, edited_input={"orderId": 8}
            )
        assert refused.value.field == "orderId"
        assert (await sessions.snapshot(sid)).status == "waiting_for_approval"

        assert await sessions.resolve_interrupt(
            sid,
            interrupt.interrupt_id,
            approved=True,
            resolved_by="ana",
            edited_input={"orderId": "8"},
        )
        snap = await sessions.wait_for_idle(sid)

        assert snap.turns[0].status == "completed", snap.turns[0].error
        key = f"{sid}/turn-1/{interrupt.tool_call_id}"
        assert claude_rig.example.refunds() == [("8", key)]
        (record,) = snap.turns[0].tool_calls
        assert record.arguments == {"orderId": "8"}
        assert record.edit is not None
        assert (record.edit.original_arguments, record.edit.edited_by) == (
            {"orderId": "7"},
            "ana",
        )
        (result,) = _tool_results(claude_rig)
        assert _text(result).startswith("refunded order 8")
        assert NOTE in _text(result)
    await store.close()


async def test_an_edited_bash_command_is_the_one_that_runs(
    claude_rig: ClaudeRig, client: Client
) -> None:
    flow = claude_rig.example.flow
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-edited-bash"
    asked = {"command": "echo asked-by-the-model", "description": "greet"}
    edited = {"command": "echo edited-$((6*7))", "description": "greet"}
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message=f"dex-script: call Bash {json.dumps(asked)}"
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert (interrupt.tool_name, interrupt.arguments) == ("Bash", asked)
        with pytest.raises(InvalidEditError) as refused:
            await sessions.resolve_interrupt(
                sid, interrupt.interrupt_id, approved=True, edited_input={"cmd": "ls"}
            )
        assert refused.value.field == "command"

        assert await sessions.resolve_interrupt(
            sid,
            interrupt.interrupt_id,
            approved=True,
            resolved_by="ana",
            edited_input=edited,
        )
        snap = await sessions.wait_for_idle(sid)

        assert snap.turns[0].status == "completed", snap.turns[0].error
        (result,) = _tool_results(claude_rig)
        assert "edited-42" in _text(result)
        assert "asked-by-the-model" not in _text(result)
        assert "done: edited-42" in snap.turns[0].final_text
        (record,) = snap.turns[0].tool_calls
        assert record.arguments == edited
        assert record.edit is not None and record.edit.original_arguments == asked
        # The model was told a person edited the command.
        assert NOTE in _requests(claude_rig)[-1]
    await store.close()


async def test_an_expired_approval_reaches_the_model_as_an_expiry(
    claude_rig: ClaudeRig, client: Client
) -> None:
    example = claude_rig.example
    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=example.options,
            custom_tools=[example.lookup_order, example.create_refund],
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        ),
        "ExpiringSupportAgent",
        AgentSessionOptions(interrupt_deadline=timedelta(seconds=1)),
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-expired-refund"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call create_refund {"orderId": "7"}'
        )
        async with asyncio.timeout(60):
            async for event in sessions.follow(sid):
                if event.type in ("turn_completed", "turn_failed"):
                    break
        snap = await sessions.wait_for_idle(sid)
        assert [r.status for r in snap.turns[0].tool_calls] == ["expired"]
        assert example.refunds() == []
        # The model's next request carried the expiry, not a person's refusal.
        (result,) = _tool_results(claude_rig)
        assert "its approval expired" in _text(result)
        assert "rejected" not in _text(result)
    await store.close()
