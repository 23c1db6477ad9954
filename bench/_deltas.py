"""Figure 6: a text delta, from the runner that emits it to a client following events.

A runner written here stamps every delta with the monotonic time it emitted it,
the way the Claude runner emits a delta the moment the SDK hands it one from
the CLI's stdout. The worker runs in this process and the follower reads the
same SQLite file through its own store (its own connections, as a client in
another process would), so both ends of each delta use one clock.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from dex_agents import UserError
from dex_agents.session import (
    AgentEvent,
    EditContext,
    RunModelContext,
    StoredMessage,
    ToolCall,
    ToolCallsRequested,
    ToolOutcome,
    TurnCompleted,
)
from dex_agents.session._json import JsonObject
from dex_agents.session._records import DeferredToolExecution
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker

from . import _stats
from ._report import Row
from ._rig import BenchError, Rig

STAMP = "emitted_at"
"""The delta's data key holding `time.monotonic()` at emission."""


class StampingRunner:
    """Streams `deltas` stamped text deltas, `gap` seconds apart, then answers."""

    def __init__(self, *, deltas: int, gap: float) -> None:
        self.deltas = deltas
        self.gap = gap

    def build_user_message(self, text: str) -> JsonObject:
        """Prompts are stored as the Claude adapter stores them."""
        return {"kind": "user_prompt", "text": text}

    def validate_session_options(self, *, compaction: object | None) -> None:
        """Nothing to compact: every turn is independent."""
        if compaction is not None:
            raise UserError("the stamping runner cannot compact; remove `compaction`")

    async def check_edited_call(
        self, call: ToolCall, arguments: JsonObject, context: EditContext
    ) -> ToolCall:
        """It calls no tools; an edit is taken as it is."""
        del context
        return replace(call, arguments=dict(arguments))

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        """Emit the deltas at a model-like pace, so each one is written on its own."""
        for n in range(self.deltas):
            context.events.emit(
                AgentEvent(
                    type="text_delta", data={"text": f"t{n} ", STAMP: time.monotonic()}
                )
            )
            await asyncio.sleep(self.gap)
        text = f"streamed {self.deltas}"
        answer = StoredMessage(
            role="assistant", text=text, item={"kind": "bench_message", "text": text}
        )
        return TurnCompleted(messages=(answer,), final_text=text)

    async def execute_deferred_tool(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> ToolOutcome:
        """This runner never asks for tools."""
        raise UserError(f"the stamping runner has no tool {call.tool_name!r}")


async def delta_latency(rig: Rig) -> tuple[list[Row], Any]:
    """Follow a session while it streams, and time every delta's arrival."""
    turns, deltas, gap = (1, 20, 0.02) if rig.quick else (3, 50, 0.02)
    flow = create_agent_session_flow(
        StampingRunner(deltas=deltas, gap=gap), "BenchStreaming"
    )
    path = rig.tmp / "stream-runtime.sqlite"
    worker_store = SQLiteRuntimeStore(path)
    client_store = await SQLiteRuntimeStore.open(path)
    sessions = SessionClient(rig.client, flow, client_store)
    session_id = "streaming-session"
    latencies: list[float] = []

    async def follow() -> None:
        async for event in sessions.follow(session_id):
            stamp = event.data.get(STAMP)
            if event.type == "text_delta" and isinstance(stamp, float):
                latencies.append((time.monotonic() - stamp) * 1000)
                if len(latencies) == turns * deltas:
                    return

    try:
        async with create_worker(rig.client, [flow], store=worker_store):
            await sessions.start(session_id)
            follower = asyncio.create_task(follow())
            for turn in range(turns):
                await sessions.send_user_message(session_id, f"stream turn {turn}")
                snapshot = await sessions.wait_for_idle(session_id)
                if snapshot.turns[-1].status != "completed":
                    raise BenchError(f"streaming turn ended {snapshot.turns[-1]}")
            async with asyncio.timeout(10):
                await follower
    finally:
        await worker_store.close()
        await client_store.close()
    rig.progress.log(f"6 deltas: {len(latencies)} followed")
    row = Row(
        key="6",
        figure="text delta emitted by the runner → seen by a following client",
        unit="ms",
        median=_stats.median(latencies),
        p95=_stats.p95(latencies),
        samples=len(latencies),
        target="≤ 20 ms",
        met=_stats.median(latencies) <= 20,
        note=(
            f"{deltas} deltas per turn, {gap * 1000:.0f} ms apart; the follower "
            "polls the SQLite event log every 10 ms (`follow_events` default)"
        ),
    )
    return [row], {"latency_ms": latencies}
