"""What the adapter and the scripted runner report as the agent's text.

The adapter drops the Claude Code CLI's `<system-reminder>` blocks from the
text it reports as a tool's output or the agent's answer, and keeps them in the
stored transcript the CLI resumes from. The in-process scripted runner decides
from the turn's own prompt, so a follow-up never repeats an earlier call.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import JsonValue
from temporalio.client import Client

from dex_agents.claude._transcript import (
    group_messages,
    tool_result_text,
    without_system_reminders,
)
from dex_agents.session._json import JsonObject
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow


def _entries(item: JsonObject) -> list[JsonValue]:
    entries = item["entries"]
    assert isinstance(entries, list)
    return entries


REMINDER = "<system-reminder>\nToday's date is 2026-12-01.\n</system-reminder>"


def test_reminders_leave_tool_output_and_agent_text_but_stay_in_the_transcript() -> (
    None
):
    entries: list[JsonObject] = [
        {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "content": [{"type": "tool_use", "id": "t1", "name": "Read"}],
            },
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [
                            {"type": "text", "text": "file text\n"},
                            {"type": "text", "text": REMINDER},
                        ],
                    }
                ]
            },
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_2",
                "content": [
                    {"type": "text", "text": f"It says file text.\n{REMINDER}"}
                ],
            },
        },
    ]
    call, tool, answer = group_messages("claude-1", entries)
    assert (tool.role, tool.text) == ("tool", "file text")
    assert (answer.role, answer.text) == ("assistant", "It says file text.")
    assert call.text == ""
    stored = [e for m in (call, tool, answer) for e in _entries(m.item)]
    assert stored == entries


def test_text_without_a_reminder_is_unchanged() -> None:
    assert without_system_reminders("  said: hi \n") == "  said: hi \n"
    assert tool_result_text({"content": "a <system-reminder> word"}) == (
        "a <system-reminder> word"
    )
    assert without_system_reminders(f"{REMINDER}\nsaid: hi\n{REMINDER}") == "said: hi"


async def test_scripted_runner_answers_a_follow_up_from_its_own_prompt(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    (tmp_path / "gates").mkdir()
    config = LedgerFlowConfig(
        flow_type=flow_type,
        ledger_path=str(tmp_path / "ledger.jsonl"),
        gate_dir=str(tmp_path / "gates"),
    )
    flow = ledger_flow(config)
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    sid = "scripted-runner-followup"
    async with create_worker(client, [flow], store=store):
        sessions = SessionClient(client, flow, store)
        await sessions.start(sid, initial_message='call create_refund {"orderId": "7"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, "thanks!")
        snapshot = await sessions.wait_for_idle(sid)
    await store.close()
    assert snapshot.pending_interrupts == []
    assert [t.final_text for t in snapshot.turns] == [
        "done: create_refund=refunded order 7",
        "unknown script: thanks!",
    ]
    assert Ledger(config.ledger_path).count("create_refund") == 1
