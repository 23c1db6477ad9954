"""Updates under a deadline: whether a worker took one, told apart from cancellation.

Temporal hands an Update to a worker only: with none running, the server
holds it in memory (not in history) and the client's call waits. temporalio
(1.35) waits for acceptance in a loop of RPCs and turns both a cancelled
call and the server's own RPC deadline into `WorkflowUpdateRPCTimeoutOrCancelledError`,
so an `asyncio.timeout` around it raises that error instead of `TimeoutError`,
and a cancelled caller never sees `CancelledError`. `within` restores both
meanings: our deadline passing is "not taken in time", a cancellation of the
caller stays a cancellation, and the server's deadline is only a reason to
ask again (with the same Update ID, so the server keeps one Update).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError

from .._errors import UserError

_T = TypeVar("_T")


def timeout_seconds(timeout: timedelta | float | None) -> float | None:
    """`timeout=` of a client call in seconds; None waits as long as it takes.

    Raises:
        UserError: the timeout is negative.
    """
    if timeout is None:
        return None
    seconds = (
        timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    )
    if seconds < 0:
        raise UserError(f"`timeout` must not be negative, got {timeout!r}")
    return seconds


class Deadline:
    """A point in time shared by the RPCs of one call (None: no deadline)."""

    def __init__(self, seconds: float | None) -> None:
        loop = asyncio.get_running_loop()
        self.seconds = seconds
        self._at = None if seconds is None else loop.time() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never below zero), or None without a deadline."""
        if self._at is None:
            return None
        return max(0.0, self._at - asyncio.get_running_loop().time())

    def cap(self, seconds: float) -> float:
        """`seconds`, or less if the deadline comes first."""
        left = self.remaining()
        return seconds if left is None else min(seconds, left)


async def within(
    deadline: Deadline, call: Callable[[], Awaitable[_T]]
) -> tuple[bool, _T | None]:
    """Run `call()` until it returns or `deadline` passes: `(True, value)` or `(False, None)`.

    `call` must be safe to repeat (an Update with a fixed ID): it is called
    again when the server's RPC deadline, not ours, ended an attempt.

    Raises:
        asyncio.CancelledError: the caller was cancelled.
    """
    while True:
        left = deadline.remaining()
        if left is not None and left <= 0:
            return False, None
        scope = asyncio.timeout(left)
        try:
            async with scope:
                return True, await call()
        except TimeoutError:
            if scope.expired():
                return False, None
            raise
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            if scope.expired():
                return False, None
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from None
            continue  # the server's deadline: the Update still waits there
