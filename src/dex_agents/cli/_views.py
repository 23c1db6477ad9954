"""What `show` reads besides the snapshot: every tool call of the turns it shows.

A turn's summary records only its deferred calls (the ones with their own Step
or an approval). Reads and other calls that ran inside the model segment are in
the event log only, as `tool_call_started` and `tool_call_finished`. The log
holds every event of the session, so the view finds where its first shown turn
starts by searching the cursors (events are appended turn after turn), and
reads from there: the cost follows the turns shown, not the session's age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import cast, get_args

from ..session._json import JsonObject
from ..session._records import ToolRecord, ToolRecordStatus
from ..session._state import Interrupt, TurnSummary, turn_number
from ..stores import RuntimeStore
from ..stores._cursors import cursor_before_turn
from ..temporal._models import ResolveInterruptInput

_RECORD_STATUSES = frozenset(get_args(ToolRecordStatus))


@dataclass(frozen=True, kw_only=True, slots=True)
class ShownCall:
    """A tool call as `show` prints it: its record, and whether it has ended."""

    record: ToolRecord
    ended: bool = True
    inline: bool = False
    """It ran inside the model segment (a read, or a tool of the model's CLI)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Pending:
    """One approval waiting, with its session (a row of `approvals`)."""

    session_id: str
    flow_type: str
    interrupt: Interrupt
    recorded: ResolveInterruptInput | None = None
    """The answer recorded in the session's history for when a worker starts
    (no worker took it), if any: it has not applied yet."""


async def _start_of_turn(store: RuntimeStore, session_id: str, number: int) -> int:
    """A cursor after which every event of turn `number` and later comes.

    It is the smallest cursor whose next event belongs to turn `number` or a
    later one; turn numbers only grow along the log, so a binary search finds it.
    """
    if number <= 1:
        return 0
    return await cursor_before_turn(store, session_id, number)


async def turn_calls(
    store: RuntimeStore, session_id: str, turns: Sequence[TurnSummary]
) -> dict[str, list[ShownCall]]:
    """Every tool call of `turns`, in the order they started, by turn ID.

    Deferred calls keep their records; a call that ran inside the segment gets a
    record made from its events. A turn without events (written before events
    were kept) is left out: its summary's records are all there is.
    """
    if not turns:
        return {}
    wanted = {t.turn_id for t in turns}
    deferred = {r.tool_call_id: r for t in turns for r in t.tool_calls}
    started: dict[str, dict[str, JsonObject]] = {}
    """Per turn, the started calls by ID, in the order they started."""
    finished: dict[str, JsonObject] = {}
    after = await _start_of_turn(store, session_id, min(turn_number(t) for t in wanted))
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            call_id = event.data.get("tool_call_id")
            if event.turn_id not in wanted or not isinstance(call_id, str):
                continue
            if event.type == "tool_call_started":
                started.setdefault(event.turn_id, {}).setdefault(call_id, event.data)
            elif event.type == "tool_call_finished":
                finished[call_id] = event.data
    calls: dict[str, list[ShownCall]] = {}
    for turn in turns:
        if turn.turn_id not in started:
            continue
        shown: list[ShownCall] = []
        for call_id, data in started[turn.turn_id].items():
            record = deferred.get(call_id)
            if record is not None:
                shown.append(ShownCall(record=_ran_in_cli(record, finished)))
            else:
                end = finished.get(call_id)
                inline = _inline_record(call_id, data, end or {})
                shown.append(
                    ShownCall(record=inline, ended=end is not None, inline=True)
                )
        seen = {c.record.tool_call_id for c in shown}
        shown += [
            ShownCall(record=_ran_in_cli(r, finished))
            for r in turn.tool_calls
            if r.tool_call_id not in seen
        ]
        calls[turn.turn_id] = shown
    return calls


def _ran_in_cli(record: ToolRecord, finished: Mapping[str, JsonObject]) -> ToolRecord:
    """`record` with what its tool printed, when it ran inside the resumed segment.

    The turn log records that output since it is published (the publish reads
    the segment's `tool_call_finished`); a turn published by an earlier release
    keeps only "Approved; the call runs inside the resumed Claude Code turn.",
    and gets the output here, from the same event.
    """
    end = finished.get(record.tool_call_id)
    if not record.finished_by_resumed_turn or end is None:
        return record
    output, error = end.get("output"), end.get("error")
    said = output if output else error
    return replace(record, output=str(said)) if said else record


def _inline_record(call_id: str, started: JsonObject, end: JsonObject) -> ToolRecord:
    """The record of a call that ran inside the segment, from its two events."""
    status = end.get("status")
    arguments = started.get("arguments")
    output = end.get("output")
    error = end.get("error")
    return ToolRecord(
        tool_call_id=call_id,
        tool_name=str(started.get("tool_name", "")),
        arguments=cast(JsonObject, arguments) if isinstance(arguments, dict) else {},
        status=cast(ToolRecordStatus, status)
        if status in _RECORD_STATUSES
        else "finished",
        output=str(output) if output else (str(error) if error else None),
    )
