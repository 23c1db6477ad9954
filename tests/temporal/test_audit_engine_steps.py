"""Audit proofs of spec-coverage Table 2 rows C25-C30: Step retries, spend limit,
usage sums, and the worker options that decide what a bug or a sticky queue does.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from support.session_harness import make_config
from temporalio import workflow
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.exceptions import ApplicationError

from dex_agents import EngineError
from dex_agents.session import RunModelContext, ToolCallsRequested, TurnCompleted
from dex_agents.session._pending import UserPrompt
from dex_agents.session._usage import Usage
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import (
    AgentSessionFlow,
    SessionClient,
    create_agent_session_flow,
    create_worker,
)
from dex_agents.temporal._models import ActiveTurn
from dex_agents.temporal._workflow import (
    WORKFLOW_BUG_TYPES,
    AgentSessionWorkflow,
    define_workflow_class,
)
from dex_agents.testing import Ledger, ScriptedRunner
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow, ledger_tools


class _RecordingRunner(ScriptedRunner):
    """The ledger flow's scripted runner that records every `run_model` attempt.

    With `distinct_usage`, each successful segment reports its own usage (every
    field grows with the segment's number n), so a sum can only come out right
    if every segment is counted exactly once. Costs are multiples of 1/8, exact in
    binary floating point, so sums compare exactly whatever the order of addition.
    """

    def __init__(self, config: LedgerFlowConfig, *, distinct_usage: bool = False):
        gate_dir = Path(config.gate_dir)
        super().__init__(
            ledger_tools(Ledger(config.ledger_path), gate_dir), gate_dir=gate_dir
        )
        self.distinct_usage = distinct_usage
        self.attempts: list[tuple[str, int]] = []
        self.segment_usage: dict[str, Usage] = {}
        """Usage each successful segment reported, by step execution ID."""

    async def run_model(
        self, context: RunModelContext
    ) -> TurnCompleted | ToolCallsRequested:
        self.attempts.append((context.step_execution_id, context.attempt))
        result = await super().run_model(context)
        usage = result.usage
        if self.distinct_usage:
            n = len(self.segment_usage) + 1
            usage = Usage(
                input_tokens=100 * n + 1,
                output_tokens=10 * n + 3,
                cached_input_tokens=7 * n,
                reasoning_tokens=n,
                model_calls=n,
                cost_usd=0.125 * n,
            )
            result = replace(result, usage=usage)
        self.segment_usage[context.step_execution_id] = usage
        return result


def _flow(
    tmp_path: Path, flow_type: str, runner: ScriptedRunner, **options: Any
) -> AgentSessionFlow:
    """The ledger flow's options (with `options` changed) around `runner`."""
    base = ledger_flow(make_config(tmp_path, flow_type))
    return create_agent_session_flow(
        runner, flow_type, replace(base.options, **options)
    )


async def _history(client: Client, session_id: str) -> list[HistoryEvent]:
    handle = client.get_workflow_handle(session_id)
    return [e async for e in handle.fetch_history_events()]


def _task_failures(events: list[HistoryEvent]) -> list[HistoryEvent]:
    return [
        e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


def _total(usages: list[Usage]) -> Usage:
    total = Usage()
    for usage in usages:
        total = total + usage
    return total


# ----- C25: run_model retries -------------------------------------------------


async def test_always_failing_segment_runs_run_model_attempts_then_fails_with_a_note(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = make_config(tmp_path, flow_type)
    runner = _RecordingRunner(config)
    # 4, not the default 3: the count must come from the option.
    flow = _flow(
        tmp_path,
        flow_type,
        runner,
        run_model_attempts=4,
        retry_interval=timedelta(milliseconds=50),
    )
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c25-attempts", initial_message="fail")
        failed = await sessions.wait_for_idle("audit-eng-c25-attempts")
        assert runner.attempts == [("turn-1/run_model/1", n) for n in (1, 2, 3, 4)]
        await sessions.send_user_message("audit-eng-c25-attempts", "say after")
        snap = await sessions.wait_for_idle("audit-eng-c25-attempts")
    await store.close()
    (turn,) = failed.turns
    assert turn.status == "failed"
    # The last attempt's error (Temporal's ApplicationError text names its type).
    assert turn.error == "SessionError: scripted failure (attempt 4)"
    assert failed.transcript_head is None  # no failed attempt became the head
    assert failed.usage == Usage()
    # No fifth attempt ran later, and the next turn ran one attempt.
    assert runner.attempts[4:] == [("turn-2/run_model/1", 1)]
    # The failure note reached the next turn's model and the transcript.
    assert snap.turns[1].final_text == "said: after (after 1 failure note(s))"
    notes = [m for m in snap.messages if m.role == "note"]
    assert [n.text for n in notes] == [
        "The previous turn (turn-1) failed: SessionError: scripted failure (attempt 4)\n"
        "No tool call ran before it failed."
    ]


# ----- C26: spend limit -------------------------------------------------------


async def test_spend_limit_failure_says_how_to_continue(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = make_config(tmp_path, flow_type)
    runner = _RecordingRunner(config)
    flow = _flow(tmp_path, flow_type, runner, spend_limit=0.0015)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c26-spend", initial_message="say one")
        await sessions.wait_for_idle("audit-eng-c26-spend")
        await sessions.send_user_message("audit-eng-c26-spend", "say two")
        await sessions.wait_for_idle("audit-eng-c26-spend")
        await sessions.send_user_message("audit-eng-c26-spend", "say three")
        (budget,) = (
            await sessions.wait_for_idle("audit-eng-c26-spend")
        ).pending_interrupts
        await sessions.resolve_interrupt(
            "audit-eng-c26-spend", budget.interrupt_id, approved=False
        )
        snap = await sessions.wait_for_idle("audit-eng-c26-spend")
        events = await sessions.events("audit-eng-c26-spend")
    await store.close()
    expected = (
        "spend limit reached: 0.0020 USD of 0.0015 USD (a person declined to raise "
        "it); answer the next spend-limit approval with a new limit, or raise "
        "`spend_limit`, to continue"
    )
    assert [t.status for t in snap.turns] == ["completed", "completed", "failed"]
    assert snap.turns[2].error == expected
    # The segment never started: the limit is checked before the Step.
    assert [a for a, _ in runner.attempts] == [
        "turn-1/run_model/1",
        "turn-2/run_model/1",
    ]
    assert [e.data["error"] for e in events if e.type == "turn_failed"] == [expected]


# ----- C27: usage -------------------------------------------------------------


async def test_turn_usage_sums_its_segments_and_session_usage_sums_its_turns(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    config = make_config(tmp_path, flow_type)
    runner = _RecordingRunner(config, distinct_usage=True)
    flow = _flow(tmp_path, flow_type, runner)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "audit-eng-c27-usage"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, 'call create_refund {"orderId": "27"}')
        waiting = await sessions.wait_for_idle(sid)
        (interrupt,) = waiting.pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(sid, "say three")
        snap = await sessions.wait_for_idle(sid)
        projected = await store.get_snapshot(sid)
    await store.close()
    seg = runner.segment_usage
    assert list(seg) == [
        "turn-1/run_model/1",
        "turn-2/run_model/1",
        "turn-2/run_model/2",  # the segment resumed after the approved write
        "turn-3/run_model/1",
    ]
    assert len(set(seg.values())) == 4  # every segment reported its own usage
    assert [t.status for t in snap.turns] == ["completed"] * 3
    assert snap.turns[1].tool_calls[0].status == "finished"
    # While the write waited for approval, the turn held its first segment only.
    assert waiting.turns[1].usage == seg["turn-2/run_model/1"]
    assert waiting.usage == seg["turn-1/run_model/1"] + seg["turn-2/run_model/1"]
    # Each turn is the sum of its segments...
    assert [t.usage for t in snap.turns] == [
        seg["turn-1/run_model/1"],
        seg["turn-2/run_model/1"] + seg["turn-2/run_model/2"],
        seg["turn-3/run_model/1"],
    ]
    assert snap.turns[1].usage == Usage(
        input_tokens=201 + 301,
        output_tokens=23 + 33,
        cached_input_tokens=14 + 21,
        reasoning_tokens=2 + 3,
        model_calls=2 + 3,
        cost_usd=0.25 + 0.375,
    )
    # ...and the session is the sum of its turns (and of every segment).
    assert snap.usage == _total([t.usage for t in snap.turns])
    assert snap.usage == _total(list(seg.values()))
    assert snap.usage == Usage(  # segments n = 1..4, spelled out
        input_tokens=1004,
        output_tokens=112,
        cached_input_tokens=70,
        reasoning_tokens=10,
        model_calls=10,
        cost_usd=1.25,
    )
    # The store's projection of the snapshot says the same.
    assert projected is not None
    assert projected["usage"] == {
        "input_tokens": snap.usage.input_tokens,
        "output_tokens": snap.usage.output_tokens,
        "cached_input_tokens": snap.usage.cached_input_tokens,
        "reasoning_tokens": snap.usage.reasoning_tokens,
        "model_calls": snap.usage.model_calls,
        "cost_usd": snap.usage.cost_usd,
    }


# ----- C29 and C30: the worker's options --------------------------------------


async def test_create_worker_sets_a_one_second_sticky_timeout_and_the_bug_types(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(make_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    worker = create_worker(client, [flow], store=store)
    await store.close()
    for config in (worker.config(), worker.config(active_config=True)):
        assert config.get("sticky_queue_schedule_to_start_timeout") == timedelta(
            seconds=1
        )
        assert list(config.get("workflow_failure_exception_types", [])) == list(
            WORKFLOW_BUG_TYPES
        )
    assert set(WORKFLOW_BUG_TYPES) == {
        AssertionError,
        AttributeError,
        IndexError,
        KeyError,
        TypeError,
        ValueError,
    }
    # No bug type covers a nondeterminism error (it would fail the session too).
    assert not any(
        issubclass(workflow.NondeterminismError, t) for t in WORKFLOW_BUG_TYPES
    )


def _buggy_flow(
    flow_type: str,
    *,
    failure_types: tuple[type[BaseException], ...] = WORKFLOW_BUG_TYPES,
) -> AgentSessionFlow:
    """A flow whose workflow code has a bug on its run path, met by a "blocks:" prompt.

    The Update handler stores the prompt as is; the bug surfaces when the next
    turn starts and reads the prompt as if it were a dict.
    """
    base = create_agent_session_flow(ScriptedRunner(), flow_type)
    # Unsandboxed: the sandbox would rebuild the class without the patch.
    flow = replace(
        base,
        workflow_class=define_workflow_class(
            flow_type,
            base.options,
            supports_images=False,
            sandboxed=False,
            failure_exception_types=failure_types,
        ),
    )
    original = AgentSessionWorkflow._start_turn

    def start_turn(self: AgentSessionWorkflow) -> None:
        prompt = self.state.pending[-1]
        if isinstance(prompt, UserPrompt) and prompt.text.startswith("blocks:"):
            cast(Any, [prompt.text]).get("text")  # the bug
        original(self)

    setattr(flow.workflow_class, "_start_turn", start_turn)  # noqa: B010
    return flow


async def test_a_bug_on_the_workflow_run_path_fails_the_session(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = _buggy_flow(flow_type)
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    handle = client.get_workflow_handle("audit-eng-c30-run-path-bug")
    async with create_worker(client, [flow], store=store):
        await sessions.start("audit-eng-c30-run-path-bug")
        # The Update itself succeeds: the buggy item is only stored.
        assert await sessions.send_user_message(
            "audit-eng-c30-run-path-bug", "blocks: hello"
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 30)
        description = await handle.describe()
    await store.close()
    assert description.status == WorkflowExecutionStatus.FAILED
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "AttributeError"
    assert "'list' object has no attribute 'get'" in cause.message
    # It failed in the first task that met the bug: no task failed and retried.
    events = await _history(client, "audit-eng-c30-run-path-bug")
    assert _task_failures(events) == []
    assert events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED


async def test_without_the_bug_types_the_same_bug_would_retry_its_task_forever(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """The contrast of the test above: the bug types are what make it fail.

    They are set on the session workflow's definition (so a worker's other
    workflows keep their own); without them, and without the worker option,
    the same bug retries its task forever.
    """
    flow = _buggy_flow(flow_type, failure_types=())
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    handle = client.get_workflow_handle("audit-eng-c30-no-bug-types")
    async with create_worker(
        client, [flow], store=store, workflow_failure_exception_types=[]
    ):
        await sessions.start("audit-eng-c30-no-bug-types")
        sender = asyncio.create_task(
            sessions.send_user_message("audit-eng-c30-no-bug-types", "blocks: hi")
        )
        try:
            await _wait_for_task_attempt(client, "audit-eng-c30-no-bug-types", 3)
            failures = _task_failures(
                await _history(client, "audit-eng-c30-no-bug-types")
            )
        finally:
            sender.cancel()
            with contextlib.suppress(BaseException):
                await sender
            await handle.terminate("audit test cleanup")
    await store.close()
    assert failures
    for failed in failures:
        attributes = failed.workflow_task_failed_event_attributes
        assert (
            attributes.cause
            == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE
        )
        assert "'list' object has no attribute 'get'" in attributes.failure.message


_TASK_FAILED_STATE = (
    "Unable to perform workflow execution update due to Workflow Task in failed state."
)


def _changed_deploy(flow: AgentSessionFlow) -> AgentSessionFlow:
    """The same flow type whose workflow code now starts a timer before each segment.

    Replaying a recorded turn on it meets ActivityTaskScheduled where the code
    commands a timer: a nondeterminism error, as after a bad deploy.
    """
    # Unsandboxed: the sandbox would rebuild the class without the patch.
    changed = define_workflow_class(
        flow.flow_type, flow.options, supports_images=False, sandboxed=False
    )
    original = AgentSessionWorkflow._run_model

    async def run_model_after_a_timer(
        self: AgentSessionWorkflow, active: ActiveTurn
    ) -> None:
        await workflow.sleep(timedelta(milliseconds=10))
        await original(self, active)

    changed._run_model = run_model_after_a_timer
    return replace(flow, workflow_class=changed)


async def _wait_for_task_attempt(client: Client, session_id: str, attempt: int) -> None:
    """Wait until the session's pending workflow task is at `attempt`, all the while RUNNING."""
    handle = client.get_workflow_handle(session_id)
    async with asyncio.timeout(60):
        while True:
            description = await handle.describe()
            assert description.status == WorkflowExecutionStatus.RUNNING
            pending = description.raw_description.pending_workflow_task
            if pending.attempt >= attempt:
                return
            await asyncio.sleep(0.1)


async def test_a_nondeterminism_error_keeps_retrying_until_a_fixed_worker_resumes(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = ledger_flow(make_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "audit-eng-c30-nondeterminism"
    handle = client.get_workflow_handle(sid)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
    # A bad deploy: the default create_worker options, changed workflow code. A
    # message makes a workflow task, and the new worker replays turn 1 for it.
    sender: asyncio.Task[bool] | None = None
    try:
        async with create_worker(client, [_changed_deploy(flow)], store=store):
            sender = asyncio.create_task(sessions.send_user_message(sid, "say two"))
            await _wait_for_task_attempt(client, sid, 3)
            failures = _task_failures(await _history(client, sid))
        assert failures, "the changed code failed its workflow task"
        for failed in failures:
            attributes = failed.workflow_task_failed_event_attributes
            assert (
                attributes.cause
                == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR
            )
            assert "Nondeterminism error" in attributes.failure.message
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        # The fixed deploy picks the session up where it was, message included.
        async with create_worker(client, [flow], store=store):
            async with asyncio.timeout(60):
                while (await handle.describe()).raw_description.HasField(
                    "pending_workflow_task"
                ):
                    await asyncio.sleep(0.2)
            # The Update sent during the bad deploy either was kept and ran, or its
            # caller got an EngineError saying nothing was applied and it never ran.
            try:
                sent: object = await asyncio.wait_for(sender, 30)
            except EngineError as err:
                assert "workflow task is failing" in str(err)
                assert "nothing was applied" in str(err)
                sent = _TASK_FAILED_STATE
            assert sent in (True, _TASK_FAILED_STATE)
            kept = ["said: two"] if sent is True else []
            assert [
                t.final_text for t in (await sessions.wait_for_idle(sid)).turns
            ] == [
                "said: one",
                *kept,
            ]
            await sessions.send_user_message(sid, "say three")
            snap = await sessions.wait_for_idle(sid)
            status = (await handle.describe()).status
    finally:
        if sender is not None and not sender.done():
            sender.cancel()
        await store.close()
    assert status == WorkflowExecutionStatus.RUNNING
    assert [t.status for t in snap.turns] == ["completed"] * len(snap.turns)
    assert [t.final_text for t in snap.turns] == ["said: one", *kept, "said: three"]


def test_an_update_refused_while_the_task_fails_is_an_engine_error() -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from dex_agents.temporal._client import _update_errors  # pyright: ignore[reportPrivateUsage]

    refused = RPCError(_TASK_FAILED_STATE, RPCStatusCode.FAILED_PRECONDITION, b"")
    with (
        pytest.raises(EngineError, match="'audit-eng-x'.*nothing was applied"),
        _update_errors("audit-eng-x"),
    ):
        raise refused
    other = RPCError("deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")
    with (
        pytest.raises(RPCError, match="deadline exceeded"),
        _update_errors("audit-eng-x"),
    ):
        raise other


async def _one_turn_session(
    client: Client, tmp_path: Path, flow_type: str, sid: str
) -> tuple[AgentSessionFlow, SQLiteRuntimeStore, SessionClient]:
    """A session with one answered turn, and no worker left running."""
    flow = ledger_flow(make_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
    return flow, store, sessions


async def test_a_message_sent_while_the_task_fails_is_delivered_once_a_worker_recovers(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    """Temporal refuses Updates while a task fails (after a crashed or a bad worker).

    Nothing was applied, so the client sends again until a worker completes the
    task: the message arrives once, and its caller never sees the refusal.
    """
    sid = "audit-eng-task-failing-recovers"
    flow, store, sessions = await _one_turn_session(client, tmp_path, flow_type, sid)
    async with create_worker(client, [_changed_deploy(flow)], store=store):
        first = asyncio.create_task(sessions.send_user_message(sid, "say two"))
        await _wait_for_task_attempt(client, sid, 2)
        # Sent while the task is failing: Temporal refuses it at once.
        second = asyncio.create_task(sessions.send_user_message(sid, "say three"))
        await _wait_for_task_attempt(client, sid, 3)
        assert not second.done()
    async with create_worker(client, [flow], store=store):
        assert await asyncio.wait_for(first, 60) is True
        assert await asyncio.wait_for(second, 60) is True
        snap = await sessions.wait_for_idle(sid)
        while len(snap.turns) < 3 or snap.status != "idle":
            snap = await sessions.wait_for_idle(sid)
    await store.close()
    prompts = [p for t in snap.turns for p in t.prompts]
    assert sorted(prompts) == ["say one", "say three", "say two"]
    assert len(prompts) == 3


async def test_a_task_that_keeps_failing_is_reported_after_the_patience(
    client: Client, tmp_path: Path, flow_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dex_agents.temporal import _client

    monkeypatch.setattr(_client, "TASK_FAILING_PATIENCE", 1.0)
    sid = "audit-eng-task-failing-reported"
    flow, store, sessions = await _one_turn_session(client, tmp_path, flow_type, sid)
    async with create_worker(client, [_changed_deploy(flow)], store=store):
        first = asyncio.create_task(sessions.send_user_message(sid, "say two"))
        await _wait_for_task_attempt(client, sid, 2)
        with pytest.raises(EngineError, match="workflow task is failing"):
            await sessions.send_user_message(sid, "say three")
        first.cancel()
    await store.close()
