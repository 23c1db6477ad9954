"""MCP server tools in Claude agent sessions: fake CLI, dev server, real MCP server."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from dex_agents.session._policy import idempotency_key
from support.tools_harness import (
    mcp_ledger_agent,
    resolve_to_idle,
    start_to_idle,
    start_to_interrupt,
)

APPEND_A_5 = 'dex-script: call append_entry {"account": "a", "amount": 5}'


async def test_a_read_runs_in_its_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "http") as rig:
        sid = "read"
        snap = await start_to_idle(
            rig.sessions, sid, 'dex-script: call read_balance {"account": "a"}'
        )
    assert snap.pending_interrupts == []
    (record,) = snap.turns[0].tool_calls
    assert (record.tool_name, record.status) == ("read_balance", "finished")
    assert snap.turns[0].final_text == "done: balance of a: 0"
    (read,) = rig.ledger.entries("mcp_read")
    # It ran in its tool Step: the Step's key reached the server.
    assert read["idempotency_key"] == idempotency_key(
        sid, snap.turns[0].turn_id, record.tool_call_id
    )


async def test_a_write_waits_for_approval_then_runs_once_with_its_key(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "http") as rig:
        sid = "write"
        snap, interrupt = await start_to_interrupt(rig.sessions, sid, APPEND_A_5)
        assert snap.status == "waiting_for_approval"
        assert (interrupt.tool_name, interrupt.effect) == (
            "append_entry",
            "non_idempotent_write",
        )
        assert rig.ledger.count("mcp_entry") == 0
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
    assert snap.turns[0].final_text == "done: appended 5 to a"
    (entry,) = rig.ledger.entries("mcp_entry")
    assert entry["idempotency_key"] == idempotency_key(
        sid, interrupt.turn_id, interrupt.tool_call_id
    )
    assert entry["attempt"] == 1


async def test_a_rejected_write_never_reaches_the_server(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "http") as rig:
        sid = "mcp-rejected"
        _, interrupt = await start_to_interrupt(rig.sessions, sid, APPEND_A_5)
        snap = await resolve_to_idle(
            rig.sessions, sid, interrupt, approved=False, rejection_message="no"
        )
    assert [r.status for r in snap.turns[0].tool_calls] == ["rejected"]
    assert rig.ledger.entries() == []


async def test_bad_arguments_never_reach_the_server(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "http") as rig:
        snap = await start_to_idle(
            rig.sessions,
            "mcp-bad-args",
            'dex-script: call append_entry {"account": "a"}',
        )
    # Denied inside the turn: no record, no interrupt, and the model reads why.
    assert snap.turns[0].tool_calls == []
    assert snap.pending_interrupts == []
    assert "'amount' is a required property" in snap.turns[0].final_text
    assert rig.ledger.entries() == []


async def test_a_stdio_server_serves_a_session_too(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "stdio") as rig:
        snap = await start_to_idle(
            rig.sessions,
            "stdio",
            'dex-script: call set_limit {"account": "a", "limit": 3}',
        )
    # An idempotent write needs no approval and runs in its retried Step.
    assert snap.pending_interrupts == []
    (record,) = snap.turns[0].tool_calls
    assert (record.tool_name, record.status) == ("set_limit", "finished")
    assert snap.turns[0].final_text == "done: limit of a: 3"
    assert rig.ledger.count("mcp_set_limit") == 1


async def test_a_write_whose_server_dies_mid_call_records_outcome_unknown(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with mcp_ledger_agent(client, flow_type, tmp_path, "stdio") as rig:
        sid = "dies"
        _, interrupt = await start_to_interrupt(
            rig.sessions, sid, 'dex-script: call append_and_crash {"account": "a"}'
        )
        assert interrupt.effect == "non_idempotent_write"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
    (record,) = snap.turns[0].tool_calls
    # The server applied the entry and died: the session must not claim either way.
    assert (record.status, record.attempts) == ("outcome_unknown", 1)
    assert rig.ledger.count("mcp_entry") == 1
