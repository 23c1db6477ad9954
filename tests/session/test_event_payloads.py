"""Typed event payloads: what producers build and readers parse back, on plain data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import get_args

from dex_agents.session import (
    AgentEvent,
    TextDeltaEvent,
    ToolCallFinishedEvent,
)
from dex_agents.session._blob import BlobReference
from dex_agents.session._events import (  # pyright: ignore[reportPrivateUsage]
    _PAYLOAD,  # every payload type, to check that each event type has one
    AgentEventType,
    EventRecord,
    SessionEndedEvent,
    TurnStartedEvent,
    agent_event,
    event_time,
    stamped,
)

AT = datetime(2026, 12, 1, 12, 0, 0, 250_000, tzinfo=UTC)


def record(event: AgentEvent) -> EventRecord:
    return EventRecord(
        session_id="payloads",
        turn_id="turn-1",
        step_execution_id="session",
        attempt=0,
        seq=1,
        type=event.type,
        data=event.data,
    )


def test_a_payload_travels_as_an_agent_event_and_parses_back() -> None:
    ref = BlobReference(blob_id="out-abc", size=9000, sha256="abc")
    finished = ToolCallFinishedEvent(
        tool_call_id="call-1",
        tool_name="create_refund",
        status="outcome_unknown",
        output="a preview…",
        output_ref=ref,
        error="ConnectionError: refused",
        attempts=3,
    )

    event = agent_event(finished)

    assert event.type == "tool_call_finished"
    assert "type" not in event.data and "timestamp" not in event.data
    assert event.data["output_ref"] == {
        "blob_id": "out-abc",
        "size": 9000,
        "sha256": "abc",
    }
    assert record(event).payload() == finished
    assert event.payload() == finished


def test_every_event_type_has_a_payload_type() -> None:
    discriminated = _PAYLOAD.json_schema()["discriminator"]["mapping"]
    assert set(discriminated) == set(get_args(AgentEventType))


def test_stamping_sets_a_utc_millisecond_timestamp_once() -> None:
    event = agent_event(TurnStartedEvent(turn_id="turn-1"))

    once = stamped(event, AT)
    twice = stamped(once, AT + timedelta(hours=1))

    assert once.data["timestamp"] == "2026-12-01T12:00:00.250+00:00"
    assert twice == once
    assert record(once).timestamp == "2026-12-01T12:00:00.250+00:00"
    assert record(event).timestamp == ""
    payload = record(once).payload()
    assert isinstance(payload, TurnStartedEvent)
    assert payload.timestamp == "2026-12-01T12:00:00.250+00:00"
    other_zone = AT.astimezone(timezone(timedelta(hours=2)))
    assert event_time(other_zone) == "2026-12-01T12:00:00.250+00:00"


def test_data_that_does_not_fit_its_type_parses_to_none() -> None:
    assert AgentEvent(type="text_delta", data={"txt": 1}).payload() is None
    assert AgentEvent(type="text_delta", data={"text": "hi"}).payload() == (
        TextDeltaEvent(text="hi")
    )
    # Fields added later have defaults, so an older event still parses.
    assert AgentEvent(type="session_ended").payload() == SessionEndedEvent()
