"""The live-event sink survives a failing store write instead of dropping the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from dex_agents.session import AgentEvent
from dex_agents.session._events import EventRecord
from dex_agents.stores._memory import InMemoryRuntimeStore
from dex_agents.temporal._events import StoreEventSink


class _FlakyStore(InMemoryRuntimeStore):
    """Fails the first `failures` appends, as a dropped connection would."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.calls = 0

    async def append_events(self, events: Sequence[EventRecord]) -> list[int]:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("server closed the connection unexpectedly")
        return await super().append_events(events)


def _sink(store: InMemoryRuntimeStore) -> StoreEventSink:
    return StoreEventSink(
        store, session_id="s", turn_id="turn-1", step_execution_id="step", attempt=1
    )


async def test_events_after_a_failed_write_are_retried_in_order() -> None:
    store = _FlakyStore(failures=2)
    async with _sink(store) as sink:
        sink.emit(AgentEvent(type="text_delta", data={"text": "a"}))
        await asyncio.sleep(0.05)
        sink.emit(AgentEvent(type="text_delta", data={"text": "b"}))
    events = await store.read_events("s")
    assert [e.data["text"] for e in events] == ["a", "b"]
    assert [e.seq for e in events] == [1, 2]
    assert store.calls > 2


async def test_a_store_that_stays_down_cannot_hold_the_attempt_open() -> None:
    store = _FlakyStore(failures=10**6)
    async with asyncio.timeout(30):
        async with _sink(store) as sink:
            sink.emit(AgentEvent(type="text_delta", data={"text": "lost"}))
    assert await store.read_events("s") == []
