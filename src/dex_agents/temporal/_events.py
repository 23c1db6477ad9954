"""An event sink that writes a Step attempt's live events to the runtime store.

`emit` never blocks the segment: events are queued and a background task
appends them in batches, so a text delta reaches a following client within
milliseconds without one store write per token blocking the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Self

from ..session import AgentEvent, EventRecord
from ..stores import RuntimeStore

_log = logging.getLogger(__name__)
_RETRIES_AFTER_CLOSE = 5
"""Writes tried once the attempt ended, so a store that stays down cannot hold it open."""


class StoreEventSink:
    """Keys events `(session, turn_id, step_execution_id, attempt, seq)` and appends them."""

    def __init__(
        self,
        store: RuntimeStore,
        *,
        session_id: str,
        turn_id: str,
        step_execution_id: str,
        attempt: int,
    ) -> None:
        self._store = store
        self._key = (session_id, turn_id, step_execution_id, attempt)
        self._queue: list[EventRecord] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def emit(self, event: AgentEvent) -> None:
        """Queue one event; it is written by the background flusher."""
        session_id, turn_id, step_id, attempt = self._key
        self._seq += 1
        self._queue.append(
            EventRecord(
                session_id=session_id,
                turn_id=turn_id,
                step_execution_id=step_id,
                attempt=attempt,
                seq=self._seq,
                type=event.type,
                data=event.data,
            )
        )
        self._wake.set()

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self._flush_loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._closed = True
        self._wake.set()
        if self._task is not None:
            # Shielded so a cancelled attempt still writes what it streamed.
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    async def _flush_loop(self) -> None:
        failures = 0
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    await self._store.append_events(batch)
                except Exception:
                    # A store hiccup (a dropped connection, a lock timeout) must not
                    # end the flusher and silently drop the rest of the attempt's
                    # events: keep the batch in order and retry with a backoff,
                    # a few times only once the attempt is over.
                    self._queue = batch + self._queue
                    failures += 1
                    if self._closed and failures > _RETRIES_AFTER_CLOSE:
                        _log.warning(
                            "dropping %d live events of %s after %d failed writes",
                            len(self._queue),
                            "/".join(str(k) for k in self._key),
                            failures,
                            exc_info=True,
                        )
                        return
                    _log.warning("writing live events failed; retrying", exc_info=True)
                    await asyncio.sleep(min(0.05 * 2**failures, 2.0))
                else:
                    failures = 0
            if self._closed:
                return
