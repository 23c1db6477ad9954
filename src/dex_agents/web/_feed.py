"""One poller per followed session, shared by every client that follows it.

The runtime store is followed by polling (its writers are other processes),
so 200 browsers on one session must not mean 200 pollers: a `Feed` polls the
store once for all of them, keeps the newest events in a window, and wakes
its followers. A follower that starts further back than the window (a
reconnect after a long gap, or from the start) reads the store itself until
it reaches the window. Cursors are strictly increasing per session, so a
follower that asks for "after my cursor" never sees an event twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from itertools import takewhile

from ..session._events import EventRecord
from ..stores import RuntimeStore
from ..stores._cursors import newest_cursor
from ._errors import ApiError

WINDOW = 2000
"""Events each feed keeps in memory for followers that are a little behind."""
PAGE = 500
"""Events one store read returns."""


class Feed:
    """The shared poller of one session's event log."""

    def __init__(
        self, store: RuntimeStore, session_id: str, poll_interval: float
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.head = -1
        """The cursor of the newest event polled (the window ends there); -1 until
        the feed starts, where it is the log's newest: a follower's own claim
        (a stale or forged `Last-Event-ID`) never moves it."""
        self.window: deque[EventRecord] = deque(maxlen=WINDOW)
        self.followers = 0
        self._poll_interval = poll_interval
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._failure: BaseException | None = None
        self._starting = asyncio.Lock()
        self._generation = 0
        """Bumped on every change, so a follower that checked cannot miss a wake-up."""

    async def start(self) -> None:
        """Start polling from the log's newest event, unless it polls already."""
        async with self._starting:
            if self.head < 0:
                self.head = await newest_cursor(self.store, self.session_id)
            if self._task is None or self._task.done():
                self._failure = None
                self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        try:
            while True:
                batch = await self.store.read_events(
                    self.session_id, after=self.head, limit=PAGE
                )
                if batch:
                    self.window.extend(batch)
                    self.head = batch[-1].cursor
                    await self._wake()
                if len(batch) < PAGE:
                    await asyncio.sleep(self._poll_interval)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the store failed: wake followers to see it
            self._failure = err
            await self._wake()

    async def _wake(self) -> None:
        self._generation += 1
        async with self._changed:
            self._changed.notify_all()

    async def after(self, cursor: int) -> list[EventRecord]:
        """Events after `cursor`: at least one, waiting for the next when none is there."""
        while True:
            seen = self._generation
            if self._failure is not None:
                raise self._failure
            start = self.window[0].cursor if self.window else self.head + 1
            if cursor + 1 < start or (not self.window and cursor < self.head):
                # Behind the window: read the store until the follower catches up.
                page = await self.store.read_events(
                    self.session_id, after=cursor, limit=PAGE
                )
                if page:
                    return page
            # Newest first from the right end: the cost is the new events, not the window.
            newer = list(takewhile(lambda e: e.cursor > cursor, reversed(self.window)))
            if newer:
                return newer[::-1]
            async with self._changed:
                await self._changed.wait_for(lambda seen=seen: self._generation != seen)

    async def close(self) -> None:
        """Stop polling."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


class Feeds:
    """The app's feeds, one per session followed now; a feed stops with its last follower."""

    def __init__(self, store: RuntimeStore, *, poll_interval: float = 0.02) -> None:
        self.store = store
        self.poll_interval = poll_interval
        self._feeds: dict[str, Feed] = {}

    async def follow(self, session_id: str, after: int) -> AsyncIterator[EventRecord]:
        """Yield the session's events after `after`, in cursor order, until closed."""
        feed = self._feeds.get(session_id)
        if feed is None:
            feed = self._feeds[session_id] = Feed(
                self.store, session_id, self.poll_interval
            )
        feed.followers += 1
        cursor = after
        try:
            await feed.start()
            while True:
                for event in await feed.after(cursor):
                    cursor = event.cursor
                    yield event
        finally:
            feed.followers -= 1
            if feed.followers == 0 and self._feeds.get(session_id) is feed:
                del self._feeds[session_id]
                await asyncio.shield(feed.close())

    async def close(self) -> None:
        """Stop every feed (the app shuts down)."""
        feeds, self._feeds = list(self._feeds.values()), {}
        for feed in feeds:
            await feed.close()


class StreamSlots:
    """How many event streams are open, per caller and in all; past a cap a new one is 429.

    Each stream holds a connection (and a file descriptor) for as long as the
    client keeps it: without a cap one token, or anyone on an anonymous
    loopback, could open streams until the server has no descriptors left.
    """

    def __init__(self, *, per_caller: int, total: int) -> None:
        self.per_caller = per_caller
        self.total = total
        self.open: dict[str, int] = {}

    def take(self, caller: str) -> StreamSlot:
        """A slot for one stream of `caller` (a principal's name), to release when it ends.

        Raises:
            ApiError: 429 `too_many_streams`, naming the cap that was reached.
        """
        mine = self.open.get(caller, 0)
        if mine >= self.per_caller:
            raise ApiError(
                429,
                "too_many_streams",
                f"{caller!r} has {mine} event streams open, the most one caller may "
                f"(max_streams_per_caller={self.per_caller}); close one (a browser "
                "tab, an EventSource) before opening another",
            )
        everyone = sum(self.open.values())
        if everyone >= self.total:
            raise ApiError(
                429,
                "too_many_streams",
                f"the app has {everyone} event streams open, the most it serves "
                f"(max_streams={self.total}); try again when one has closed",
            )
        self.open[caller] = mine + 1
        return StreamSlot(self, caller)


class StreamSlot:
    """One open stream's place in `StreamSlots`; `release` is safe to call twice."""

    def __init__(self, slots: StreamSlots, caller: str) -> None:
        self._slots: StreamSlots | None = slots
        self._caller = caller

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is None:
            return
        left = slots.open.get(self._caller, 0) - 1
        if left > 0:
            slots.open[self._caller] = left
        else:
            slots.open.pop(self._caller, None)
