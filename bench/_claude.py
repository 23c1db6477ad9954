"""One Claude agent, run three ways: as a durable session, as the bare adapter, and plain.

The durable session is what an application gets from
`create_claude_agent_session_flow`, served by a worker in this process, so
handler timestamps and client timestamps come from one monotonic clock. The
plain baseline is what the same application would write without dex-agents: a
`query()` with the same options and the same tools, served by the SDK's own
MCP server, and a PreToolUse hook that allows every call. The bare adapter
(`ClaudeAgentRunner.run_model` with no engine) sits between the two, so a gap
can be split into what the adapter's CLI options cost and what Temporal costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    ResultMessage,
    SdkMcpTool,
    ToolAnnotations,
    create_sdk_mcp_server,
    query,
    tool,
)
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from dex_agents import AgentSessionOptions, ToolPolicy
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.session import (
    AgentEvent,
    RunModelContext,
    StoredMessage,
    ToolCallsRequested,
    TurnCompleted,
)
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.temporal._workflow import ActivityNames

from ._procs import rss_mb, settled_cli_count
from ._rig import BenchError, Rig

SAY = "dex-script: say hi"
READ = 'dex-script: call lookup_order {"orderId": "7"}'
WRITE = 'dex-script: call create_refund {"orderId": "7"}'
SERVER = "tools"


@dataclass
class HandlerClock:
    """When the custom tools' handlers ran, on this process's monotonic clock."""

    refunds_started: list[float] = field(default_factory=lambda: [])
    lookups: int = 0


def make_tools(clock: HandlerClock) -> list[SdkMcpTool[Any]]:
    """The support agent's two tools; `create_refund` stamps the moment it starts."""

    @tool(
        "lookup_order",
        "Look up an order by its ID",
        {"orderId": str},
        annotations=ToolAnnotations(readOnlyHint=True),
    )
    async def lookup_order(args: dict[str, Any]) -> dict[str, Any]:
        clock.lookups += 1
        text = f"order {args['orderId']}: a blue kettle, arrived broken"
        return {"content": [{"type": "text", "text": text}]}

    @tool("create_refund", "Refund an order", {"orderId": str})
    async def create_refund(args: dict[str, Any]) -> dict[str, Any]:
        clock.refunds_started.append(time.monotonic())
        return {"content": [{"type": "text", "text": f"refunded {args['orderId']}"}]}

    return [lookup_order, create_refund]


async def _allow(
    input: HookInput, tool_use_id: str | None, context: HookContext
) -> HookJSONOutput:
    """The plain baseline's PreToolUse hook: every call runs inline, at once."""
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
        }
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteTiming:
    """One approved write through a durable session, phase by phase (seconds)."""

    total: float
    """Message sent → turn completed, approval given the moment it was asked."""
    deferring: float
    """Message sent → the session reported it waits for approval."""
    resumed: float
    """`resolve_interrupt` returned → turn completed."""
    resolve_to_handler: float
    """`resolve_interrupt` returned → the tool handler started (may be < 0)."""
    clis_while_waiting: int
    """Claude Code processes alive while the session waited."""
    parked_rss_mb: float | None = None
    """RSS of the parked CLI when the approval came (None: resumed cold)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnPhases:
    """Where a durable turn's time went, from the server's history timestamps (ms).

    The server and this process share the machine's wall clock, so client
    times and history event times can be subtracted.
    """

    to_segment: float
    """Message sent → the `run_model` activity started (Update, workflow task)."""
    segment: float
    """The `run_model` activity: the CLI segment plus storing its messages."""
    to_idle: float
    """Activity completed → the `send_and_wait` Update completed (workflow task, publish)."""
    client_read: float
    """Then: the Update's answer, the snapshot Query and the transcript read."""
    runner: float
    """Inside the activity: `ClaudeAgentRunner.run_model` alone."""


_OF_AN_ACTIVITY = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
}


def _scheduled_id(event: HistoryEvent) -> int:
    """The scheduled event an activity's started or completed event belongs to."""
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        return event.activity_task_started_event_attributes.scheduled_event_id
    return event.activity_task_completed_event_attributes.scheduled_event_id


class _NoTranscript:
    async def messages(self) -> list[StoredMessage]:
        return []


class _DropEvents:
    def emit(self, event: AgentEvent) -> None:
        del event


