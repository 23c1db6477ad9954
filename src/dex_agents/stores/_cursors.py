"""Finding a place in a session's event log without reading it all.

The store reads events forward only (`read_events(after=x)`), but cursors
are increasing, so "the first event after x" answers a monotone question,
and a binary search over x finds a boundary in about 2·log2(cursor) indexed
one-row reads: the newest cursor (where a new follower joins live), or the
last event before a turn (where a page showing that turn starts following,
and where `dex-agents show` starts reading the calls of the turns it shows).
"""

from __future__ import annotations

from collections.abc import Callable

from ..session._events import EventRecord
from ._protocols import RuntimeStore


def event_turn(event: EventRecord) -> int:
    """The turn number of an event (0 for an event of no turn)."""
    number = event.turn_id.rpartition("-")[2]
    return int(number) if number.isdigit() else 0


async def last_cursor_before(
    store: RuntimeStore, session_id: str, reached: Callable[[EventRecord], bool]
) -> int:
    """The cursor of the last event before the first one `reached` holds for (0: none).

    `reached` must be monotone along the log: false, then true from some event on.
    Following after the answer yields exactly the events `reached` holds for.
    """

    async def before_boundary(x: int) -> bool:
        page = await store.read_events(session_id, after=x, limit=1)
        return bool(page) and not reached(page[0])

    if not await before_boundary(0):
        return 0
    low, high = 0, 1  # before_boundary(low) is True
    while await before_boundary(high):
        low, high = high, high * 2
    while high - low > 1:  # before_boundary(low) True, before_boundary(high) False
        middle = (low + high) // 2
        if await before_boundary(middle):
            low = middle
        else:
            high = middle
    return high


async def newest_cursor(store: RuntimeStore, session_id: str) -> int:
    """The cursor of the session's newest event (0 when it has none)."""
    return await last_cursor_before(store, session_id, lambda _: False)


async def cursor_before_turn(store: RuntimeStore, session_id: str, turn: int) -> int:
    """The cursor after which the events of turn `turn` (and later turns) begin."""
    return await last_cursor_before(store, session_id, lambda e: event_turn(e) >= turn)
