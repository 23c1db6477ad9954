"""`show` finds every tool call of the turns it shows, reading only from where they start."""

from __future__ import annotations

from pathlib import Path

import pytest

from dex_agents.cli._render import event_line
from dex_agents.cli._views import turn_calls
from dex_agents.session._events import EventRecord
from dex_agents.session._records import ToolRecord
from dex_agents.session._state import TurnSummary
from dex_agents.stores import SQLiteRuntimeStore

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


def _call_events(session_id: str, turn: int) -> list[EventRecord]:
    turn_id = f"turn-{turn}"
    step = f"{turn_id}/run_model/1"

    def event(seq: int, type_: str, **data: object) -> EventRecord:
        return EventRecord(
            session_id=session_id,
            turn_id=turn_id,
            step_execution_id=step,
            attempt=1,
            seq=seq,
            type=type_,  # pyright: ignore[reportArgumentType]
            data=data,  # pyright: ignore[reportArgumentType]
        )

    read, write = f"read-{turn}", f"write-{turn}"
    return [
        event(0, "turn_started", turn_id=turn_id),
        event(1, "tool_call_started", tool_call_id=read, tool_name="lookup",
              arguments={"n": turn}),
        event(2, "tool_call_finished", tool_call_id=read, tool_name="lookup",
              status="finished", output=f"found {turn}"),
        event(3, "text_delta", text="x"),
        event(4, "tool_call_started", tool_call_id=write, tool_name="refund",
              arguments={}),
    ]  # fmt: skip


async def test_calls_of_late_turns_come_in_order_with_the_deferred_records(
    tmp_path: Path,
) -> None:
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    # Two sessions' events interleave, so a session's cursors have gaps.
    for turn in range(1, 41):
        await store.append_events(_call_events("shown", turn))
        await store.append_events(_call_events("other", turn))
    # The last turn's read is still running: it has no `tool_call_finished`.
    await store.append_events(
        [e for e in _call_events("shown", 41) if e.type != "tool_call_finished"]
    )
    turns = [
        TurnSummary(
            turn_id=f"turn-{n}",
            status="completed",
            tool_calls=[
                ToolRecord(
                    tool_call_id=f"write-{n}",
                    tool_name="refund",
                    arguments={},
                    status="finished",
                    output="refunded",
                )
            ],
        )
        for n in range(30, 42)
    ]
    calls = await turn_calls(store, "shown", turns)
    assert sorted(calls) == sorted(t.turn_id for t in turns)
    first = calls["turn-30"]
    assert [c.record.tool_call_id for c in first] == ["read-30", "write-30"]
    assert first[0].inline and first[0].ended
    assert first[0].record.arguments == {"n": 30}
    assert first[0].record.output == "found 30"
    assert first[1].record is turns[0].tool_calls[0] and not first[1].inline
    last = calls["turn-41"]
    assert [c.record.tool_call_id for c in last] == ["read-41", "write-41"]
    assert not last[0].ended
    # Earlier turns of the session, and the other session, are not read into it.
    assert all(
        c.record.tool_call_id.endswith(turn_id.removeprefix("turn"))
        for turn_id, shown in calls.items()
        for c in shown
    )
    # A turn with no events keeps its summary's records; no turns, no reads.
    old = TurnSummary(turn_id="turn-99", status="completed")
    assert await turn_calls(store, "shown", [old]) == {}
    assert await turn_calls(store, "shown", []) == {}
    await store.close()


def test_every_event_type_keeps_a_space_before_what_it_carries() -> None:
    """`events` printed `tool_call_attempt_failedexplode_write`: the column was 19 wide."""
    failed = EventRecord(
        session_id="s",
        turn_id="turn-1",
        step_execution_id="turn-1/tool/1",
        attempt=1,
        seq=0,
        type="tool_call_attempt_failed",
        data={"tool_name": "explode_write", "attempt": 1, "error": "boom"},
    )
    line = event_line(failed).plain
    assert "tool_call_attempt_failed explode_write attempt 1: boom" in line
    started = line.index("tool_call_attempt_failed")
    finished = event_line(_call_events("s", 1)[2]).plain
    # One column: what an event carries starts at the same place for every type.
    assert finished.index("lookup") == line.index("explode_write")
    assert finished.index("tool_call_finished") == started