class _ParkWatch(logging.Handler):
    """The worker's "parked the resumed segment" lines: session → the CLI's PID."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.parked: dict[str, int] = {}
        self._changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        # The in-process worker logs on this event loop's thread.
        if record.msg.startswith("parked the resumed segment") and record.args:
            args = record.args
            assert isinstance(args, tuple)
            self.parked[str(args[0])] = int(str(args[1]))
            self._changed.set()

    async def wait(self, session_id: str, timeout: float = 30) -> int:
        async with asyncio.timeout(timeout):
            while session_id not in self.parked:
                self._changed.clear()
                await self._changed.wait()
        return self.parked[session_id]


class ClaudeBench:
    """The agent, its durable flow on an in-process worker, and the baselines."""

    def __init__(self, rig: Rig) -> None:
        self.rig = rig
        self.clock = HandlerClock()
        self.tools = make_tools(self.clock)
        self.workdir = rig.directory("agents")
        definition = ClaudeAgentDefinition(
            options=self._session_options,
            custom_tools=self.tools,
            tool_policies={"create_refund": ToolPolicy(effect="non_idempotent_write")},
        )
        self.flow = create_claude_agent_session_flow(definition, "BenchSupportAgent")
        # The same agent with every decision resumed cold, for the figures beside.
        self.cold_flow = create_claude_agent_session_flow(
            definition,
            "BenchSupportAgentCold",
            AgentSessionOptions(hot_resume_window=datetime.timedelta(0)),
        )
        self.store = SQLiteRuntimeStore(rig.tmp / "claude-runtime.sqlite")
        self.sessions = SessionClient(rig.client, self.flow, self.store)
        self.cold_sessions = SessionClient(rig.client, self.cold_flow, self.store)
        self.parks = _ParkWatch()
        self.plain_to_result: list[float] = []
        """Each plain `query()`'s time to its ResultMessage (before the CLI exits)."""
        self.runner_seconds: dict[str, float] = {}
        """Per session: how long its last `run_model` took inside the activity."""
        self._time_runner()

    def _time_runner(self) -> None:
        """Time the flow's own runner inside its activity, to split a segment's time.

        Only this bench's runner instance is wrapped; the activity calls it
        exactly as it would call the runner itself.
        """
        runner = self.flow.runner
        run_model = runner.run_model

        async def timed(context: RunModelContext) -> TurnCompleted | ToolCallsRequested:
            started = time.monotonic()
            try:
                return await run_model(context)
            finally:
                self.runner_seconds[context.session_id] = time.monotonic() - started

        setattr(runner, "run_model", timed)  # noqa: B010 - an instance, not the class

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[ClaudeBench]:
        """Run the flow's worker in this process for the block."""
        parking = logging.getLogger("dex_agents.temporal.parking")
        parking.addHandler(self.parks)
        parking.setLevel(logging.INFO)
        try:
            async with (
                create_worker(self.rig.client, [self.flow], store=self.store),
                create_worker(self.rig.client, [self.cold_flow], store=self.store),
            ):
                yield self
        finally:
            parking.removeHandler(self.parks)
            await self.store.close()

    # -- options ---------------------------------------------------------------

    def app_options(self, cwd: Path) -> ClaudeAgentOptions:
        """The application's options; both ways of running get exactly these."""
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            model="claude-sonnet-4-5",
            system_prompt="You resolve order problems.",
            tools=[],
            setting_sources=[],
            cwd=str(cwd),
        )

    def _session_options(
        self, context: ClaudeAgentOptionsContext
    ) -> ClaudeAgentOptions:
        return self.app_options(self.workdir / context.flow_id)

    def plain_options(self, name: str) -> ClaudeAgentOptions:
        """The same options, plus what a plain application adds to use the tools."""
        options = self.app_options(self.workdir / name)
        options.mcp_servers = {SERVER: create_sdk_mcp_server(SERVER, tools=self.tools)}
        options.hooks = {"PreToolUse": [HookMatcher(matcher=None, hooks=[_allow])]}
        return options

    # -- one turn, three ways ----------------------------------------------------

    async def new_session(self, kind: str, *, cold: bool = False) -> str:
        """Start an empty session, so a timed turn excludes creating the workflow."""
        session_id = f"{kind}-{uuid.uuid4().hex[:10]}"
        await (self.cold_sessions if cold else self.sessions).start(session_id)
        return session_id

    async def durable_turn(
        self, session_id: str, prompt: str, phases: list[TurnPhases] | None = None
    ) -> float:
        """Send `prompt` and wait for the answer, as an application would.

        With `phases`, the turn's history is read afterwards (untimed) and its
        breakdown appended there.
        """
        lookups = self.clock.lookups
        started_wall = time.time()
        started = time.monotonic()
        snapshot = await self.sessions.send_and_wait(session_id, prompt)
        elapsed = time.monotonic() - started
        turn = snapshot.turns[-1]
        if turn.status != "completed" or not turn.final_text:
            raise BenchError(f"durable turn ended {turn.status}: {turn.error}")
        _check_answer(prompt, turn.final_text, self.clock.lookups - lookups)
        if phases is not None:
            phases.append(
                await self._phases(session_id, started_wall, started_wall + elapsed)
            )
        return elapsed

    async def _phases(
        self, session_id: str, started: float, ended: float
    ) -> TurnPhases:
        handle = self.rig.client.get_workflow_handle(session_id)
        times: dict[int, float] = {}
        segments: set[int] = set()  # the scheduled events of `run_model` Steps
        run_model = ActivityNames.for_flow(self.flow.flow_type).run_model
        async for event in handle.fetch_history_events():
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                if name != run_model:
                    continue
                segments.add(event.event_id)
            elif kind in _OF_AN_ACTIVITY and _scheduled_id(event) not in segments:
                continue
            # The last event of each type wins: this turn's, in a one-turn session
            # (of activities, the segment's: not a notification's or a tool's).
            times[kind] = event.event_time.ToDatetime(tzinfo=datetime.UTC).timestamp()
        activity_started = times[EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED]
        activity_done = times[EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
        idle = times[EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED]
        return TurnPhases(
            to_segment=(activity_started - started) * 1000,
            segment=(activity_done - activity_started) * 1000,
            to_idle=(idle - activity_done) * 1000,
            client_read=(ended - idle) * 1000,
            runner=self.runner_seconds[session_id] * 1000,
        )

    async def plain_turn(self, prompt: str) -> float:
        """The same turn through `query()`: from the call to the iterator's end."""
        options = self.plain_options(f"plain-{uuid.uuid4().hex[:10]}")
        lookups = self.clock.lookups
        result: ResultMessage | None = None
        started = time.monotonic()
        async for message in query(prompt=prompt, options=options):
            if isinstance(message, ResultMessage):
                result = message
                self.plain_to_result.append(time.monotonic() - started)
        elapsed = time.monotonic() - started
        if result is None or result.is_error or not result.result:
            raise BenchError(f"plain query() failed: {result}")
        _check_answer(prompt, result.result, self.clock.lookups - lookups)
        return elapsed

    async def adapter_turn(self, prompt: str) -> float:
        """The same turn through `ClaudeAgentRunner.run_model`, with no engine."""
        session_id = f"adapter-{uuid.uuid4().hex[:10]}"
        context = RunModelContext(
            session_id=session_id,
            flow_type=self.flow.flow_type,
            turn_id="turn-1",
            step_execution_id="turn-1/run_model/1",
            attempt=1,
            pending=(self.flow.runner.build_user_message(prompt),),
            transcript=_NoTranscript(),
            events=_DropEvents(),
            tool_policies=self.flow.options.tool_policies,
            default_tool_effect=self.flow.options.default_tool_effect,
        )
        lookups = self.clock.lookups
        started = time.monotonic()
        result = await self.flow.runner.run_model(context)
        elapsed = time.monotonic() - started
        if not isinstance(result, TurnCompleted):
            raise BenchError(f"the adapter segment did not complete: {result.kind}")
        _check_answer(prompt, result.final_text, self.clock.lookups - lookups)
        return elapsed

    async def durable_write(
        self, session_id: str, *, cold: bool = False
    ) -> WriteTiming:
        """An approved write: the deferring segment, the approval, the resumed one.

        Hot (the default flow), the approval comes once the resumed segment is
        parked and warm, as a person's would after reading the card; `total`
        leaves that wait out. Cold (`cold`), it comes at once, as before the
        window existed: both are the session's own time, none of the person's.
        """
        sessions = self.cold_sessions if cold else self.sessions
        refunds = len(self.clock.refunds_started)
        started = time.monotonic()
        snapshot = await sessions.send_and_wait(session_id, WRITE)
        waiting = time.monotonic()
        if snapshot.status != "waiting_for_approval" or not snapshot.pending_interrupts:
            raise BenchError(f"the write did not wait for approval: {snapshot.status}")
        parked_rss = None
        if not cold:
            pid = await self.parks.wait(session_id)
            parked_rss = rss_mb(pid)
        clis = await settled_cli_count(at_most=0 if cold else 1, timeout=5)
        thinking = time.monotonic() - waiting
        (interrupt,) = snapshot.pending_interrupts
        if not await sessions.resolve_interrupt(
            session_id, interrupt.interrupt_id, approved=True
        ):
            raise BenchError("resolve_interrupt returned False for a new interrupt")
        resolved = time.monotonic()
        snapshot = await sessions.wait_for_idle(session_id)
        done = time.monotonic()
        turn = snapshot.turns[-1]
        if turn.status != "completed" or "refunded" not in turn.final_text:
            raise BenchError(f"approved write ended {turn.status}: {turn.error}")
        if len(self.clock.refunds_started) != refunds + 1:
            raise BenchError("the refund handler did not run exactly once")
        return WriteTiming(
            total=done - started - thinking,
            deferring=waiting - started,
            resumed=done - resolved,
            resolve_to_handler=self.clock.refunds_started[-1] - resolved,
            clis_while_waiting=clis,
            parked_rss_mb=parked_rss,
        )

    async def plain_write(self) -> float:
        """The same write through `query()`, the hook allowing it inline."""
        refunds = len(self.clock.refunds_started)
        elapsed = await self.plain_turn(WRITE)
        if len(self.clock.refunds_started) != refunds + 1:
            raise BenchError("the plain refund handler did not run exactly once")
        return elapsed


def _check_answer(prompt: str, answer: str, lookups: int) -> None:
    """Fail the run unless the model's answer shows the scripted turn happened."""
    if prompt == SAY and answer != "said: hi":
        raise BenchError(f"unexpected answer {answer!r}")
    if prompt == READ and (lookups != 1 or "arrived broken" not in answer):
        raise BenchError(f"the read did not run once inline: {answer!r}, {lookups}")
    if prompt == WRITE and "refunded" not in answer:
        raise BenchError(f"the write did not run: {answer!r}")
