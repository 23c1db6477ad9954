"""The same stream in the AG-UI event format (PyPI `ag-ui-protocol`), for agent front ends.

One session is one AG-UI thread and each turn one run (`run_id` = the turn
ID). Each event of the log becomes one AG-UI event with the same SSE `id`
(the cursor), so a resumed stream (`Last-Event-ID`) neither repeats nor
skips anything. Streams use the self-contained `*_CHUNK` events, which need
no start/end pairing that a reconnect could cut in half.

| dex event | AG-UI event |
| --- | --- |
| `turn_started` | `RUN_STARTED` |
| `text_delta` | `TEXT_MESSAGE_CHUNK`, `messageId` = `<step>#<attempt>` |
| `reasoning_delta` | `REASONING_MESSAGE_CHUNK` |
| `tool_call_started` | `TOOL_CALL_CHUNK` (name and the whole input as JSON) |
| `tool_call_finished` | `TOOL_CALL_RESULT` |
| `interrupt_created` | `RUN_FINISHED` with an `interrupt` outcome (the approval; a spend limit's has `reason` `spend_limit` and a `responseSchema` for `new_spend_limit`) |
| `interrupt_resolved` | `RUN_STARTED` (the turn goes on), who decided in `metadata` |
| `turn_completed` | `RUN_FINISHED` |
| `turn_failed` | `RUN_ERROR` (`code` `turn_failed`) |
| `turn_cancelled` | `RUN_FINISHED` with the `cancelled` outcome; reason and who in `metadata.cancellation` |
| anything else, and `attempt_superseded` | `CUSTOM`, named `dex.<type>` |

A retried attempt's text is a new message (its `messageId` names the
attempt), and `dex.attempt_superseded` names the messages to drop. Every
event's `metadata.dex` carries the cursor, the attempt and `superseded`.

A cancelled turn is a run that was stopped, not one that failed: AG-UI's
`RUN_FINISHED` with the `cancelled` outcome says exactly that (neither success
nor an interrupt; the next run is a new run, not a resume), where `RUN_ERROR`
would make a front end show a person's Stop as an error.
"""

from __future__ import annotations

import json
from datetime import datetime

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    Interrupt,
    ReasoningMessageChunkEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    TextMessageChunkEvent,
    ToolCallChunkEvent,
    ToolCallResultEvent,
)

from ..session._events import EventRecord
from ..session._json import JsonObject
from ._stream import Delivered, StreamItem, Superseded


def message_id(step_execution_id: str, attempt: int) -> str:
    """The AG-UI message of one attempt's text."""
    return f"{step_execution_id}#{attempt}"


def _millis(timestamp: str) -> int | None:
    try:
        return int(datetime.fromisoformat(timestamp).timestamp() * 1000)
    except ValueError:
        return None


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _usd(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else "?"


def agui_event(session_id: str, item: StreamItem) -> BaseEvent | None:
    """The AG-UI event of one stream item (None: an empty delta, which AG-UI refuses)."""
    if isinstance(item, Superseded):
        dropped = [
            message_id(item.step_execution_id, a) for a in range(1, item.attempt)
        ]
        return CustomEvent(
            name="dex.attempt_superseded",
            value={**item.json(), "drop_message_ids": dropped},
        )
    event = _translate(session_id, item)
    if event is None:
        return None
    event.timestamp = _millis(item.event.timestamp)
    event.metadata = {
        **(event.metadata or {}),
        "dex": {
            "cursor": item.event.cursor,
            "type": item.event.type,
            "attempt": item.event.attempt,
            "superseded": item.superseded,
        },
    }
    return event


def _waiting_for(
    session_id: str, event: EventRecord, interrupt: Interrupt
) -> RunFinishedEvent:
    """The run stops to wait for `interrupt`, the approval event as its result."""
    return RunFinishedEvent(
        thread_id=session_id,
        run_id=event.turn_id,
        outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]),
        result={"approval": dict(event.data)},
    )


def _translate(session_id: str, item: Delivered) -> BaseEvent | None:
    e: EventRecord = item.event
    data: JsonObject = e.data
    match e.type:
        case "turn_started":
            return RunStartedEvent(thread_id=session_id, run_id=e.turn_id)
        case "text_delta":
            text = _text(data.get("text"))
            if not text:
                return None
            return TextMessageChunkEvent(
                message_id=message_id(e.step_execution_id, e.attempt),
                role="assistant",
                delta=text,
            )
        case "reasoning_delta":
            text = _text(data.get("text"))
            if not text:
                return None
            return ReasoningMessageChunkEvent(
                message_id=message_id(e.step_execution_id, e.attempt) + "/reasoning",
                delta=text,
            )
        case "tool_call_started":
            return ToolCallChunkEvent(
                tool_call_id=_text(data.get("tool_call_id")),
                tool_call_name=_text(data.get("tool_name")),
                delta=json.dumps(data.get("arguments") or {}),
            )
        case "tool_call_finished":
            call_id = _text(data.get("tool_call_id"))
            content = _text(data.get("output")) or _text(data.get("rejection_message"))
            return ToolCallResultEvent(
                message_id=f"{call_id}#result",
                tool_call_id=call_id,
                content=content or _text(data.get("status")),
                role="tool",
            )
        case "interrupt_created" if data.get("kind") == "budget":
            arguments = data.get("arguments")
            given = arguments if isinstance(arguments, dict) else {}
            spent, limit = given.get("spent_usd"), given.get("spend_limit_usd")
            interrupt = Interrupt(
                id=_text(data.get("interrupt_id")),
                reason="spend_limit",
                message=f"spend limit reached: {_usd(spent)} of {_usd(limit)} USD "
                "spent; approve with a new limit (`new_spend_limit`, USD) above what "
                "was spent, or reject to end the turn",
                response_schema={
                    "type": "object",
                    "properties": {
                        "new_spend_limit": {
                            "type": "number",
                            "exclusiveMinimum": spent
                            if isinstance(spent, int | float)
                            else 0,
                        }
                    },
                    "required": ["new_spend_limit"],
                },
                expires_at=_text(data.get("deadline")) or None,
            )
            return _waiting_for(session_id, e, interrupt)
        case "interrupt_created":
            tool = _text(data.get("tool_name"))
            interrupt = Interrupt(
                id=_text(data.get("interrupt_id")),
                reason="tool_approval",
                message=f"approve {tool} ({_text(data.get('effect'))})?",
                tool_call_id=_text(data.get("tool_call_id")) or None,
                expires_at=_text(data.get("deadline")) or None,
            )
            return _waiting_for(session_id, e, interrupt)
        case "interrupt_resolved":
            return RunStartedEvent(
                thread_id=session_id,
                run_id=e.turn_id,
                metadata={"resolution": {**data, "resolved_by": item.resolved_by}},
            )
        case "turn_completed":
            return RunFinishedEvent(
                thread_id=session_id,
                run_id=e.turn_id,
                outcome=RunFinishedSuccessOutcome(),
            )
        case "turn_failed":
            return RunErrorEvent(
                message=_text(data.get("error")) or "the turn failed",
                code="turn_failed",
            )
        case "turn_cancelled":
            return RunFinishedEvent(
                thread_id=session_id,
                run_id=e.turn_id,
                outcome=RunFinishedCancelledOutcome(),
                metadata={
                    "cancellation": {
                        "reason": _text(data.get("reason")),
                        "cancelled_by": data.get("cancelled_by"),
                    }
                },
            )
        case _:
            return CustomEvent(name=f"dex.{e.type}", value=dict(data))
