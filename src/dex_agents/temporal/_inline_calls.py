"""Every inline call of a model segment ends in the event log, whatever stops the segment.

A call that runs inside the segment (a read, a tool of the model's CLI) has a
`tool_call_started` from the runner and, when it returns, a
`tool_call_finished`. When the segment stops midway its result never comes,
and readers (`show`, the web app's session page, a UI following the events)
would show the call running forever. So:

- a `cancel_turn` ends it `cancelled` (`StreamedText.end_running`);
- an attempt that fails (its runner raised, it overran `run_model_limit`) ends
  it `outcome_unknown`, with the attempt's error (`StreamedText.end_running`);
- an attempt whose worker died wrote nothing more: the next attempt of the
  Step ends it `outcome_unknown` before it runs the segment again (`left_open`);
- when no attempt follows (the last one died, or the turn was cancelled while
  no worker ran it), the turn's publish ends it before the turn's own end event
  (`end_calls_of_ended_turn`).

A read that stopped midway did nothing; a tool of the CLI (`Write`, an MCP
server's tool) may have acted in part, which `outcome_unknown` says.
"""

from __future__ import annotations

from datetime import UTC, datetime

from ..session import AgentEvent, EventRecord, ToolCallFinishedEvent
from ..session._events import agent_event, stamped
from ..session._json import JsonObject
from ..session._state import SUMMARY_TEXT_LIMIT, turn_number
from ..stores import RuntimeStore
from ..stores._cursors import cursor_before_turn, event_turn
from ._events import StoreEventSink
from ._snapshot import clip

CANCELLED_WHILE_RUNNING = "the turn was cancelled while the call ran; it was stopped"
"""The rejection message of an inline call that `cancel_turn` stopped midway."""


class StreamedText:
    """An event sink that also keeps the first text a segment streams (a summary's worth).

    It also knows which inline calls (a `tool_call_started` from the runner)
    have no `tool_call_finished` yet, so that a segment that stopped midway can
    end them (`end_running`).
    """

    def __init__(self, sink: StoreEventSink) -> None:
        self._sink = sink
        self._parts: list[str] = []
        self._size = 0
        self._running: dict[str, str] = {}
        """Tool name by call ID, of the calls started and not finished."""

    def emit(self, event: AgentEvent) -> None:
        if event.type == "text_delta" and self._size < SUMMARY_TEXT_LIMIT:
            text = str(event.data.get("text", ""))
            self._parts.append(text)
            self._size += len(text)
        call_id = event.data.get("tool_call_id")
        if event.type == "tool_call_started" and isinstance(call_id, str):
            self._running[call_id] = str(event.data.get("tool_name", ""))
        elif event.type == "tool_call_finished" and isinstance(call_id, str):
            self._running.pop(call_id, None)
        self._sink.emit(event)

    def end_running(self, *, failure: str | None = None) -> None:
        """End each inline call the stopped segment left running.

        `cancelled` after a `cancel_turn` (no `failure`), else `outcome_unknown`
        with `failure`, what ended the attempt. Called once the runner returned or raised, so
        no later event of this attempt can contradict it.
        """
        running, self._running = self._running, {}
        for call_id, tool_name in running.items():
            if failure is None:
                finished = ToolCallFinishedEvent(
                    tool_call_id=call_id,
                    tool_name=tool_name,
                    status="cancelled",
                    rejection_message=CANCELLED_WHILE_RUNNING,
                )
            else:
                finished = ToolCallFinishedEvent(
                    tool_call_id=call_id,
                    tool_name=tool_name,
                    status="outcome_unknown",
                    error=clip(
                        f"the model segment failed while the call ran: {failure}"
                    ),
                )
            self._sink.emit(agent_event(finished))

    @property
    def text(self) -> str:
        return clip("".join(self._parts))


