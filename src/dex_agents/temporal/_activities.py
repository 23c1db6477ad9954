"""The Steps of a session as Temporal activities.

`run_model` runs one model segment through the runner and writes its messages
to the runtime store under a segment ID that includes the attempt; only the
reference goes back into history, and only a reference the workflow recorded is
ever read. Tool Steps run a deferred call with its idempotency key. All of them
heartbeat in the background so a crashed worker is noticed within
`heartbeat_timeout`, and enforce their limit locally too (the server's timeout
does not stop a running attempt).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter, ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from .._errors import (
    BudgetReachedError,
    InvalidEditError,
    SessionError,
    ToolExecutionError,
    UserError,
)
from ..notify._webhook import WebhookError
from ..session import (
    AgentEvent,
    AgentFrameworkRunner,
    AgentSessionOptions,
    EditContext,
    RunModelContext,
    StoredMessage,
    ToolCall,
    ToolCallFinishedEvent,
    ToolCallsRequested,
    ToolOutcome,
    TurnCompleted,
)
from ..session._blob import BlobReference, blob_reference, preview
from ..session._events import (
    EventRecord,
    SegmentRerunEvent,
    ToolCallAttemptFailedEvent,
    ToolCallStartedEvent,
    agent_event,
    stamped,
)
from ..session._json import JsonObject, JsonValue
from ..session._notification import preview_arguments
from ..session._pending import INLINE_TEXT_LIMIT, PendingItem, UserPrompt
from ..session._policy import idempotency_key
from ..session._records import (
    DeferredToolExecution,
    ToolRecord,
    reset_current_deferred_tool_execution,
    set_current_deferred_tool_execution,
)
from ..session._runner import (
    ParkedResume,
    ResumeState,
    image_message_builder,
    resume_parker,
)
from ..session._state import SUMMARY_TEXT_LIMIT
from ..stores import RuntimeStore
from ..stores._cursors import cursor_before_turn, event_turn
from ..stores._rules import not_in_this_store
from ._events import StoreEventSink
from ._inline_calls import (
    StreamedText,
    end_calls_of_ended_turn,
    end_left_open,
    left_open,
)
from ._models import (
    CallToolInput,
    CallToolOutput,
    CheckEditInput,
    CheckEditOutput,
    NotifyInput,
    PrimeParkInput,
    PublishInput,
    ReleaseParkInput,
    RunModelInput,
    RunModelOutput,
)
from ._parking import Fingerprint, ParkingLot
from ._snapshot import clip
from ._workflow import ActivityNames


class StoreTranscript:
    """Reads the committed transcript: the chain ending at the recorded head."""

    def __init__(self, store: RuntimeStore, session_id: str, head: str | None) -> None:
        self._store = store
        self._session_id = session_id
        self._head = head
        self._cache: list[StoredMessage] | None = None

    async def messages(self) -> list[StoredMessage]:
        """Every committed message, oldest first (read once per attempt)."""
        if self._cache is None:
            try:
                self._cache = await self._store.read_transcript(
                    self._session_id, self._head
                )
            except KeyError as err:
                missing = f"transcript segment {self._head!r}"
                raise SessionError(
                    not_in_this_store(self._session_id, missing), retryable=False
                ) from err
        return list(self._cache)


async def read_text_blob(
    store: RuntimeStore, session_id: str, ref: BlobReference
) -> str:
    """The whole text a reference names, checked against its digest.

    Raises:
        SessionError: the blob is missing or its bytes are not what was sent
            (a store shared wrongly between deployments); not retryable.
    """
    try:
        data = await store.get_blob(session_id, ref.blob_id)
    except KeyError as err:
        raise SessionError(
            not_in_this_store(session_id, f"blob {ref.blob_id!r}"), retryable=False
        ) from err
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise SessionError(
            f"blob {ref.blob_id!r} of session {session_id!r} does not match its "
            "reference (size or digest); the store was changed behind the session",
            retryable=False,
        )
    return data.decode()


async def store_long_output(
    store: RuntimeStore, session_id: str, output: str
) -> tuple[str, BlobReference | None]:
    """`output` as a record carries it: whole when short, else a preview and a blob."""
    data = output.encode()
    if len(data) <= OUTPUT_INLINE_LIMIT:
        return output, None
    ref = blob_reference("out", data)
    await store.put_blob(session_id, ref.blob_id, data)
    return preview(output), ref


OUTPUT_INLINE_LIMIT = 4 * INLINE_TEXT_LIMIT
"""Bytes of a tool output (or of a call's arguments, as JSON) carried in history; more
travels by reference."""

_ARGUMENTS = TypeAdapter(JsonObject)
RUN_STATE_LIMIT = 64 * 1024
"""Bytes of a runner's `run_state` (JSON): it travels in history with every deferral."""


async def store_long_arguments(
    store: RuntimeStore, session_id: str, call: ToolCall
) -> ToolCall:
    """`call` as it travels: whole when its arguments are short, else by reference."""
    data = _ARGUMENTS.dump_json(call.arguments)
    if len(data) <= OUTPUT_INLINE_LIMIT:
        return call
    ref = blob_reference("args", data)
    await store.put_blob(session_id, ref.blob_id, data)
    return replace(call, arguments={}, arguments_ref=ref)


async def read_arguments(
    store: RuntimeStore, session_id: str, ref: BlobReference
) -> JsonObject:
    """The whole arguments a reference names."""
    return _ARGUMENTS.validate_json(await read_text_blob(store, session_id, ref))


SESSION_STEP = "session"
"""The `step_execution_id` of events the workflow itself emits (turns, interrupts)."""


async def write_session_events(
    store: RuntimeStore,
    session_id: str,
    turn_id: str,
    first_seq: int,
    events: Sequence[AgentEvent],
) -> None:
    """Append the workflow's own events, numbered from `first_seq + 1`.

    The workflow stamps its events with `workflow.now()`; one that comes
    without a timestamp (from a workflow task of an earlier release) gets the
    time it is written.
    """
    if not events:
        return
    now = datetime.now(UTC)
    events = [stamped(e, now) for e in events]
    await store.append_events(
        [
            EventRecord(
                session_id=session_id,
                turn_id=str(e.data.get("turn_id", turn_id)),
                step_execution_id=SESSION_STEP,
                attempt=0,
                seq=first_seq + i + 1,
                type=e.type,
                data=e.data,
            )
            for i, e in enumerate(events)
        ]
    )


PUBLISH_LIMIT = timedelta(seconds=10)
"""How long a tool Step's publish may take (the publish local activity's limit, too)."""


async def write_publication(store: RuntimeStore, input: PublishInput) -> None:
    """Write a publish: the finished turns, the snapshot projection, the events."""
    for turn in input.finished:
        summary = await _with_cli_outputs(
            store, input.session_id, turn.number, turn.summary
        )
        await store.put_turn(input.session_id, turn.number, summary)
        await end_calls_of_ended_turn(store, input.session_id, turn.number, summary)
    await store.put_snapshot(input.session_id, input.snapshot)
    await write_session_events(
        store, input.session_id, input.turn_id, input.first_seq, input.events
    )


async def _with_cli_outputs(
    store: RuntimeStore, session_id: str, number: int, summary: JsonObject
) -> JsonObject:
    """`summary` with what each approved CLI tool printed, in place of a placeholder.

    A call that runs inside the resumed segment (an approved `Bash`) is recorded
    before it runs, with "Approved; the call runs inside the resumed Claude Code
    turn." as its output; what it printed is in the segment's
    `tool_call_finished` event, written before the turn ends. The turn log
    (what snapshots, `history` and the web pages show) takes that output. Only
    a turn with such a call reads its events, from where the turn starts.
    """
    calls = summary.get("tool_calls")
    if not isinstance(calls, list):
        return summary
    wanted = {
        str(call.get("tool_call_id"))
        for call in calls
        if isinstance(call, dict) and call.get("finished_by_resumed_turn")
    }
    turn_id = str(summary.get("turn_id", ""))
    if not wanted or not turn_id:
        return summary
    said: dict[str, str] = {}
    after = await cursor_before_turn(store, session_id, number)
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            call_id = event.data.get("tool_call_id")
            if (
                event.turn_id == turn_id
                and event.type == "tool_call_finished"
                and call_id in wanted
                and "/run_model/" in event.step_execution_id
            ):
                text = event.data.get("output") or event.data.get("error")
                if text:
                    said[str(call_id)] = str(text)
        if batch and event_turn(batch[-1]) > number:
            break  # the log has moved on to later turns
    if not said:
        return summary
    return {
        **summary,
        "tool_calls": [
            {**call, "output": said[call_id]}
            if isinstance(call, dict)
            and (call_id := str(call.get("tool_call_id"))) in said
            else call
            for call in calls
        ],
    }


def pending_message(item: JsonObject) -> StoredMessage:
    """The stored message of a prompt or a failure note."""
    role = "note" if item.get("kind") == "turn_failure_note" else "user"
    return StoredMessage(role=role, text=str(item.get("text", "")), item=item)


class _Checkpoint:
    """The tool Step's heartbeat checkpoint: sent with every heartbeat.

    Temporal keeps only the details of the last heartbeat, so the background
    beat must resend the latest checkpoint, or it would erase it; an attempt
    starts from the previous attempt's checkpoint for the same reason.
    """

    def __init__(self, previous: Sequence[Any]) -> None:
        self.previous: JsonValue | None = previous[0] if previous else None
        self._value: JsonValue | None = self.previous

    def details(self) -> tuple[Any, ...]:
        return () if self._value is None else (self._value,)

    def record(self, value: JsonValue) -> None:
        self._value = value
        # Sent now when called in the activity's context; else the next beat sends it.
        with contextlib.suppress(RuntimeError):
            activity.heartbeat(value)


def _cancel_requested() -> bool:
    """Whether the running activity was cancelled by the workflow (not a shutdown)."""
    details = activity.cancellation_details()
    return details is not None and details.cancel_requested


@contextlib.asynccontextmanager
async def _heartbeating(
    timeout: timedelta, checkpoint: _Checkpoint | None = None
) -> AsyncGenerator[None, None]:
    async def beat() -> None:
        while True:
            activity.heartbeat(*(checkpoint.details() if checkpoint else ()))
            # At least each second: a cancel (`cancel_turn`) comes with an answer.
            await asyncio.sleep(min(max(timeout.total_seconds() / 4, 0.05), 1.0))

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _step_sink(
    store: RuntimeStore, input: RunModelInput | CallToolInput, attempt: int
) -> StoreEventSink:
    """Where attempt `attempt` of the Step that `input` runs sends its events."""
    return StoreEventSink(
        store,
        session_id=input.session_id,
        turn_id=input.turn_id,
        step_execution_id=input.step_execution_id,
        attempt=attempt,
    )


def _said(
    err: SessionError, input: RunModelInput, attempt: int, *, retried: bool
) -> None:
    """One line in the worker's log for a model segment that failed with its reason.

    `retried` is whether Temporal runs another attempt (`_retried`): a
    retryable error on the last attempt fails the turn too, and its line must
    not promise another attempt.
    """
    if retried:
        again = "it is tried again"
    elif err.retryable:
        again = "the turn fails: no attempt is left"
    else:
        again = "the turn fails: another attempt would fail the same way"
    activity.logger.warning(
        "model segment of %s, %s, attempt %d failed (%s): %s",
        input.session_id,
        input.turn_id,
        attempt,
        again,
        err,
    )


def _bounded_cause(err: BaseException) -> BaseException:
    """`err`, or a stand-in with its text clipped, as the cause of a Step's failure.

    Temporal records the cause with the failure, message and all, in the
    session's history: a tool that raised with a 1.9 MB text put it there
    whole beside the clipped failure. The stand-in keeps the type's name and
    the traceback.
    """
    text = str(err)
    if len(text) <= SUMMARY_TEXT_LIMIT:
        return err
    stand_in = ApplicationError(clip(text), type=type(err).__name__)
    return stand_in.with_traceback(err.__traceback__)


def _engine_error(err: Exception, *, attempt: int | None = None) -> ApplicationError:
    """Retry policy is decided here, at the engine edge, from the error's own fields.

    A tool Step's error carries its attempt as the details, so the record of a
    call that ended outcome_unknown says how many attempts ran. Its message is
    clipped to `SUMMARY_TEXT_LIMIT` characters: the session keeps it (a record's
    output, a failed turn's error), and an exception's text can be any size.
    """
    details = () if attempt is None else ({"attempt": attempt},)
    if isinstance(err, BudgetReachedError):
        # What the stopped segment spent travels with it: the session counts it.
        return ApplicationError(
            clip(str(err)),
            {"attempt": attempt or 0, "usage": err.usage},
            type=type(err).__name__,
            non_retryable=True,
            # Expected (the session asks for a new limit): no failure log with a traceback.
            category=ApplicationErrorCategory.BENIGN,
        )
    if isinstance(err, SessionError):
        # Its message says what failed and the fix (a refused API key, a CLI that
        # died with its stderr's tail): one log line (`_said`), not a traceback
        # of this wrapper per attempt, which is what temporalio logs otherwise.
        delay = timedelta(seconds=err.retry_after) if err.retry_after else None
        return ApplicationError(
            clip(str(err)),
            *details,
            type=type(err).__name__,
            non_retryable=not err.retryable,
            next_retry_delay=delay,
            category=ApplicationErrorCategory.BENIGN,
        )
    if isinstance(err, UserError | TypeError):
        return ApplicationError(
            clip(str(err)), *details, type=type(err).__name__, non_retryable=True
        )
    return ApplicationError(
        clip(f"{type(err).__name__}: {err}"), *details, type=type(err).__name__
    )


def _retried(failure: ApplicationError, attempt: int) -> bool:
    """Whether Temporal runs another attempt of the activity after `failure`."""
    if failure.non_retryable:
        return False
    policy = activity.info().retry_policy
    maximum = policy.maximum_attempts if policy is not None else 0
    return maximum == 0 or attempt < maximum


_PARKED_STEP_SUFFIX = "/parked"
"""How the workflow's `_run_model` ends the Step ID of a parked segment's one attempt."""


def _segment_retried(failure: ApplicationError, attempt: int, attempts: int) -> bool:
    """Whether the model segment runs again after `failure` of its `attempt`.

    Temporal's retry policy says it for a cold Step. A parked segment's Step
    has one attempt, after which the workflow runs the segment cold while the
    segment's `attempts` (`run_model_attempts`) are not used up, as it does
    for any failure the cold path would retry (`_parked_route.resumes_cold`).
    """
    info = activity.info()
    if _retried(failure, info.attempt):
        return True
    parked = info.activity_id.endswith(_PARKED_STEP_SUFFIX)
    return parked and not failure.non_retryable and attempt < attempts


def _span_recorder() -> Callable[..., None] | None:
    """The chat-span recorder when OpenTelemetry is installed, else None (tracing is optional)."""
    try:
        from ..otel._spans import record_chat_span
    except ImportError:
        return None
    return record_chat_span


def _fingerprint(input: RunModelInput, max_budget_usd: float | None) -> Fingerprint:
    return Fingerprint(
        turn_id=input.turn_id,
        transcript_head=input.transcript_head,
        max_budget_usd=max_budget_usd,
    )


async def _take_park(
    lot: ParkingLot | None, input: RunModelInput
) -> ParkedResume | None:
    """The park of this resumed segment, if this worker holds it.

    The session's other parks are closed: a new segment makes them stale.
    """
    if lot is None:
        return None
    resume = input.resume
    key = (
        (input.session_id, resume.partial_segment_id)
        if resume is not None and resume.partial_segment_id
        else None
    )
    lot.drop_session(input.session_id, keep=key)
    if key is None:
        return None
    return await lot.take(key, _fingerprint(input, input.max_budget_usd))


def _park(
    lot: ParkingLot,
    parker: Callable[..., Coroutine[Any, Any, ParkedResume]],
    input: RunModelInput,
    context: RunModelContext,
    result: ToolCallsRequested,
    segment_id: str,
) -> str | None:
    """Park the segment that resumes `result`; the queue that reaches it, or None."""
    budget = input.max_budget_usd
    if budget is not None:
        # As the session computes the next segment's budget (`model_step`).
        budget = round(max(budget - result.usage.cost_usd, 0.0), 6)
        if budget <= 0:
            return None  # the session asks for a new limit first
    template = replace(
        context,
        step_execution_id="",
        attempt=1,
        resume=ResumeState(
            run_state=result.run_state, messages=tuple(result.messages), records=()
        ),
        max_budget_usd=budget,
    )
    parked = lot.park(
        (input.session_id, segment_id),
        _fingerprint(input, budget),
        lambda: parker(template, window=lot.window),
    )
    return lot.queue if parked else None


def build_activities(
    flow_type: str,
    runner: AgentFrameworkRunner,
    options: AgentSessionOptions,
    store: RuntimeStore,
    lot: ParkingLot | None = None,
) -> list[Callable[..., Coroutine[Any, Any, Any]]]:
    """The activities of one flow, bound to its runner and the worker's store.

    With `lot`, a segment that defers parks its resumed segment there (when
    the runner can), and a resumed segment takes its park (see `_parking`).
    """
    names = ActivityNames.for_flow(flow_type)
    parker = resume_parker(runner) if lot is not None and lot.enabled else None
    limit = options.run_model_limit.total_seconds()
    record_span = _span_recorder()
    with_images = image_message_builder(runner)

    async def stored_item(session_id: str, item: PendingItem) -> JsonObject:
        """The runner's own item for a pending one, with the whole text."""
        if not isinstance(item, UserPrompt):
            return item.to_item()
        text = item.text
        if item.text_ref is not None:
            text = await read_text_blob(store, session_id, item.text_ref)
        if item.images:
            if with_images is None:
                raise UserError("this session's runner cannot send images")
            return with_images(text, list(item.images))
        return runner.build_user_message(text)

    async def whole_record(session_id: str, record: ToolRecord) -> ToolRecord:
        if record.arguments_ref is not None:
            arguments = await read_arguments(store, session_id, record.arguments_ref)
            record = replace(record, arguments=arguments, arguments_ref=None)
        if record.output_ref is not None:
            output = await read_text_blob(store, session_id, record.output_ref)
            record = replace(record, output=output, output_ref=None)
        return record

    @activity.defn(name=names.run_model)
    async def run_model(input: RunModelInput) -> RunModelOutput:
        attempt = activity.info().attempt + input.attempt_offset
        parked = await _take_park(lot, input)
        resume = None
        if input.resume is not None:
            partial = (
                await store.read_segment(
                    input.session_id, input.resume.partial_segment_id
                )
                if input.resume.partial_segment_id
                else []
            )
            resume = ResumeState(
                run_state=input.resume.run_state,
                messages=tuple(partial),
                records=tuple(
                    [
                        await whole_record(input.session_id, r)
                        for r in input.resume.records
                    ]
                ),
            )
        if input.session_events and attempt == 1:
            # The turn's start, carried by its first Step instead of a publish round
            # trip. Written by the first attempt only: a retry must not repeat it
            # (an attempt that crashed in the few milliseconds before this write
            # loses the event; the turn itself loses nothing).
            await write_session_events(
                store,
                input.session_id,
                input.turn_id,
                input.first_seq,
                input.session_events,
            )
        pending = tuple([await stored_item(input.session_id, i) for i in input.pending])
        async with _step_sink(store, input, attempt) as sink:
            if attempt > 1:
                # A crashed attempt ended nothing it ran: end its calls first.
                running = await left_open(
                    store, input.session_id, input.turn_id, input.step_execution_id
                )
                end_left_open(sink, running, attempt=attempt)
                # Said before the segment runs again: tools inside the model's CLI
                # may run a second time in it (they are at least once).
                sink.emit(
                    agent_event(
                        SegmentRerunEvent(
                            step_execution_id=input.step_execution_id,
                            attempt=attempt,
                        )
                    )
                )
            context = RunModelContext(
                session_id=input.session_id,
                flow_type=flow_type,
                turn_id=input.turn_id,
                step_execution_id=input.step_execution_id,
                attempt=attempt,
                pending=pending,
                transcript=StoreTranscript(
                    store, input.session_id, input.transcript_head
                ),
                events=(streamed := StreamedText(sink)),
                tool_policies=options.tool_policies,
                default_tool_effect=options.default_tool_effect,
                resume=resume,
                max_budget_usd=input.max_budget_usd,
            )
            span_session: dict[str, str | int] = {
                "session_id": input.session_id,
                "turn_id": input.turn_id,
                "step_execution_id": input.step_execution_id,
                "attempt": attempt,
            }
            start_ns = time.time_ns()
            try:
                async with (
                    _heartbeating(options.heartbeat_timeout),
                    asyncio.timeout(limit),
                ):
                    result = await parked.resume(context) if parked else None
                    if result is None:
                        result = await runner.run_model(context)
            except BaseException as err:
                if record_span is not None:
                    record_span(
                        start_ns=start_ns,
                        end_ns=time.time_ns(),
                        metadata=None,
                        usage=None,
                        session=span_session,
                        error=err,
                    )
                if isinstance(err, asyncio.CancelledError) and _cancel_requested():
                    # `cancel_turn`: the segment's CLI is killed by now; report
                    # what it streamed, so the turn keeps it, and end the
                    # inline calls it stopped.
                    streamed.end_running()
                    return RunModelOutput(
                        kind="cancelled",
                        segment_id="",
                        final_text=streamed.text,
                        attempt=attempt,
                    )
                if not isinstance(err, Exception):
                    # A worker shutting down: the next attempt ends its calls.
                    raise
                if isinstance(err, TimeoutError):
                    overran = ApplicationError(
                        f"the model segment exceeded `run_model_limit` ({options.run_model_limit})",
                        {"attempt": attempt},
                        type="RunModelTimeout",
                    )
                    streamed.end_running(failure=overran.message)
                    raise overran from _bounded_cause(err)
                # This attempt's inline calls will never return a result.
                streamed.end_running(failure=str(err) or type(err).__name__)
                failure = _engine_error(err, attempt=attempt)
                if isinstance(err, SessionError) and not isinstance(
                    err, BudgetReachedError
                ):
                    retried = _segment_retried(
                        failure, attempt, options.run_model_attempts
                    )
                    _said(err, input, attempt, retried=retried)
                raise failure from _bounded_cause(err)
            if record_span is not None:
                record_span(
                    start_ns=start_ns,
                    end_ns=time.time_ns(),
                    metadata=result.metadata,
                    usage=result.usage,
                    session=span_session,
                )
        segment_id = f"{input.step_execution_id}/attempt-{attempt}"
        if isinstance(result, TurnCompleted):
            messages = [pending_message(i) for i in pending] + list(result.messages)
            await store.put_segment(
                input.session_id, segment_id, input.transcript_head, messages
            )
            return RunModelOutput(
                kind="turn_completed",
                segment_id=segment_id,
                # The whole answer is in the segment; history keeps a summary's worth.
                final_text=clip(result.final_text),
                usage=result.usage,
                metadata=result.metadata,
                attempt=attempt,
            )
        state_bytes = len(_ARGUMENTS.dump_json(result.run_state))
        if state_bytes > RUN_STATE_LIMIT:
            raise ApplicationError(
                f"the runner's run_state is {state_bytes:,} bytes; it travels in "
                f"workflow history, so it must stay under {RUN_STATE_LIMIT:,} bytes: "
                "keep bulky data in the segment's messages",
                type="UserError",
                non_retryable=True,
            )
        # A partial segment hangs off no chain: only the resumed segment reads it.
        await store.put_segment(
            input.session_id, segment_id, None, list(result.messages)
        )
        parked_on = None
        if parker is not None and lot is not None:
            parked_on = _park(lot, parker, input, context, result, segment_id)
        return RunModelOutput(
            kind="tool_calls_requested",
            segment_id=segment_id,
            calls=[
                await store_long_arguments(store, input.session_id, c)
                for c in result.calls
            ],
            run_state=result.run_state,
            usage=result.usage,
            metadata=result.metadata,
            attempt=attempt,
            parked_on=parked_on,
        )

    async def run_tool(input: CallToolInput) -> CallToolOutput:
        info = activity.info()
        attempt = info.attempt
        checkpoint = _Checkpoint(info.heartbeat_details)
        call = input.call
        # The event names long arguments by the reference they travel by.
        started = ToolCallStartedEvent(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            arguments=call.arguments,
            arguments_ref=call.arguments_ref,
        )
        if input.publish is not None and attempt == 1:
            # The call's approval, published by its Step instead of a round trip
            # before it; like a publish, a failed one loses its events, not the call.
            # Heartbeating and bounded, so a slow store never times the Step out.
            try:
                async with (
                    _heartbeating(options.heartbeat_timeout, checkpoint),
                    asyncio.timeout(PUBLISH_LIMIT.total_seconds()),
                ):
                    await write_publication(store, input.publish)
            except Exception as err:
                activity.logger.warning(
                    "could not publish session %s before its tool Step: %s",
                    input.session_id,
                    err or type(err).__name__,
                )
        if call.arguments_ref is not None:
            arguments = await read_arguments(
                store, input.session_id, call.arguments_ref
            )
            call = replace(call, arguments=arguments, arguments_ref=None)
        execution = DeferredToolExecution(
            flow_id=input.session_id,
            turn_id=input.turn_id,
            tool_call_id=call.tool_call_id,
            step_execution_id=input.step_execution_id,
            attempt=attempt,
            idempotency_key=idempotency_key(
                input.session_id, input.turn_id, call.tool_call_id
            ),
            heartbeat_checkpoint=checkpoint.previous,
            checkpoint_recorder=checkpoint.record,
        )
        async with _step_sink(store, input, attempt) as sink:
            sink.emit(agent_event(started))
            token = set_current_deferred_tool_execution(execution)
            try:
                async with (
                    _heartbeating(options.heartbeat_timeout, checkpoint),
                    asyncio.timeout(
                        options.tool_limit.total_seconds()
                        if call.step_timeout_seconds is None
                        else call.step_timeout_seconds
                    ),
                ):
                    outcome = await runner.execute_deferred_tool(call, execution)
            except ToolExecutionError as err:
                outcome = ToolOutcome(output=str(err), is_error=True)
            except Exception as err:
                failure = _engine_error(err, attempt=attempt)
                sink.emit(
                    agent_event(
                        ToolCallAttemptFailedEvent(
                            tool_call_id=call.tool_call_id,
                            tool_name=call.tool_name,
                            attempt=attempt,
                            error=clip(f"{type(err).__name__}: {err}"),
                            retrying=_retried(failure, attempt),
                        )
                    )
                )
                raise failure from _bounded_cause(err)
            finally:
                reset_current_deferred_tool_execution(token)
            output, output_ref = await store_long_output(
                store, input.session_id, outcome.output
            )
            if not outcome.finished_by_resumed_turn:
                finished = ToolCallFinishedEvent(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    status="failed" if outcome.is_error else "finished",
                    output=output,
                    output_ref=output_ref,
                    error=clip(outcome.output) if outcome.is_error else None,
                    attempts=attempt,
                )
                sink.emit(agent_event(finished))
        return CallToolOutput(
            output=output,
            output_ref=output_ref,
            is_error=outcome.is_error,
            finished_by_resumed_turn=outcome.finished_by_resumed_turn,
            images=list(outcome.images),
            attempt=attempt,
        )

    @activity.defn(name=names.call_tool)
    async def call_tool(input: CallToolInput) -> CallToolOutput:
        return await run_tool(input)

    @activity.defn(name=names.call_single_attempt_tool)
    async def call_single_attempt_tool(input: CallToolInput) -> CallToolOutput:
        return await run_tool(input)

    @activity.defn(name=names.publish)
    async def publish(input: PublishInput) -> None:
        await write_publication(store, input)

    @activity.defn(name=names.check_edit)
    async def check_edit(input: CheckEditInput) -> CheckEditOutput:
        """The runner's check of a person's edit; a refusal is an answer, not a failure."""
        call = input.call
        if call.arguments_ref is not None:
            arguments = await read_arguments(
                store, input.session_id, call.arguments_ref
            )
            call = replace(call, arguments=arguments, arguments_ref=None)
        edited = input.edited_input
        if input.edited_input_ref is not None:
            try:
                edited = await read_arguments(
                    store, input.session_id, input.edited_input_ref
                )
            except ValidationError as err:
                return CheckEditOutput(
                    problem=f"the stored edited input is not a JSON object: {err}"
                )
        assert edited is not None
        context = EditContext(
            session_id=input.session_id,
            flow_type=flow_type,
            turn_id=input.turn_id,
            tool_policies=dict(options.tool_policies),
            default_tool_effect=options.default_tool_effect,
        )
        try:
            checked = await runner.check_edited_call(call, dict(edited), context)
        except InvalidEditError as err:
            return CheckEditOutput(problem=err.message, field=err.field)
        checked = replace(
            checked,
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
        )
        return CheckEditOutput(
            call=await store_long_arguments(store, input.session_id, checked)
        )

    @activity.defn(name=names.notify)
    async def notify_interrupt(input: NotifyInput) -> None:
        """Tell `on_interrupt`; a raise is retried, a refusal (4xx) is not."""
        notifier = options.on_interrupt
        if notifier is None:
            return  # the flow stopped notifying since this Step was scheduled
        notification = input.notification
        if input.arguments_ref is not None:
            with contextlib.suppress(Exception):  # a preview never fails a notification
                whole = await read_arguments(
                    store, notification.session_id, input.arguments_ref
                )
                notification = replace(
                    notification, arguments_preview=preview_arguments(whole)
                )
        try:
            await notifier(notification)
        except Exception as err:
            # A receiver that refuses the request (a wrong secret: 401) will
            # refuse every retry; one that is down or throttles may come back.
            status = err.status_code if isinstance(err, WebhookError) else None
            retry = status is None or status >= 500 or status in (408, 429)
            raise ApplicationError(
                f"{type(err).__name__}: {err}",
                type=type(err).__name__,
                non_retryable=not retry,
            ) from err

    @activity.defn(name=names.release_park)
    async def release_park(input: ReleaseParkInput) -> None:
        """Close the park of a turn that ended without resuming it."""
        if lot is not None:
            lot.release((input.session_id, input.segment_id))

    @activity.defn(name=names.prime_park)
    async def prime_park(input: PrimeParkInput) -> bool:
        """Let a park go on with its approved call while the call's Step runs."""
        if lot is None:
            return False
        return await lot.prime((input.session_id, input.segment_id), input.call)

    return [
        run_model,
        release_park,
        prime_park,
        call_tool,
        call_single_attempt_tool,
        publish,
        check_edit,
        notify_interrupt,
    ]
