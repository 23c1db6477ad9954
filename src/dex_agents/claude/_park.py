"""A parked resume: the next segment's CLI, started before its decision.

After a segment defers a call, the session waits (for a person's approval, or
for the call's Step). A cold resume then starts a new CLI, which costs about
0.4 s before the model is asked again. A parked resume starts that CLI at once,
with the same options and transcript a cold resume would use, and lets it wait
in the PreToolUse callback of the deferred call (Claude Code waits there as
long as the hook's timeout allows; the hook's timeout is set past the park).
When the decision comes, `resume` hands the segment the attempt's own context,
the final record answers the callback, and the segment goes on exactly as a
cold resume would: the same replay, the same texts for the model, the same
result.

Nothing durable lives here: a park that dies (its process killed, its worker
killed) or closes (its window passed) leaves the session where a cold resume
finds it. Closing answers the callback `defer`, so the CLI ends cleanly.

An approved custom call can go on before its Step has recorded the result
(`prime`): a custom call replays as `allow` with its recorded input whatever
its record says, so the callback answers at once, and the CLI's call of the
tool waits in the tool server for the record the adoption brings. That CLI
can no longer end with a `defer`, so a primed park that is not adopted is
killed, and nothing of it is kept (its transcript is the adopting attempt's).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars

from ..session import (
    AgentEvent,
    RunModelContext,
    ToolCall,
    ToolCallsRequested,
    TurnCompleted,
)
from ._pending_call import PrimedCall
from ._segment import Segment

_CLOSE_SECONDS = 10.0
"""How long a closed park's CLI gets to end on its own before it is killed."""
_PRIMED_SECONDS = 300.0
"""How long a primed park waits for its adoption before its CLI is killed.

The CLI waits in its call of the tool meanwhile (the park's window closes it
sooner when it ends first); a 400 s call of the adapter's tool server was
measured to complete on CLI 2.1.332, so this ends the park before any limit
of the CLI could answer that call. A park is not primed when
`MCP_TOOL_TIMEOUT` sets such a limit (see `prime`).
"""


class LateEvents:
    """An event sink that holds what a parked segment emits until it is adopted."""

    def __init__(self) -> None:
        self._held: list[AgentEvent] = []
        self._sink: RunModelContext | None = None

    def emit(self, event: AgentEvent) -> None:
        """Forward `event` to the adopting attempt's sink, or hold it until then."""
        if self._sink is None:
            self._held.append(event)
        else:
            self._sink.events.emit(event)

    def attach(self, context: RunModelContext) -> None:
        """Send what was held, and everything after, to `context`'s events."""
        self._sink = context
        held, self._held = self._held, []
        for event in held:
            context.events.emit(event)


class ParkedSegment:
    """One parked resume; see the module docstring. Implements `ParkedResume`."""

    def __init__(self, segment: Segment, events: LateEvents) -> None:
        self._segment = segment
        self._events = events
        self._claimed = False
        self._primed: asyncio.TimerHandle | None = None
        # A context of its own: the park outlives the activity that started it,
        # whose context variables (the activity's info, its heartbeat) end with it.
        self._task = asyncio.create_task(segment.run(), context=contextvars.Context())
        self._task.add_done_callback(_retrieve)

    @property
    def pid(self) -> int | None:
        """The parked CLI's PID, once started."""
        return self._segment.cli_pid

    def alive(self) -> bool:
        """Whether a decision can still adopt it (its CLI has not ended)."""
        return not (self._claimed or self._task.done())

    async def ready(self) -> None:
        """Wait until the CLI asks about the deferred call (the park is warm)."""
        awaited = self._segment.awaited
        if awaited is None:
            return
        reached = asyncio.ensure_future(awaited.reached.wait())
        try:
            await asyncio.wait({reached, self._task}, return_when="FIRST_COMPLETED")
        finally:
            reached.cancel()

    def prime(self, call: ToolCall) -> bool:
        """Let the CLI go on with the approved custom `call` while its Step runs.

        False (nothing changes) when the park is gone or answered, when `call`
        is not the parked call, when its input travels by reference, or when
        the CLI's environment bounds its tool calls (`MCP_TOOL_TIMEOUT`).
        """
        awaited = self._segment.awaited
        if not self.alive() or call.arguments_ref is not None:
            return False
        if awaited is None or awaited.tool_use_id != call.tool_call_id:
            return False  # not the parked call: only it may go on
        if self._segment.bounds_tool_calls:
            return False
        primed = PrimedCall(tool_name=call.tool_name, arguments=call.arguments)
        if not self._segment.prime(primed):
            return False
        loop = asyncio.get_running_loop()
        self._primed = loop.call_later(_PRIMED_SECONDS, self._kill_unadopted)
        return True

    def _kill_unadopted(self) -> None:
        if not self._claimed:
            self._claimed = True
            self._task.cancel()  # the segment kills its CLI's process group

    async def resume(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested | None:
        """Run the rest of the segment as `context`'s attempt; None if the park is gone.

        None means nothing reached the CLI: the caller resumes cold. Once
        adopted, what the segment raises is the attempt's failure.
        """
        if not self.alive():
            return None
        self._claimed = True
        if self._primed is not None:
            self._primed.cancel()
        try:
            self._events.attach(context)
            await self._segment.adopt(context)
        except BaseException:
            await self._stop()
            raise
        return await self._task

    async def close(self) -> None:
        """End a park no decision adopted: its CLI ends with the same deferral."""
        if self._claimed:
            return
        self._claimed = True
        await self._stop()

    async def _stop(self) -> None:
        if self._primed is not None:
            # Past its callback, the CLI cannot end with a deferral: kill it.
            self._primed.cancel()
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
            return
        self._segment.close()
        try:
            async with asyncio.timeout(_CLOSE_SECONDS):
                await asyncio.wait({self._task})
        except TimeoutError:
            self._task.cancel()  # the segment kills its CLI's process group
            with contextlib.suppress(BaseException):
                await self._task


def _retrieve(task: asyncio.Task[object]) -> None:
    """Mark a park's failure as seen: a dead park is an expected end."""
    if not task.cancelled():
        task.exception()
