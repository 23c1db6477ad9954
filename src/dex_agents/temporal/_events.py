"""An event sink that writes a Step attempt's live events to the runtime store.

`emit` never blocks the segment: events are queued and a background task
appends them in batches, so a text delta reaches a following client within
milliseconds without one store write per token blocking the runner.

Every event is stamped with the time it was emitted, and kept small: a tool
output or call input longer than `EVENT_INLINE_LIMIT` (what a runner emits
as is, such as a Bash output) is replaced by a preview and a reference to a
blob, which the flusher writes before the event that names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from typing import Self, cast

from pydantic import TypeAdapter

from ..session import AgentEvent
from ..session._blob import BlobReference, blob_reference, preview
from ..session._events import EventRecord, stamped
from ..session._json import JsonObject
from ..session._pending import INLINE_TEXT_LIMIT
from ..stores import RuntimeStore

_log = logging.getLogger(__name__)
_RETRIES_AFTER_CLOSE = 5
"""Writes tried once the attempt ended, so a store that stays down cannot hold it open."""
EVENT_INLINE_LIMIT = 4 * INLINE_TEXT_LIMIT
"""Bytes of a tool output or call input an event carries whole (the records' limit too)."""


def bounded(data: JsonObject) -> tuple[JsonObject, list[tuple[str, bytes]]]:
    """`data` with a long `output` or `arguments` moved to blobs, and the blobs to write.

    The blobs are content-addressed (`out-…`, `args-…`, as the session's
    records name theirs), so a value both carry is stored once.
    """
    blobs: list[tuple[str, bytes]] = []
    output = data.get("output")
    # A character is at most 4 bytes: shorter texts need no encoding to know.
    if isinstance(output, str) and len(output) > EVENT_INLINE_LIMIT // 4:
        raw = output.encode()
        if len(raw) > EVENT_INLINE_LIMIT:
            ref = blob_reference("out", raw)
            blobs.append((ref.blob_id, raw))
            data = {**data, "output": preview(output), "output_ref": _ref_json(ref)}
    arguments = data.get("arguments")
    if isinstance(arguments, dict) and arguments:
        raw = _ARGUMENTS.dump_json(cast(JsonObject, arguments))
        if len(raw) > EVENT_INLINE_LIMIT:
            ref = blob_reference("args", raw)
            blobs.append((ref.blob_id, raw))
            data = {**data, "arguments": {}, "arguments_ref": _ref_json(ref)}
    return data, blobs


_ARGUMENTS: TypeAdapter[JsonObject] = TypeAdapter(JsonObject)


def _ref_json(ref: BlobReference) -> JsonObject:
    return {"blob_id": ref.blob_id, "size": ref.size, "sha256": ref.sha256}


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
        self._blobs: list[tuple[str, bytes]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    def emit(self, event: AgentEvent) -> None:
        """Queue one event, stamped now; it is written by the background flusher."""
        session_id, turn_id, step_id, attempt = self._key
        event = stamped(event, datetime.now(UTC))
        data, blobs = bounded(event.data)
        self._blobs.extend(blobs)
        self._seq += 1
        self._queue.append(
            EventRecord(
                session_id=session_id,
                turn_id=turn_id,
                step_execution_id=step_id,
                attempt=attempt,
                seq=self._seq,
                type=event.type,
                data=data,
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
                blobs, self._blobs = self._blobs, []
                try:
                    for blob_id, data in blobs:
                        await self._store.put_blob(self._key[0], blob_id, data)
                    await self._store.append_events(batch)
                except Exception:
                    # A store hiccup (a dropped connection, a lock timeout) must not
                    # end the flusher and silently drop the rest of the attempt's
                    # events: keep the batch in order and retry with a backoff,
                    # a few times only once the attempt is over.
                    self._queue = batch + self._queue
                    self._blobs = blobs + self._blobs
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
