"""The parked resumes one worker holds for one flow, and the queue that reaches them.

When a segment defers a call, its `run_model` activity asks the runner to start
the resumed segment at once (`park_resume`) and keeps it here, under the
session and the deferring segment's ID, for `hot_resume_window`. Its output
names this worker's own task queue (`queue`); the workflow sends the resumed
segment's Step there while the window lasts, and that Step takes the park.
Everything else goes through the cold path:

- no room (`max_parked_segments`), or a runner that cannot park: no park;
- the window passed: the park is closed (its CLI ends with the same deferral,
  and no process is left while the session waits on);
- the park died, or the Step reached another worker: the Step runs cold.

An approved call's tool Step can prime the park first (`prime`): the parked
CLI goes on with the call while the Step runs, and waits for its record.

Nothing here is durable or needs to be: the durable facts (records, the
deferring segment) are in the store and the history before a park starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from ..session import ToolCall
from ..session._runner import ParkedResume

logger = logging.getLogger("dex_agents.temporal.parking")

Key = tuple[str, str]
"""A park's key: the session ID and the deferring segment's ID."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What a resumed Step must share with its park to take it."""

    turn_id: str
    transcript_head: str | None
    max_budget_usd: float | None

    def matches(self, other: Fingerprint) -> bool:
        """Equal, the budget within a rounding of the session's arithmetic."""
        if (self.turn_id, self.transcript_head) != (
            other.turn_id,
            other.transcript_head,
        ):
            return False
        if self.max_budget_usd is None or other.max_budget_usd is None:
            return self.max_budget_usd == other.max_budget_usd
        return abs(self.max_budget_usd - other.max_budget_usd) < 1e-5


@runtime_checkable
class _Primable(Protocol):
    """A park whose CLI can go on with an approved call before its record (Claude's)."""

    def prime(self, call: ToolCall) -> bool: ...


@dataclass(slots=True)
class _Park:
    fingerprint: Fingerprint
    started: asyncio.Task[ParkedResume | None]
    timer: asyncio.TimerHandle | None = None
    pid: int | None = field(default=None)


class ParkingLot:
    """The parks of one flow on one worker; see the module docstring."""

    def __init__(self, *, flow_type: str, queue: str, limit: int, window: float):
        self.flow_type = flow_type
        self.limit = limit
        self.window = window
        self.queue = queue
        """This worker's own task queue for resumed segments it holds parked."""
        self._parks: dict[Key, _Park] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._background: set[asyncio.Future[None]] = set()

    @property
    def enabled(self) -> bool:
        """Whether this flow parks at all (a window and room for one)."""
        return self.window > 0 and self.limit > 0

    def __len__(self) -> int:
        return len(self._parks)

    def pids(self) -> list[int]:
        """The PIDs of the parked CLIs (those started so far)."""
        return [p.pid for p in self._parks.values() if p.pid is not None]

    def park(
        self,
        key: Key,
        fingerprint: Fingerprint,
        start: Callable[[], Coroutine[object, object, ParkedResume]],
    ) -> bool:
        """Start a park in the background; False (no park) when the lot is full."""
        if not self.enabled or key in self._parks or len(self._parks) >= self.limit:
            if self.enabled and key not in self._parks:
                logger.info(
                    "no park for session %s: %d of %d parked segments held "
                    "(max_parked_segments); its decision resumes cold",
                    key[0],
                    len(self._parks),
                    self.limit,
                )
            return False
        # A context of its own: the park outlives the activity that starts it.
        started = asyncio.create_task(start(), context=contextvars.Context())
        park = _Park(fingerprint=fingerprint, started=started)
        self._parks[key] = park
        park.started.add_done_callback(lambda task: self._started(key, park, task))
        return True

    def _started(
        self, key: Key, park: _Park, task: asyncio.Task[ParkedResume | None]
    ) -> None:
        if task.cancelled() or task.exception() is not None:
            if not task.cancelled():
                logger.warning(
                    "could not park the resumed segment of session %s: %s",
                    key[0],
                    task.exception(),
                )
            if self._parks.get(key) is park:
                del self._parks[key]
            return
        parked = task.result()
        if parked is None or self._parks.get(key) is not park:
            return
        loop = asyncio.get_running_loop()
        park.timer = loop.call_later(self.window, self._expire, key, park)
        ready = asyncio.ensure_future(parked.ready())
        self._background.add(ready)
        ready.add_done_callback(self._background.discard)
        ready.add_done_callback(lambda _: self._log_parked(key, park, parked))

    def _log_parked(self, key: Key, park: _Park, parked: ParkedResume) -> None:
        park.pid = parked.pid
        if self._parks.get(key) is not park:
            return  # taken (or closed) before it was warm: its own line says so
        logger.info(
            "parked the resumed segment of session %s (CLI pid %s) for %.0f s; "
            "%d of %d parked segments held",
            key[0],
            parked.pid,
            self.window,
            len(self._parks),
            self.limit,
        )

    def _expire(self, key: Key, park: _Park) -> None:
        if self._parks.get(key) is not park:
            return
        del self._parks[key]
        logger.info(
            "closed the parked segment of session %s: its window (%.0f s) passed; "
            "its decision resumes cold",
            key[0],
            self.window,
        )
        self._close(park)

    async def take(self, key: Key, fingerprint: Fingerprint) -> ParkedResume | None:
        """The park for `key` if it is alive and matches; it leaves the lot."""
        park = self._parks.pop(key, None)
        if park is None:
            return None
        if park.timer is not None:
            park.timer.cancel()
        if not park.fingerprint.matches(fingerprint):
            logger.info(
                "the parked segment of session %s does not match its Step; "
                "resuming cold",
                key[0],
            )
            self._close(park)
            return None
        try:
            parked = await park.started
        except Exception:
            return None
        if parked is None or not parked.alive():
            return None
        logger.info(
            "answered the parked segment of session %s (CLI pid %s)",
            key[0],
            parked.pid,
        )
        return parked

    async def prime(self, key: Key, call: ToolCall) -> bool:
        """Let the park for `key` go on with the approved `call`; False if it cannot.

        The park stays in the lot: the resumed segment's Step still takes it.
        """
        park = self._parks.get(key)
        if park is None:
            return False
        try:
            parked = await park.started
        except Exception:
            return False
        if self._parks.get(key) is not park or not isinstance(parked, _Primable):
            return False
        if not parked.prime(call):
            return False
        logger.info(
            "primed the parked segment of session %s (CLI pid %s): it goes on with "
            "the approved %s while the call's Step runs",
            key[0],
            parked.pid,
            call.tool_name,
        )
        return True

    def release(self, key: Key) -> None:
        """Close the park for `key` (its turn ended without resuming it)."""
        park = self._parks.pop(key, None)
        if park is not None:
            logger.info(
                "closed the parked segment of session %s: its turn ended", key[0]
            )
            self._close(park)

    def drop_session(self, session_id: str, keep: Key | None = None) -> None:
        """Close the session's other parks: a new segment makes them stale."""
        for key in [k for k in self._parks if k[0] == session_id and k != keep]:
            self._close(self._parks.pop(key))

    def _close(self, park: _Park) -> None:
        if park.timer is not None:
            park.timer.cancel()

        async def close() -> None:
            with contextlib.suppress(Exception):
                parked = await park.started
                if parked is not None:
                    await parked.close()

        task = asyncio.create_task(close(), context=contextvars.Context())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close_all(self) -> None:
        """Close every park (the worker stops); wait for their CLIs to end."""
        for key in list(self._parks):
            self._close(self._parks.pop(key))
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
