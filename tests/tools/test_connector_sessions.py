"""Connector tools through the fake CLI on the dev server, counted in the provider's ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from claude_agent_sdk import HookMatcher
from temporalio.client import Client

from dex_agents import ToolPolicy
from support.connector_agent import connector_agent, switchable_source
from support.tools_harness import (
    TRANSFER_A_5,
    resolve_to_idle,
    start_to_idle,
    start_to_interrupt,
)


async def test_a_query_runs_in_its_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions, "query", 'dex-script: call read_balance {"account": "a"}'
        )
        (record,) = snap.turns[0].tool_calls
        assert (record.tool_name, record.status) == ("read_balance", "finished")
        assert snap.turns[0].final_text == "done: balance of a: 0"
        (query,) = rig.ledger.entries("ledger_query")
        assert str(query["call_id"]).startswith("dexcall_")


async def test_a_mutation_waits_for_manifest_approval(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        sid = "transfer"
        snap, interrupt = await start_to_interrupt(rig.sessions, sid, TRANSFER_A_5)
        assert snap.status == "waiting_for_approval"
        assert (interrupt.tool_name, interrupt.effect) == (
            "transfer",
            "non_idempotent_write",
        )
        assert rig.ledger.count("ledger_entry") == 0
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        assert snap.turns[0].final_text == "done: transferred 5 to a"
        assert rig.ledger.count("ledger_entry") == 1


async def test_a_rejected_call_never_reaches_the_provider(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        sid = "rejected"
        _, interrupt = await start_to_interrupt(rig.sessions, sid, TRANSFER_A_5)
        snap = await resolve_to_idle(
            rig.sessions, sid, interrupt, approved=False, rejection_message="no"
        )
        assert [r.status for r in snap.turns[0].tool_calls] == ["rejected"]
        assert rig.ledger.entries() == []


async def test_bad_arguments_never_reach_the_provider(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions, "bad-args", 'dex-script: call append_entry {"account": "a"}'
        )
        assert snap.turns[0].tool_calls == []
        assert "'amount' is a required property" in snap.turns[0].final_text
        assert rig.ledger.entries() == []


async def test_a_session_policy_changes_only_approval(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    policies = {"read_balance": ToolPolicy(effect="non_idempotent_write")}
    async with connector_agent(
        client, flow_type, tmp_path, tool_policies=policies
    ) as rig:
        sid = "policy"
        _, interrupt = await start_to_interrupt(
            rig.sessions, sid, 'dex-script: call read_balance {"account": "a"}'
        )
        # Approval came from the policy; the effect stays the connector's.
        assert interrupt.effect == "read"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        assert snap.turns[0].final_text == "done: balance of a: 0"


async def test_the_approval_predicate_sees_the_hook_rewritten_input(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async def raise_amount(hook_input: Any, _id: str | None, _ctx: Any) -> Any:
        new = {**hook_input["tool_input"], "amount": 500}
        return {
            "hookSpecificOutput": {"hookEventName": "PreToolUse", "updatedInput": new}
        }

    hooks = [HookMatcher(matcher="mcp__tools__append_entry", hooks=[raise_amount])]
    async with connector_agent(client, flow_type, tmp_path, hooks=hooks) as rig:
        sid = "predicate"
        _, interrupt = await start_to_interrupt(
            rig.sessions,
            sid,
            'dex-script: call append_entry {"account": "a", "amount": 5}',
        )
        assert interrupt.arguments == {"account": "a", "amount": 500}
        await resolve_to_idle(rig.sessions, sid, interrupt)
        assert [e["amount"] for e in rig.ledger.entries("ledger_entry")] == [500]


async def test_a_retry_safe_mutation_retries_under_one_call_id(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions,
            "retry-safe",
            'dex-script: call append_entry {"account": "a", '
            '"amount": 5, "fail_attempts": 2}',
        )
        (record,) = snap.turns[0].tool_calls
        assert record.status == "finished"
        attempts = rig.ledger.entries("ledger_attempt")
        assert [a["attempt"] for a in attempts] == [1, 2, 3]
        assert len({str(a["call_id"]) for a in attempts}) == 1
        assert rig.ledger.count("ledger_entry") == 1


async def test_an_uncertain_write_records_outcome_unknown(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions,
            "uncertain",
            'dex-script: call append_entry {"account": "a", '
            '"amount": 5, "uncertain": true}',
        )
        (record,) = snap.turns[0].tool_calls
        assert record.status == "outcome_unknown"
        # Not retried: one attempt only.
        assert rig.ledger.count("ledger_attempt") == 1


async def test_an_allowed_tools_entry_for_a_source_tool_fails_the_turn(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(
        client, flow_type, tmp_path, allowed_tools=["mcp__tools__read_balance"]
    ) as rig:
        snap = await start_to_idle(
            rig.sessions, "allowed", 'dex-script: call read_balance {"account": "a"}'
        )
        assert snap.turns[0].status == "failed"
        assert "allowed_tools" in (snap.turns[0].error or "")
        assert rig.ledger.entries() == []


async def test_a_task_or_a_question_records_failed(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions, "task", "dex-script: call start_export {}"
        )
        assert [r.status for r in snap.turns[0].tool_calls] == ["failed"]
        snap = await start_to_idle(
            rig.sessions,
            "question",
            'dex-script: call confirm_account {"account": "a"}',
        )
        (record,) = snap.turns[0].tool_calls
        assert record.status == "failed"
        assert "asked a question" in (record.output or "")


async def test_a_vanished_tool_still_replays_and_a_new_call_is_denied(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    source = switchable_source(tmp_path)
    async with connector_agent(client, flow_type, tmp_path, sources=[source]) as rig:
        sid = "vanished"
        _, interrupt = await start_to_interrupt(rig.sessions, sid, TRANSFER_A_5)
        source.mode = "empty"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        assert snap.turns[0].final_text == "done: transferred 5 to a"
        assert rig.ledger.count("ledger_entry") == 1
