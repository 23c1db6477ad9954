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
- **Blobs.** Immutable bytes under an ID the caller derives from the content,
  so a user-sized value (a 20 MB message, a large tool input or output)
  travels through workflow history as a reference instead of as itself.
- **The turn log.** One JSON object per finished turn, appended once, so the
  workflow's state does not grow with the age of the session and a snapshot
  reads only the most recent turns.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from ..session import StoredMessage
from ..session._events import EventRecord
from ..session._json import JsonObject


class SegmentConflictError(Exception):
    """A segment ID was written twice with different content."""


class BlobConflictError(Exception):
    """A blob ID was written twice with different bytes."""


class RuntimeStore(Protocol):
    """Transcript segments, the live event log, snapshot projections, blobs and turns.

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
        self, session_id: str, head_id: str | None, *, max_segments: int | None = None
    ) -> list[StoredMessage]:
        """Every message on the chain ending at `head_id`, oldest segment first.

        `None` is the empty transcript. A missing segment on the chain raises `KeyError`.

        `max_segments`: only the newest N segments of the chain (still returned
        oldest first), so a snapshot of a long session reads its tail at the
        cost of N segments; None reads the whole chain. A chain cut short this
        way is not missing its older segments. Below 1 raises `UserError`.
        """
        ...

    async def put_blob(self, session_id: str, blob_id: str, data: bytes) -> None:
        """Write one immutable blob.

        The same `blob_id` again with equal bytes is a no-op (a retry);
        different bytes raise `BlobConflictError`. Blobs of tens of megabytes
        (at least 40 MB) must work.
        """
        ...

    async def get_blob(self, session_id: str, blob_id: str) -> bytes:
        """The bytes of one blob.

        Raises `KeyError` naming the session and the blob when it was never written.
        """
        ...

    async def put_turn(self, session_id: str, number: int, turn: JsonObject) -> None:
        """Record finished turn `number` (1, 2, ...).

        Writing the same number again replaces it (the workflow's local activity
        may retry, or re-record the same turn). The number is the key, never
        read from `turn`. A number below 1 raises `UserError`.
        """
        ...

    async def read_turns(
        self, session_id: str, *, before: int | None = None, limit: int = 20
    ) -> list[JsonObject]:
        """Recorded turns with a number below `before` (all when None), NEWEST FIRST.

        At most `limit` of them (at least 1, else `UserError`), read at the cost
        of the page, not of the session's age. Paging: pass the smallest number
        you got as the next `before`.
        """
        ...

    async def count_turns(self, session_id: str) -> int:
        """How many turns the session has recorded."""
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

    async def list_snapshots(
        self,
        *,
        status: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[JsonObject]:
        """Sessions' projections, most recently updated first, a page at a time.

        `status` keeps only projections whose `status` is that value; `limit`
        caps the page; `before` is the `session_id` that ended the previous page
        (a session updated between two pages moves to the front: a changing
        list is paged by when each session last changed).

        Raises:
            UserError: `limit` is below 1, or `before` names no listed session.
        """
        ...

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards."""
        ...
