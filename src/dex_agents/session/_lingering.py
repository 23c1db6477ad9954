"""Work an activity leaves running after it returns, which its worker waits for.

A model segment returns at the CLI's result and lets the CLI exit on its own
(bounded, then killed): the session's answer does not wait for the exit. The
worker that ran it waits for those exits when it stops, so a program that
ends right after its last turn leaves no process behind and no subprocess
transport to an event loop that is closed.
"""

from __future__ import annotations

import asyncio

_LINGERING: set[asyncio.Task[None]] = set()
"""The tasks still running (kept referenced until they end)."""


def linger(task: asyncio.Task[None]) -> None:
    """Keep `task` until it ends, for `settle` to wait for."""
    _LINGERING.add(task)
    task.add_done_callback(_LINGERING.discard)


async def settle(timeout: float) -> None:
    """Wait up to `timeout` seconds for this event loop's lingering tasks to end."""
    loop = asyncio.get_running_loop()
    tasks = {t for t in _LINGERING if t.get_loop() is loop and not t.done()}
    if tasks:
        await asyncio.wait(tasks, timeout=timeout)
