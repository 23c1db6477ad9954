"""The runtime store contract.

The runtime store keeps what must not live in workflow history:

- **Transcript segments.** Immutable lists of `StoredMessage`, written by a
  RunModel attempt under a segment ID that includes the attempt, each naming its
  parent segment. A session's transcript is the chain that ends at the head ID
  the workflow recorded. A crashed attempt's segment is never on that chain, so
  it is never read: visibility comes from the workflow's reference, not from
  the write.
- **The event log.** Live events, appended with a per-session cursor, read from
  a cursor and followed.
- **Snapshot projections.** The last published snapshot of each session, so
  clients can list and show sessions while no worker runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from ..session import EventRecord, JsonObject, StoredMessage


class SegmentConflictError(Exception):
    """A segment ID was written twice with different content."""


class RuntimeStore(Protocol):
    """Transcript segments, the live event log and snapshot projections.

    Implementations must be safe to share between the worker's activities and
    clients in other processes (the SQLite default uses WAL).
    """

    async def put_segment(
        self,
        session_id: str,
        segment_id: str,
        parent_id: str | None,
        messages: Sequence[StoredMessage],
    ) -> None:
        """Write one immutable segment.

        Writing the same `segment_id` again with equal `parent_id` and messages is
        a no-op (an activity may retry its write); different content raises
        `SegmentConflictError`.
        """
        ...

    async def read_segment(
        self, session_id: str, segment_id: str
    ) -> list[StoredMessage]:
        """The messages of one segment; `KeyError` if it was never written."""
        ...

    async def read_transcript(
        self, session_id: str, head_id: str | None
    ) -> list[StoredMessage]:
        """Every message on the chain ending at `head_id`, oldest segment first.

        `None` is the empty transcript. A missing segment on the chain raises `KeyError`.
        """
        ...

    async def append_events(self, events: Sequence[EventRecord]) -> list[int]:
        """Append events (any `cursor` they carry is ignored) and return their new cursors.

        Cursors are positive, strictly increasing per session, and never reused.
        """
        ...

    async def read_events(
        self, session_id: str, *, after: int = 0, limit: int = 1000
    ) -> list[EventRecord]:
        """Events of `session_id` with a cursor greater than `after`, in cursor order."""
        ...

    def follow_events(
        self, session_id: str, *, after: int = 0, poll_interval: float = 0.01
    ) -> AsyncIterator[EventRecord]:
        """Yield events after `after` as they are appended, until the consumer stops."""
        ...

    async def put_snapshot(self, session_id: str, snapshot: JsonObject) -> None:
        """Replace the session's projection; a snapshot with a lower `version` is ignored."""
        ...

    async def get_snapshot(self, session_id: str) -> JsonObject | None:
        """The last projection of the session, or None."""
        ...

    async def list_snapshots(self) -> list[JsonObject]:
        """Every session's projection, most recently updated first."""
        ...

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
