"""The connector-tools suite on the dev server (fake CLI, worker in the test process).

Closes the gaps of `test_connector_sessions`: two source writes of one reply,
a write that starts a task, a new call of a vanished tool, an application hook
that denies on resume, a listing that fails on resume, and an operation's own
tool Step options. Every provider effect is counted in the fake ledger.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookMatcher
from temporalio.client import Client

from dex_agents import AgentSessionOptions
from dex_agents.claude._sources import source_one_reply_text, vanished_text
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.testing._fake_ledger_connector import (
    FLAKY_LOOKUP_ATTEMPTS,
    SLOW_LOOKUP_TIMEOUT,
)
from support.connector_agent import ConnectorRig, connector_agent, switchable_source
from support.tools_harness import (
    TRANSFER_A_5,
    resolve_to_idle,
    start_to_idle,
    start_to_interrupt,
)


def tool_uses(snap: AgentSnapshot, name: str) -> list[tuple[str, Any]]:
    """(tool use ID, input) of every call of source tool `name` the model made, in order."""
    seen: dict[str, Any] = {}
    for message in snap.messages:
        entries: Any = message.item.get("entries") or []
        for entry in entries:
            content = (entry.get("message") or {}).get("content")
            if not isinstance(content, list):
                continue
            for block in content:  # pyright: ignore[reportUnknownVariableType]
                if (
                    isinstance(block, dict)
                    and block.get("type") == "tool_use"  # pyright: ignore[reportUnknownMemberType]
                    and block.get("name") == f"mcp__tools__{name}"  # pyright: ignore[reportUnknownMemberType]
                ):
                    seen.setdefault(str(block["id"]), block.get("input"))  # pyright: ignore[reportUnknownMemberType]
    return list(seen.items())


def tool_results(snap: AgentSnapshot) -> list[str]:
    """Every tool result the model read, as stored."""
    return [m.text for m in snap.messages if m.role == "tool"]


async def started_call_ids(rig: ConnectorRig, sid: str) -> set[str]:
    """Tool call IDs of every `tool_call_started` event of the session."""
    return {
        str(e.data.get("tool_call_id"))
        for e in await rig.sessions.events(sid)
        if e.type == "tool_call_started"
    }


# --- row 96 / 245: two source writes of one reply ------------------------------


async def test_two_source_writes_of_one_reply_run_one_at_a_time_in_order(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        sid = "two-source-writes"
        snap, interrupt = await start_to_interrupt(
            rig.sessions,
            sid,
            'dex-script: call transfer {"account": "a", "amount": 1} '
            '&& call append_entry {"account": "b", "amount": 2}',
        )
        # The earlier write waits for approval; the later one (approval-free,
        # so it would run at once if it had deferred) has not reached the provider.
        assert snap.status == "waiting_for_approval"
        assert (interrupt.tool_name, interrupt.arguments) == (
            "transfer",
            {"account": "a", "amount": 1},
        )
        assert rig.ledger.entries() == []
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        (turn,) = snap.turns
        assert turn.status == "completed", turn.error
        assert turn.final_text == "done: transferred 1 to a; appended 2 to b"
        # One after the other, in the model's order.
        assert [
            (e["account"], e["amount"]) for e in rig.ledger.entries("ledger_entry")
        ] == [
            ("a", 1),
            ("b", 2),
        ]
        kinds = [e["kind"] for e in rig.ledger.entries()]
        assert kinds == ["ledger_entry", "ledger_attempt", "ledger_entry"]
        # Two records: the two calls that ran; the denied call left none (no
        # skipped marker).
        assert [(r.tool_name, r.status) for r in turn.tool_calls] == [
            ("transfer", "finished"),
            ("append_entry", "finished"),
        ]
        record_ids = {r.tool_call_id for r in turn.tool_calls}
        assert interrupt.tool_call_id in record_ids
        # The model called append_entry twice: the denied call in the first
        # reply, then again by itself.
        (denied_id, denied_input), (rerun_id, rerun_input) = tool_uses(
            snap, "append_entry"
        )
        assert denied_input == rerun_input == {"account": "b", "amount": 2}
        assert denied_id not in record_ids
        assert rerun_id in record_ids
        assert denied_id not in await started_call_ids(rig, sid)
        # It read, inside the turn, why the later call did not run.
        refusals = [t for t in tool_results(snap) if "did not run" in t]
        assert len(refusals) == 1
        assert source_one_reply_text("append_entry") in refusals[0]


# --- row 100: a write that starts a task ---------------------------------------


async def test_a_write_that_starts_a_task_records_outcome_unknown(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    async with connector_agent(client, flow_type, tmp_path) as rig:
        sid = "write-task"
        _, interrupt = await start_to_interrupt(
            rig.sessions, sid, "dex-script: call start_import {}"
        )
        assert interrupt.effect == "non_idempotent_write"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        (turn,) = snap.turns
        (record,) = turn.tool_calls
        assert (record.tool_name, record.status) == ("start_import", "outcome_unknown")
        assert "started task import-dexcall_" in (record.output or "")
        assert "The outcome of start_import is unknown" in turn.final_text
        # The write ran once: outcome_unknown is never retried.
        (started,) = rig.ledger.entries("ledger_import")
        assert str(started["call_id"]).startswith("dexcall_")


# --- row 103 / 245: a new call of a vanished tool ------------------------------


async def test_a_new_call_of_a_vanished_tool_is_denied_and_starts_no_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    source = switchable_source(tmp_path)
    async with connector_agent(client, flow_type, tmp_path, sources=[source]) as rig:
        sid = "vanished-new-call"
        # The second transfer is denied in the first reply; the model calls it
        # again by itself in the resumed segment, when the source lists nothing.
        _, interrupt = await start_to_interrupt(
            rig.sessions,
            sid,
            'dex-script: call transfer {"account": "a", "amount": 1} '
            '&& call transfer {"account": "b", "amount": 2}',
        )
        assert interrupt.arguments == {"account": "a", "amount": 1}
        source.mode = "empty"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        assert "empty" in source.listings
        (turn,) = snap.turns
        assert turn.status == "completed", turn.error
        assert snap.pending_interrupts == []
        # The recorded call replayed; the new call was denied in the turn.
        assert turn.final_text.startswith("done: transferred 1 to a; ")
        assert vanished_text("transfer") in turn.final_text
        # It never started a tool Step: no record, no event, no provider call.
        assert [(r.tool_call_id, r.status) for r in turn.tool_calls] == [
            (interrupt.tool_call_id, "finished")
        ]
        uses = tool_uses(snap, "transfer")
        assert [u[1] for u in uses] == [
            {"account": "a", "amount": 1},
            {"account": "b", "amount": 2},
            {"account": "b", "amount": 2},
        ]
        vanished_id = uses[-1][0]
        assert vanished_id not in await started_call_ids(rig, sid)
        assert [e["account"] for e in rig.ledger.entries("ledger_entry")] == ["a"]


# --- row 245: an application hook that denies on resume ------------------------


async def test_an_application_hook_that_denies_on_resume_cannot_hide_the_record(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    frozen = False
    seen: list[str | None] = []

    async def freeze_transfers(
        hook_input: Any, tool_use_id: str | None, _context: Any
    ) -> Any:
        seen.append(tool_use_id)
        if not frozen:
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "transfers are frozen",
            }
        }

    hooks = [HookMatcher(matcher="mcp__tools__transfer", hooks=[freeze_transfers])]
    async with connector_agent(client, flow_type, tmp_path, hooks=hooks) as rig:
        sid = "hook-denies-on-resume"
        _, interrupt = await start_to_interrupt(rig.sessions, sid, TRANSFER_A_5)
        # From now on the application denies transfers; this one is approved.
        frozen = True
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        assert snap.turns[0].final_text == "done: transferred 5 to a"
        assert [r.status for r in snap.turns[0].tool_calls] == ["finished"]
        assert rig.ledger.count("ledger_entry") == 1
        # The hook ran when the call deferred, not for its resumed replay.
        assert seen.count(interrupt.tool_call_id) == 1
        # A new transfer is the application's to deny.
        await rig.sessions.send_user_message(
            sid, 'dex-script: call transfer {"account": "b", "amount": 6}'
        )
        snap = await rig.sessions.wait_for_idle(sid)
        assert snap.pending_interrupts == []
        assert snap.turns[1].tool_calls == []
        assert "transfers are frozen" in snap.turns[1].final_text
        assert rig.ledger.count("ledger_entry") == 1


# --- row 245: a dynamic source whose listing fails on resume -------------------


async def test_a_source_whose_listing_fails_on_resume_still_replays_the_record(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    source = switchable_source(tmp_path)
    async with connector_agent(client, flow_type, tmp_path, sources=[source]) as rig:
        sid = "listing-fails"
        _, interrupt = await start_to_interrupt(rig.sessions, sid, TRANSFER_A_5)
        source.mode = "fail"
        snap = await resolve_to_idle(rig.sessions, sid, interrupt)
        # The resumed segment's listing failed, and the turn still went on.
        assert source.listings[0] == "list"
        assert "fail" in source.listings[1:]
        (turn,) = snap.turns
        assert turn.status == "completed", turn.error
        assert turn.final_text == "done: transferred 5 to a"
        assert [(r.tool_call_id, r.status) for r in turn.tool_calls] == [
            (interrupt.tool_call_id, "finished")
        ]
        assert rig.ledger.count("ledger_entry") == 1


# --- row 94: the operation's own tool Step options -----------------------------


async def test_an_operations_attempts_reach_its_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    assert AgentSessionOptions().tool_attempts == 3
    assert FLAKY_LOOKUP_ATTEMPTS == 2
    async with connector_agent(client, flow_type, tmp_path) as rig:
        snap = await start_to_idle(
            rig.sessions,
            "step-attempts",
            'dex-script: call flaky_lookup {"account": "a"}',
        )
        (record,) = snap.turns[0].tool_calls
        assert record.status == "outcome_unknown"
        assert "lookup unavailable (attempt 2)" in (record.output or "")
        attempts = rig.ledger.entries("flaky_attempt")
        # The operation's 2 attempts, not the session's 3.
        assert [a["attempt"] for a in attempts] == [1, 2]
        assert len({str(a["call_id"]) for a in attempts}) == 1


async def test_an_operations_timeout_reaches_its_tool_step(
    client: Client, flow_type: str, tmp_path: Path
) -> None:
    assert SLOW_LOOKUP_TIMEOUT.total_seconds() == 1
    # The session's own limit is ten minutes; the operation sleeps 20 s.
    assert AgentSessionOptions().tool_limit.total_seconds() > 60
    async with connector_agent(client, flow_type, tmp_path) as rig:
        started = time.monotonic()
        snap = await start_to_idle(
            rig.sessions,
            "step-timeout",
            'dex-script: call slow_lookup {"account": "a"}',
        )
        elapsed = time.monotonic() - started
        (record,) = snap.turns[0].tool_calls
        assert record.status == "outcome_unknown"
        assert "timeout" in (record.output or "").lower()
        # One attempt began and timed out; the operation never answered.
        assert [a["attempt"] for a in rig.ledger.entries("slow_attempt")] == [1]
        assert rig.ledger.entries("slow_answer") == []
        assert elapsed < 15, elapsed