async def left_open(
    store: RuntimeStore, session_id: str, turn_id: str, step_execution_id: str
) -> dict[str, str]:
    """Tool name by call ID, of the inline calls the Step's earlier attempts left running.

    Read from where the turn's events start (a search over cursors) to where
    the next turn's begin: the cost follows the turn, not the session's age.
    """
    number = turn_number(turn_id)
    running: dict[str, str] = {}
    after = await cursor_before_turn(store, session_id, number)
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            call_id = event.data.get("tool_call_id")
            if event.step_execution_id != step_execution_id or not isinstance(
                call_id, str
            ):
                continue
            if event.type == "tool_call_started":
                running[call_id] = str(event.data.get("tool_name", ""))
            elif event.type == "tool_call_finished":
                running.pop(call_id, None)
        if event_turn(batch[-1]) > number:
            break  # the log has moved on to later turns
    return running


def end_left_open(
    sink: StoreEventSink, running: dict[str, str], *, attempt: int
) -> None:
    """End the calls an earlier attempt left running, before attempt `attempt` reruns."""
    for call_id, tool_name in running.items():
        finished = ToolCallFinishedEvent(
            tool_call_id=call_id,
            tool_name=tool_name,
            status="outcome_unknown",
            error=(
                "the model segment stopped while the call ran (its worker stopped "
                f"or crashed); it runs again as attempt {attempt}"
            ),
        )
        sink.emit(agent_event(finished))


_ENDED_BY_THE_TURN: dict[str, str] = {
    "failed": "outcome_unknown",
    "cancelled": "cancelled",
}
"""How a call left running ends, by how its turn ended."""


async def end_calls_of_ended_turn(
    store: RuntimeStore, session_id: str, number: int, summary: JsonObject
) -> None:
    """End the inline calls a failed or cancelled turn left running, if any.

    Each is ended in its own attempt (the attempt's next `seq`), so a reader
    that keeps the latest attempt sees it end. Idempotent: a publish tried
    again finds them ended.
    """
    status = _ENDED_BY_THE_TURN.get(str(summary.get("status")))
    turn_id = str(summary.get("turn_id", ""))
    if status is None or not turn_id:
        return
    running: dict[str, EventRecord] = {}
    last_seq: dict[tuple[str, int], int] = {}
    after = await cursor_before_turn(store, session_id, number)
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            if event.turn_id != turn_id or "/run_model/" not in event.step_execution_id:
                continue
            key = (event.step_execution_id, event.attempt)
            last_seq[key] = max(last_seq.get(key, 0), event.seq)
            call_id = event.data.get("tool_call_id")
            if not isinstance(call_id, str):
                continue
            if event.type == "tool_call_started":
                running[call_id] = event
            elif event.type == "tool_call_finished":
                running.pop(call_id, None)
        if event_turn(batch[-1]) > number:
            break
    if not running:
        return
    now = datetime.now(UTC)
    ends: list[EventRecord] = []
    for call_id, started in running.items():
        key = (started.step_execution_id, started.attempt)
        last_seq[key] += 1
        tool_name = str(started.data.get("tool_name", ""))
        finished = (
            ToolCallFinishedEvent(
                tool_call_id=call_id,
                tool_name=tool_name,
                status="cancelled",
                rejection_message=CANCELLED_WHILE_RUNNING,
            )
            if status == "cancelled"
            else ToolCallFinishedEvent(
                tool_call_id=call_id,
                tool_name=tool_name,
                status="outcome_unknown",
                error=clip(
                    "the model segment ended while the call ran, and the turn "
                    f"failed: {summary.get('error') or 'no reason was given'}"
                ),
            )
        )
        event = stamped(agent_event(finished), now)
        ends.append(
            EventRecord(
                session_id=session_id,
                turn_id=turn_id,
                step_execution_id=started.step_execution_id,
                attempt=started.attempt,
                seq=last_seq[key],
                type=event.type,
                data=event.data,
            )
        )
    await store.append_events(ends)
