"""A deferred custom call whose input fails its tool's schema never waits for a person.

On the dev server, a real worker and the bundled CLI against the scripted
Messages API. An inline call's input is checked against its tool's JSON Schema
before the handler runs; a call that would defer (a write that needs approval)
gets the same check before its interrupt opens: a person must not approve an
input the tool refuses, and the model reads the validation error at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import tool
from temporalio.client import Client

from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(180)

_SKU_PATTERN = "^[A-Z]{3}-[0-9]+$"


async def test_a_deferred_call_that_fails_its_schema_is_denied_before_any_approval(
    claude_rig: ClaudeRig, client: Client
) -> None:
    placed: list[dict[str, Any]] = []

    @tool(
        "place_order",
        "Place an order",
        {
            "type": "object",
            "properties": {"sku": {"type": "string", "pattern": _SKU_PATTERN}},
            "required": ["sku"],
        },
    )
    async def place_order(args: dict[str, Any]) -> dict[str, Any]:
        placed.append(args)
        return {"content": [{"type": "text", "text": f"placed {args['sku']}"}]}

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=claude_rig.example.options, custom_tools=[place_order]
        ),
        "SchemaAgent",
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "deferred-schema"
    problem = f"Input validation error: 'bad' does not match '{_SKU_PATTERN}'"
    async with create_worker(client, [flow], store=store):
        await sessions.start(
            sid, initial_message='dex-script: call place_order {"sku": "bad"}'
        )
        snap = await sessions.wait_for_idle(sid)
        assert snap.pending_interrupts == []
        (turn,) = snap.turns
        assert turn.status == "completed", turn.error
        # The model read the validation error in the same segment, as it reads an
        # inline call's: without a hook's "PreToolUse:... hook error:" prefix.
        assert turn.final_text == f"done: place_order did not run: {problem}"
        assert turn.tool_calls == []  # it never reached the session
        events = await sessions.events(sid)
        assert [e for e in events if e.type.startswith("interrupt_")] == []
        calls = [
            (e.type, e.data.get("tool_name"), e.data.get("status"))
            for e in events
            if e.type.startswith("tool_call_")
        ]
        assert calls == [
            ("tool_call_started", "place_order", None),
            ("tool_call_finished", "place_order", "failed"),
        ]
        (finished,) = [e for e in events if e.type == "tool_call_finished"]
        assert problem in str(finished.data["error"])

        # An input that fits still waits for its approval, and runs once.
        snap = await sessions.send_and_wait(
            sid, 'dex-script: call place_order {"sku": "ABC-1"}'
        )
        (interrupt,) = snap.pending_interrupts
        assert interrupt.arguments == {"sku": "ABC-1"}
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[-1].final_text == "done: placed ABC-1"
    assert placed == [{"sku": "ABC-1"}]
    await store.close()
