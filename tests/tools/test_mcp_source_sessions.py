"""MCP server tools in Claude agent sessions: fake CLI, dev server, real MCP server."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from dex_agents.connectors import MCPServerToolSource
from dex_agents.session._policy import idempotency_key
from dex_agents.testing import Ledger
from support.mcp_source_rig import AUTH, http_server, mcp_agent, stdio_server


async def test_a_read_runs_in_its_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_server(ledger.path) as server:
        source = MCPServerToolSource(server, source_name="ledger", headers=AUTH)
        async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
            sid = "read"
            await sessions.start(
                sid, initial_message='dex-script: call read_balance {"account": "a"}'
            )
            snap = await sessions.wait_for_idle(sid)
    assert snap.pending_interrupts == []
    (record,) = snap.turns[0].tool_calls
    assert (record.tool_name, record.status) == ("read_balance", "finished")
    assert snap.turns[0].final_text == "done: balance of a: 0"
    (read,) = ledger.entries("mcp_read")
    # It ran in its tool Step: the Step's key reached the server.
    assert read["idempotency_key"] == idempotency_key(
        sid, snap.turns[0].turn_id, record.tool_call_id
    )


async def test_a_write_waits_for_approval_then_runs_once_with_its_key(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_server(ledger.path) as server:
        source = MCPServerToolSource(server, source_name="ledger", headers=AUTH)
        async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
            sid = "write"
            await sessions.start(
                sid,
                initial_message='dex-script: call append_entry {"account": "a", "amount": 5}',
            )
            snap = await sessions.wait_for_idle(sid)
            assert snap.status == "waiting_for_approval"
            (interrupt,) = snap.pending_interrupts
            assert (interrupt.tool_name, interrupt.effect) == (
                "append_entry",
                "non_idempotent_write",
            )
            assert ledger.count("mcp_entry") == 0
            assert await sessions.resolve_interrupt(
                sid, interrupt.interrupt_id, approved=True
            )
            snap = await sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: appended 5 to a"
    (entry,) = ledger.entries("mcp_entry")
    assert entry["idempotency_key"] == idempotency_key(
        sid, interrupt.turn_id, interrupt.tool_call_id
    )
    assert entry["attempt"] == 1


async def test_a_rejected_write_never_reaches_the_server(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_server(ledger.path) as server:
        source = MCPServerToolSource(server, source_name="ledger", headers=AUTH)
        async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
            sid = "mcp-rejected"
            await sessions.start(
                sid,
                initial_message='dex-script: call append_entry {"account": "a", "amount": 5}',
            )
            snap = await sessions.wait_for_idle(sid)
            (interrupt,) = snap.pending_interrupts
            await sessions.resolve_interrupt(
                sid, interrupt.interrupt_id, approved=False, rejection_message="no"
            )
            snap = await sessions.wait_for_idle(sid)
    assert [r.status for r in snap.turns[0].tool_calls] == ["rejected"]
    assert ledger.entries() == []


async def test_bad_arguments_never_reach_the_server(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    async with http_server(ledger.path) as server:
        source = MCPServerToolSource(server, source_name="ledger", headers=AUTH)
        async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
            sid = "mcp-bad-args"
            await sessions.start(
                sid, initial_message='dex-script: call append_entry {"account": "a"}'
            )
            snap = await sessions.wait_for_idle(sid)
    # Denied inside the turn: no record, no interrupt, and the model reads why.
    assert snap.turns[0].tool_calls == []
    assert snap.pending_interrupts == []
    assert "'amount' is a required property" in snap.turns[0].final_text
    assert ledger.entries() == []


async def test_a_stdio_server_serves_a_session_too(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
        sid = "stdio"
        await sessions.start(
            sid,
            initial_message='dex-script: call set_limit {"account": "a", "limit": 3}',
        )
        snap = await sessions.wait_for_idle(sid)
    # An idempotent write needs no approval and runs in its retried Step.
    assert snap.pending_interrupts == []
    (record,) = snap.turns[0].tool_calls
    assert (record.tool_name, record.status) == ("set_limit", "finished")
    assert snap.turns[0].final_text == "done: limit of a: 3"
    assert ledger.count("mcp_set_limit") == 1


async def test_a_write_whose_server_dies_mid_call_records_outcome_unknown(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    source = MCPServerToolSource(stdio_server(ledger.path), source_name="ledger")
    async with mcp_agent(client, flow_type, tmp_path, source) as sessions:
        sid = "dies"
        await sessions.start(
            sid, initial_message='dex-script: call append_and_crash {"account": "a"}'
        )
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert interrupt.effect == "non_idempotent_write"
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        snap = await sessions.wait_for_idle(sid)
    (record,) = snap.turns[0].tool_calls
    # The server applied the entry and died: the session must not claim either way.
    assert (record.status, record.attempts) == ("outcome_unknown", 1)
    assert ledger.count("mcp_entry") == 1
