"""Client-side RPCs of a session: start, message, approve, snapshot, wait, events."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Mapping,
    Sequence,
)
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowHistoryEventFilterType,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from .._errors import (
    EngineError,
    IdleTimeoutError,
    InvalidArgumentError,
    InvalidEditError,
    NoWorkerError,
    SessionBusyError,
    SessionEndedError,
    UnknownInterruptError,
    UnknownSessionError,
    UserError,
    must_be,
)
from ..session._blob import blob_reference, preview
from ..session._events import EventRecord
from ..session._json import JsonObject
from ..session._media import ImageReference
from ..session._pending import INLINE_TEXT_LIMIT, MAX_USER_MESSAGE_BYTES
from ..session._state import SessionState, clip
from ..session._turns import check_budget_answer
from ..stores import RuntimeStore
from ..stores._rules import not_in_this_store
from ._activities import read_arguments
from ._arguments import (
    INVALID_ARGUMENT,
    MAX_INLINE_EDIT_BYTES,
    check_cancel_input,
    check_count,
    check_flag,
    check_images,
    check_json_object,
    check_resolution_input,
    check_session_id,
    check_text,
    check_timeout,
)
from ._delivery import Deadline, timeout_seconds, within
from ._flow import AgentSessionFlow
from ._models import (
    CancelTurnInput,
    EndSessionInput,
    EngineInfo,
    Interrupt,
    ResolveInterruptInput,
    SessionInput,
    TurnSummary,
    UserMessageInput,
)
from ._plugin import plugin_store
from ._pollers import worker_seen
from ._snapshot import AgentSnapshot, turn_number
from ._workflow import (
    EDIT_UNCHECKED,
    EXPIRED,
    INVALID_EDIT,
    INVALID_MESSAGE,
    NO_IMAGES,
    QUEUE_FULL,
    RECORD_RESOLUTION,
    SESSION_BUSY,
    SESSION_ENDED,
    UNKNOWN_INTERRUPT,
)

_snapshot_json = TypeAdapter(AgentSnapshot)
_turn_json = TypeAdapter(TurnSummary)
RECENT_TURNS = 20
"""Turns a snapshot reads from the store unless told otherwise."""
_QUERY_LIMIT = 5.0
"""Seconds a snapshot Query waits for a worker before the store's projection is read."""
_QUERY_FLOOR = 0.1
"""The shortest Query deadline: even a spent `timeout` asks the workflow once."""
_WORKER_CHECK_AFTER = 0.5
"""Seconds a snapshot Query goes unanswered before the client asks whether any
worker serves the session (a worker answers one in milliseconds)."""
_TASK_FAILING = "Workflow Task in failed state"
"""Temporal's refusal of an Update while the workflow's task keeps failing."""

_TAKE_FLOOR = 1.0
"""Seconds a request waits at least for a worker to take it, whatever its `timeout`.

A worker that polls takes an Update within milliseconds, but not within none:
with `timeout=0`, a session whose worker runs was told "no worker took it" (a
wait, instead of "still running"; an approval, recorded as if none ran).
"""


def _take_seconds(seconds: float | None) -> float | None:
    """`seconds`, or `_TAKE_FLOOR` if shorter: how long to wait for a worker to take it."""
    return None if seconds is None else max(seconds, _TAKE_FLOOR)


_T = TypeVar("_T")
_Expiring = TypeVar(
    "_Expiring", ResolveInterruptInput, CancelTurnInput, EndSessionInput
)

TASK_FAILING_PATIENCE = 30.0
"""Seconds a request waits out a failing workflow task before reporting it.

A worker killed while it held the session's workflow task leaves that task to
time out and run again on another worker (about 10 s); until that attempt
completes, Temporal refuses every Update with "Workflow Task in failed state".
Nothing was applied, so the request is sent again; only a task that still fails
after this long (a bug, or code that does not replay its history) is reported.
"""


async def _patient(call: Callable[[], Awaitable[_T]]) -> _T:
    """`call()`, sent again while the session's workflow task is failing."""
    started, delay = time.monotonic(), 0.1
    while True:
        try:
            return await call()
        except RPCError as err:
            if _TASK_FAILING not in err.message:
                raise
            if time.monotonic() - started >= TASK_FAILING_PATIENCE:
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 2.0)


# temporalio annotates the multi-param overload of `execute_update` (and its
# siblings) with an invalid `args: MultiParamSpec.args`, which pyright reads as
# unknown: each Update call below carries an ignore for that one gap.
def _handle(client: Client, session_id: str) -> WorkflowHandle[object, None]:
    return client.get_workflow_handle(session_id)


async def _bool_update(
    client: Client,
    session_id: str,
    update: str,
    request: object,
    deadline: Deadline,
    *,
    interrupt_id: str = "",
) -> tuple[bool, bool | None]:
    """The boolean Update `update`, sent patiently until `deadline`: `within`'s pair.

    Its rejections are this library's errors (`_update_errors`).
    """
    handle = _handle(client, session_id)
    update_id = str(uuid.uuid4())  # one Update on the server, however often asked
    with _update_errors(session_id, interrupt_id):
        return await within(
            deadline,
            lambda: _patient(
                lambda: handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
                    update, request, id=update_id, result_type=bool
                )
            ),
        )


_EXPIRY_GRACE = 5.0
"""Seconds a client waits past its request's `expires_at` for a worker's acceptance.

A worker that takes the request just before it expires answers within this;
one that takes it later finds it expired and refuses it.
"""


async def _taken_update(
    client: Client,
    session_id: str,
    update: str,
    request: _Expiring,
    deadline: Deadline,
    *,
    interrupt_id: str = "",
) -> tuple[bool, bool | None]:
    """The boolean Update `update` if a worker takes it before `deadline`; else nothing.

    `(True, result)` once a worker took it (the result waits for its handler);
    `(False, None)` if none did. With a deadline the request carries
    `expires_at`, so one that the server still holds when a worker starts later
    is refused then: "nothing was applied" stays true.
    """
    handle = _handle(client, session_id)
    update_id = str(uuid.uuid4())  # one Update on the server, however often asked
    seconds = deadline.remaining()
    if seconds is None:
        return await _bool_update(
            client, session_id, update, request, deadline, interrupt_id=interrupt_id
        )
    expires = datetime.now(UTC) + timedelta(seconds=seconds)
    request = replace(request, expires_at=expires.isoformat())
    with _update_errors(session_id, interrupt_id):
        try:
            taken, started = await within(
                Deadline(seconds + _EXPIRY_GRACE),
                lambda: _patient(
                    lambda: handle.start_update(  # pyright: ignore[reportUnknownMemberType]
                        update,
                        request,
                        id=update_id,
                        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                        result_type=bool,
                    )
                ),
            )
            if not taken or started is None:
                return False, None
            return True, await started.result()
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == EXPIRED:
                return False, None
            raise


async def _answered(call: Callable[[], Awaitable[_T]]) -> _T:
    """`call()` (an Update with a fixed ID) waited for as long as it takes.

    A caller's own deadline (`asyncio.timeout`) cancels it as it cancels any
    await, as a `TimeoutError`; temporalio alone raises its
    `WorkflowUpdateRPCTimeoutOrCancelledError` instead, and leaves a future
    whose exception nobody retrieves.
    """
    _, value = await within(Deadline(None), call)
    return cast(_T, value)  # no deadline: `within` returns only with a value


def _not_taken(session_id: str, what: str, deadline: Deadline) -> NoWorkerError:
    """No worker took `what` before `deadline`, and nothing was recorded."""
    return NoWorkerError(
        session_id, what, timeout=deadline.seconds or 0.0, recorded=False
    )


@contextlib.contextmanager
def _update_errors(
    session_id: str, interrupt_id: str = ""
) -> Generator[None, None, None]:
    """Turn the workflow's typed Update rejections into this library's errors.

    Any other failure propagates unchanged, with its original cause.
    """
    try:
        yield
    except WorkflowUpdateFailedError as err:
        cause = err.cause
        if isinstance(cause, ApplicationError):
            if cause.type == UNKNOWN_INTERRUPT:
                raise UnknownInterruptError(session_id, interrupt_id) from err
            if cause.type == INVALID_ARGUMENT:
                argument = cause.details[0] if cause.details else ""
                raise InvalidArgumentError(str(argument), cause.message) from err
            if cause.type == INVALID_EDIT:
                field = cause.details[0] if cause.details else ""
                raise InvalidEditError(str(field), cause.message) from err
            if cause.type == EDIT_UNCHECKED:
                raise EngineError(cause.message) from err
            if cause.type in (INVALID_MESSAGE, QUEUE_FULL, NO_IMAGES):
                raise UserError(cause.message) from err
            if cause.type == SESSION_ENDED:
                raise SessionEndedError(session_id, cause.message) from err
            if cause.type == SESSION_BUSY:
                raise SessionBusyError(session_id, cause.message) from err
        raise
    except RPCError as err:
        if _closed(err):
            raise SessionEndedError(session_id) from err
        if err.status == RPCStatusCode.NOT_FOUND:
            raise UnknownSessionError(session_id) from err
        if _TASK_FAILING in err.message:
            raise EngineError(
                f"session {session_id!r} cannot take this request now: its workflow "
                "task is failing on the worker (a bug, or code that does not replay "
                "its history); nothing was applied. Fix or roll back the worker, "
                "then send it again"
            ) from err
        raise


async def user_message_input(
    session_id: str,
    text: str,
    images: Sequence[ImageReference] | None,
    store: RuntimeStore | None,
) -> UserMessageInput:
    """The Update argument of a message: long text goes to the store first.

    The blob is named by its content, so a retried send writes the same blob.

    Raises:
        InvalidArgumentError: the text is not a valid `str`, or the images are
            not `ImageReference`s (nothing is written).
        UserError: the text is over `MAX_USER_MESSAGE_BYTES` (nothing is written),
            or it needs the store and none was given.
    """
    check_text("text", text)
    check_images("images", images)
    data = text.encode()
    if len(data) > MAX_USER_MESSAGE_BYTES:
        raise UserError(
            f"a user message of {len(data):,} bytes is over the limit of "
            f"{MAX_USER_MESSAGE_BYTES:,} bytes (32 MiB, `MAX_USER_MESSAGE_BYTES`); "
            "send a shorter message, or a file by reference through a tool"
        )
    if len(data) <= INLINE_TEXT_LIMIT:
        return UserMessageInput(text=text, images=list(images or ()))
    if store is None:
        raise UserError(
            f"a user message of {len(data):,} bytes travels through the runtime store "
            f"(more than {INLINE_TEXT_LIMIT} bytes); pass `store=`, use `SessionClient`, "
            "or connect the client with `SessionPlugin(store=...)`"
        )
    ref = blob_reference("msg", data)
    await store.put_blob(session_id, ref.blob_id, data)
    return UserMessageInput(text=preview(text), text_ref=ref, images=list(images or ()))


async def _refuse_other_flow(
    client: Client, flow: AgentSessionFlow, session_id: str
) -> None:
    """Refuse a session ID that a running session of another flow type holds.

    Update-with-start would attach to that session, whose workers poll another
    task queue, and wait forever (no worker of this flow serves it). An ended
    session's ID is refused too: a new workflow under it would write over the
    ended session's data in the store.

    Raises:
        UserError: The ID belongs to a running session of another flow type.
        SessionEndedError: The ID belongs to a session that ended.
    """
    try:
        description = await _handle(client, session_id).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return
        raise
    status = description.status
    if status is not None and status != WorkflowExecutionStatus.RUNNING:
        raise SessionEndedError(
            session_id,
            f"session {session_id!r} has ended (its workflow is {status.name}); its "
            "history stays readable, but the ID cannot start a new session: "
            "choose another ID",
        )
    if (
        description.status == WorkflowExecutionStatus.RUNNING
        and description.workflow_type != flow.flow_type
    ):
        raise UserError(
            f"session {session_id!r} already exists as a {description.workflow_type!r} "
            f"session, not {flow.flow_type!r}; session IDs are unique in a namespace, "
            "so choose another ID for this session"
        )


_NO_HANDLER = "Update handler for 'send_and_wait' expected but not found"
_NO_IMAGES_MESSAGE = (
    "this session's runner cannot send images; send text only, or give the agent "
    "definition a media store"
)


async def _edit_by_reference(
    session_id: str, resolution: ResolveInterruptInput, store: RuntimeStore | None
) -> ResolveInterruptInput:
    """`resolution` with a long edited input moved to the store (named by its content)."""
    assert resolution.edited_input is not None
    data = json.dumps(resolution.edited_input, ensure_ascii=False).encode()
    if len(data) > MAX_USER_MESSAGE_BYTES:
        raise InvalidArgumentError(
            "edited_input",
            f"`edited_input` of {len(data):,} bytes is over the limit of "
            f"{MAX_USER_MESSAGE_BYTES:,} bytes (32 MiB); pass a shorter input",
        )
    if len(data) <= MAX_INLINE_EDIT_BYTES:
        return resolution
    if store is None:
        raise InvalidArgumentError(
            "edited_input",
            f"an edited input of {len(data):,} bytes travels through the runtime "
            f"store (more than {MAX_INLINE_EDIT_BYTES:,} bytes); pass `store=`, use "
            "`SessionClient`, or connect the client with `SessionPlugin(store=...)`",
        )
    ref = blob_reference("edit", data)
    await store.put_blob(session_id, ref.blob_id, data)
    return replace(resolution, edited_input=None, edited_input_ref=ref)


async def recorded_resolutions(
    client: Client, session_id: str
) -> dict[str, ResolveInterruptInput]:
    """Every resolution recorded as a Signal in the session's run, by interrupt ID.

    With no worker, recorded resolutions wait in history; the first one of an
    interrupt applies and later ones change nothing, so each interrupt maps to
    its first. The history is read once, whole: a run's history is bounded
    (the session continues as new before it grows long).

    Raises:
        RPCError: the history cannot be read (no such session, no server).
    """
    recorded: dict[str, ResolveInterruptInput] = {}
    handle = _handle(client, session_id)
    async for event in handle.fetch_history_events():
        if not event.HasField("workflow_execution_signaled_event_attributes"):
            continue
        signaled = event.workflow_execution_signaled_event_attributes
        if signaled.signal_name != RECORD_RESOLUTION:
            continue
        (value,) = await client.data_converter.decode(
            signaled.input.payloads, [ResolveInterruptInput]
        )
        if isinstance(value, ResolveInterruptInput):
            recorded.setdefault(value.interrupt_id, value)
    return recorded


async def unapplied_resolutions(
    client: Client, session_id: str
) -> dict[str, ResolveInterruptInput]:
    """The resolutions recorded for the session that no worker has taken yet, by interrupt ID.

    A recorded resolution (a Signal) is taken by the next workflow task a
    worker runs; until one does, the session has a workflow task pending. So
    one `describe` answers most calls: with no task pending, nothing recorded
    waits (a running worker took it, or refused it), and the history is not
    read. Callers keep the interrupts still pending.

    Raises:
        RPCError: the session cannot be described or its history read.
    """
    description = await _handle(client, session_id).describe()
    if not description.raw_description.HasField("pending_workflow_task"):
        return {}
    return await recorded_resolutions(client, session_id)


RECORDED_TEXT = "recorded; applies when a worker starts"
"""How an answer no worker took yet is marked: it waits in the session's history."""


def recorded_answer_text(
    *,
    approved: bool,
    resolved_by: str | None,
    rejection_message: str | None,
    new_spend_limit: float | None,
    budget: bool,
    applies: bool = True,
) -> str:
    """An answer recorded while no worker ran, as the CLI and the web app say it.

    For example `approved by ana (recorded; applies when a worker starts)`: a
    new spend limit too, or a rejection's message (a decline's, for a `budget`
    interrupt); never an edit, which is never recorded without a worker to
    check it. Without `applies`, `(recorded)` only (a table cell, beside a line
    saying when it applies).
    """
    by = f" by {resolved_by}" if resolved_by else ""
    if approved:
        way = f"approved{by}" + (
            f" with a new spend limit of {new_spend_limit:.4f} USD"
            if new_spend_limit is not None
            else ""
        )
    else:
        way = f"{'declined' if budget else 'rejected'}{by}"
    why = f": {rejection_message}" if rejection_message and not approved else ""
    return f"{way} ({RECORDED_TEXT if applies else 'recorded'}){why}"


async def recorded_resolution(
    client: Client, session_id: str, interrupt_id: str
) -> ResolveInterruptInput | None:
    """The first resolution of `interrupt_id` recorded as a Signal in the session's run.

    With no worker, recorded resolutions wait in history; the first one of an
    interrupt applies and later ones change nothing, so a second is not sent,
    and one of the other way is refused (it would not apply).
    """
    return (await recorded_resolutions(client, session_id)).get(interrupt_id)


async def _answered_already(
    store: RuntimeStore | None, session_id: str, resolution: ResolveInterruptInput
) -> bool:
    """Whether the session answered this interrupt already, from the store; raise if it would refuse it.

    With no worker, a resolution is recorded as a Signal, which the session
    cannot refuse: one it would refuse (an ID it never had, a budget approval
    without a limit above what was spent) was reported recorded and then only
    logged when a worker started. The store's projection is what the session
    last published, so its pending interrupts are checked here first, with the
    rule the session's validator applies (`check_budget_answer`). An interrupt
    not pending that the event log shows created was answered already: True,
    as the Update would answer False. Without a store or a projection, False:
    nothing can be told, and the resolution is recorded as before.

    Raises:
        UnknownInterruptError: the session never created `interrupt_id`.
        InvalidArgumentError: the answer does not fit the interrupt's kind
            (`argument` is `new_spend_limit`).
        SessionEndedError: the session ended.
    """
    if store is None:
        return False
    data = await store.get_snapshot(session_id)
    if data is None:
        return False
    snapshot = _snapshot_json.validate_python(data)
    if snapshot.status == "ended":
        raise SessionEndedError(session_id)
    interrupt_id = resolution.interrupt_id
    interrupt = next(
        (i for i in snapshot.pending_interrupts if i.interrupt_id == interrupt_id),
        None,
    )
    if interrupt is None:
        if await _created(store, session_id, interrupt_id):
            return True
        raise UnknownInterruptError(session_id, interrupt_id)
    state = SessionState(
        session_id=session_id,
        interrupts={interrupt_id: interrupt},
        usage=snapshot.usage,
    )
    refusal = check_budget_answer(
        state,
        interrupt_id,
        approved=resolution.approved,
        new_spend_limit=resolution.new_spend_limit,
        edited=resolution.edited,
    )
    if refusal is not None:
        raise InvalidArgumentError("new_spend_limit", refusal.message)
    return False


async def _created(store: RuntimeStore, session_id: str, interrupt_id: str) -> bool:
    """Whether the session's event log has `interrupt_id`'s `interrupt_created` event."""
    after = 0
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            if (
                event.type == "interrupt_created"
                and event.data.get("interrupt_id") == interrupt_id
            ):
                return True
    return False


def _superseding(
    earlier: ResolveInterruptInput, later: ResolveInterruptInput
) -> str | None:
    """The recorded `earlier` answer that applies instead of `later`, or None if they agree.

    Only the first recorded answer of an interrupt applies: a later one of the
    other way, or an approval with another spend limit, would change nothing.
    """
    if earlier.approved != later.approved:
        return "an approval" if earlier.approved else "a rejection"
    if earlier.approved and earlier.new_spend_limit != later.new_spend_limit:
        limit = earlier.new_spend_limit
        return "an approval" + (
            f" with a new spend limit of {limit:.4f} USD" if limit is not None else ""
        )
    return None


def _seen(operation: WithStartWorkflowOperation[Any, None]) -> None:
    """Mark the outcome of `operation`'s start as read, whatever it was.

    temporalio hands a failed start's error (a `CancelledError` when the call
    was cancelled) to the operation's handle too, which nothing here awaits:
    unread, asyncio would print "Future exception was never retrieved" and a
    traceback when it is collected, as a Ctrl-C'd `dex-agents demo` did.
    """
    handle = operation._workflow_handle  # pyright: ignore[reportPrivateUsage]
    if handle.done() and not handle.cancelled():
        handle.exception()


def _closed(err: RPCError) -> bool:
    """Whether an Update failed because the session's workflow is no longer running."""
    return err.status == RPCStatusCode.NOT_FOUND and "already completed" in err.message


async def _live_snapshot(
    client: Client,
    session_id: str,
    store: RuntimeStore | None,
    deadline: Deadline | None = None,
) -> AgentSnapshot:
    """The workflow's live snapshot, or the store's projection when no worker answers."""
    snapshot, err = await _query_snapshot(client, session_id, store, deadline)
    if snapshot is None:
        assert err is not None
        raise _unreadable(session_id, err) from err
    return snapshot


async def _query_snapshot(
    client: Client,
    session_id: str,
    store: RuntimeStore | None,
    deadline: Deadline | None = None,
) -> tuple[AgentSnapshot | None, RPCError | None]:
    """The live snapshot, else the store's projection, else None and why not.

    A Query no worker takes waits its whole deadline (`_QUERY_LIMIT`), so one
    still unanswered after `_WORKER_CHECK_AFTER` asks whether any worker polls
    the session's task queue: with none, the projection answers at once (a web
    page or `show` of a session whose workers are stopped took 5 s a read).
    """
    seconds = deadline.cap(_QUERY_LIMIT) if deadline else _QUERY_LIMIT
    query = asyncio.ensure_future(
        _handle(client, session_id).query(
            "get_agent_snapshot",
            result_type=AgentSnapshot,
            rpc_timeout=timedelta(seconds=max(seconds, _QUERY_FLOOR)),
        )
    )
    try:
        if store is not None:
            done, _ = await asyncio.wait({query}, timeout=_WORKER_CHECK_AFTER)
            if not done and not await _served(client, session_id):
                projected = await store.get_snapshot(session_id)
                if projected is not None:
                    return _snapshot_json.validate_python(projected), None
        return await query, None
    except RPCError as err:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError from err  # the caller's, not the worker's
        projected = await store.get_snapshot(session_id) if store is not None else None
        if projected is None:
            return None, err
        return _snapshot_json.validate_python(projected), None
    finally:
        if not query.done():
            query.cancel()
            await asyncio.gather(query, return_exceptions=True)


async def _served(client: Client, session_id: str) -> bool:
    """Whether a worker polls the session's task queue; True when that cannot be told.

    A worker stopped less than `POLLER_FRESHNESS` ago still counts (Temporal
    keeps listing its poller), so the Query then waits for its deadline as before.
    """
    try:
        info = await _handle(client, session_id).describe(
            rpc_timeout=timedelta(seconds=_QUERY_LIMIT)
        )
        return await worker_seen(client, info.task_queue)
    except RPCError:
        return True


async def _stopped(client: Client, session_id: str) -> SessionEndedError | None:
    """Why the session's workflow stopped without ending (failed, terminated), or None.

    A workflow that failed (a bug on its run path) still answers Queries with
    the state it had, `running`, and its projection says so too: without this,
    a caller polling it would wait forever.
    """
    handle = _handle(client, session_id)
    try:
        status = (await handle.describe()).status
    except RPCError:
        return None  # unknown or unreachable: the caller's own path says so
    if status in (
        None,
        WorkflowExecutionStatus.RUNNING,
        WorkflowExecutionStatus.COMPLETED,
    ):
        return None
    cause = ""
    with contextlib.suppress(RPCError):
        async for event in handle.fetch_history_events(
            event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
        ):
            failure = event.workflow_execution_failed_event_attributes.failure
            cause = f": {clip(failure.message)}" if failure.message else ""
    return SessionEndedError(
        session_id,
        f"session {session_id!r} stopped: its workflow is {status.name.lower()}"
        f"{cause}. It takes no more messages or approvals; its history stays "
        f"readable (`temporal workflow show --workflow-id {session_id}`): start a "
        "new session with another ID to go on",
    )


def _unreadable(session_id: str, err: RPCError) -> UserError | EngineError:
    if err.status == RPCStatusCode.NOT_FOUND:
        return UnknownSessionError(session_id)
    return EngineError(
        f"cannot read session {session_id!r}: {err.message}; is a worker running "
        "for its flow (`dex-agents worker`)?"
    )


def _unanswered(err: RPCError) -> bool:
    """Whether a Query failed only because no worker answered it in time."""
    return err.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)


async def with_recent_turns(
    snapshot: AgentSnapshot, store: RuntimeStore | None, turns: int = RECENT_TURNS
) -> AgentSnapshot:
    """Fill in the `turns` most recent turns and their messages from the store."""
    if store is None:
        return snapshot
    session_id = snapshot.session_id

    async def interrupts() -> list[Interrupt]:
        return [
            await _whole_arguments(store, session_id, i)
            for i in snapshot.pending_interrupts
        ]

    if turns <= 0:
        snapshot.pending_interrupts = await interrupts()
        return snapshot
    # Three independent reads, side by side: a store may serve them at once. All
    # end before this returns, and the first to fail, in this order, is raised.
    whole, stored, messages = await asyncio.gather(
        interrupts(),
        store.read_turns(session_id, limit=turns),
        store.read_transcript(session_id, snapshot.transcript_head, max_segments=turns),
        return_exceptions=True,
    )
    if isinstance(whole, BaseException):
        raise whole
    if isinstance(stored, BaseException):
        raise stored
    if isinstance(messages, KeyError):
        missing = f"transcript segment {snapshot.transcript_head!r}"
        raise UserError(not_in_this_store(session_id, missing)) from messages
    if isinstance(messages, BaseException):
        raise messages
    snapshot.pending_interrupts = whole
    # The live turns (the active one, any ended turn still being published) win
    # over the store's copies; the newest `turns` of both, oldest first.
    merged = {t.turn_id: t for t in map(_turn_json.validate_python, stored)}
    merged.update(
        (t.turn_id, _cli_outputs_of(t, merged.get(t.turn_id))) for t in snapshot.turns
    )
    snapshot.turns = sorted(merged.values(), key=lambda t: turn_number(t.turn_id))
    snapshot.turns = snapshot.turns[-turns:]
    snapshot.messages = messages
    return snapshot


def _cli_outputs_of(live: TurnSummary, published: TurnSummary | None) -> TurnSummary:
    """`live` with what its approved CLI tools printed, as its published copy has it.

    The workflow records such a call (an approved `Bash`) before it runs, with
    a placeholder output; the turn log's copy has the output the segment
    reported (see `_activities._with_cli_outputs`).
    """
    if published is None:
        return live
    said = {
        r.tool_call_id: r.output
        for r in published.tool_calls
        if r.finished_by_resumed_turn and r.output
    }
    if not said:
        return live
    return replace(
        live,
        tool_calls=[
            replace(r, output=said[r.tool_call_id])
            if r.finished_by_resumed_turn and r.tool_call_id in said
            else r
            for r in live.tool_calls
        ],
    )


async def _whole_arguments(
    store: RuntimeStore, session_id: str, interrupt: Interrupt
) -> Interrupt:
    """The interrupt with its call's exact input, read back when it travelled by reference."""
    if interrupt.arguments_ref is None:
        return interrupt
    arguments = await read_arguments(store, session_id, interrupt.arguments_ref)
    return replace(interrupt, arguments=arguments, arguments_ref=None)


async def _idle_snapshot(
    client: Client, session_id: str, deadline: Deadline
) -> AgentSnapshot:
    """The `idle_snapshot` Update, telling "no worker took it" from "still busy"."""
    handle = _handle(client, session_id)
    update_id = str(uuid.uuid4())  # one Update on the server, however often asked
    if deadline.seconds is None:
        _, idle = await within(
            deadline,
            lambda: handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
                "idle_snapshot", id=update_id, result_type=AgentSnapshot
            ),
        )
        assert idle is not None  # no deadline: `within` returns only a result
        return idle
    # The worker gets `_TAKE_FLOOR` to take it however short the wait: else a
    # busy session's running worker was blamed as missing.
    take = _take_seconds(deadline.remaining()) or 0.0
    taken, update = await within(
        Deadline(take),
        lambda: handle.start_update(  # pyright: ignore[reportUnknownMemberType]
            "idle_snapshot",
            id=update_id,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=AgentSnapshot,
        ),
    )
    if not taken or update is None:
        raise NoWorkerError(
            session_id,
            "`wait_for_idle`",
            timeout=_take_seconds(deadline.seconds) or 0.0,
            recorded=False,
        )
    done, idle = await within(deadline, update.result)
    if not done or idle is None:
        raise IdleTimeoutError(session_id, deadline.seconds)
    return idle


async def _history_pages(
    store: RuntimeStore, session_id: str, page_size: int
) -> AsyncIterator[TurnSummary]:
    before: int | None = None
    while True:
        page = await store.read_turns(session_id, before=before, limit=page_size)
        for turn in page:
            yield _turn_json.validate_python(turn)
        if len(page) < page_size:
            return
        before = turn_number(str(page[-1]["turn_id"]))


class SessionClient:
    """The session RPCs: start, message, approve, cancel, end, snapshot, wait, events.

    Args:
        client: A Temporal client connected with the session's data converter
            (`EmbeddedEngine.client()`, or `SessionPlugin` in `plugins=`).
        flow: The flow that `start` starts sessions of. The other calls reach
            any session (its workflow knows its flow), so a client that only
            reads or answers sessions needs none.
        store: The runtime store the sessions write: snapshots read their turns
            from it, and a long message or edit travels through it. By default,
            the store of the client's `SessionPlugin(store=...)`, if it has one.
    """

    def __init__(
        self,
        client: Client,
        flow: AgentSessionFlow | None = None,
        store: RuntimeStore | None = None,
    ) -> None:
        # Checked here, not at the first call: a flow passed by its name (a
        # str) or the arguments swapped failed later with an AttributeError.
        if not isinstance(cast(object, client), Client):
            raise must_be(
                "client",
                "a temporalio `Client`",
                client,
                "connect one with `Client.connect(...)` or `EmbeddedEngine.client()`",
            )
        if flow is not None and not isinstance(cast(object, flow), AgentSessionFlow):
            raise must_be(
                "flow",
                "an `AgentSessionFlow` or None",
                flow,
                "pass the flow object itself (what `create_claude_agent_session_flow` "
                "returns), "
                "not its name; None for a client that only reaches existing sessions",
            )
        if store is not None and not callable(getattr(store, "get_snapshot", None)):
            raise must_be(
                "store",
                "a runtime store (`SQLiteRuntimeStore`, `PostgresRuntimeStore`) or None",
                store,
            )
        self.client = client
        self.flow = flow
        self.store = store

    def _store(self) -> RuntimeStore | None:
        """The runtime store: this client's, else its `SessionPlugin`'s, else None."""
        return self.store or plugin_store(self.client)

    def _read_store(self) -> RuntimeStore:
        """The runtime store a read of the store itself needs (history, events).

        Raises:
            UserError: this client has no store, and its plugin none either.
        """
        store = self._store()
        if store is None:
            raise UserError(
                "this `SessionClient` has no runtime store to read: pass one, as "
                "`SessionClient(client, flow, store)`, or connect the client with "
                "`SessionPlugin(store=...)`"
            )
        return store

    async def start(
        self,
        session_id: str,
        *,
        initial_message: str | None = None,
        initial_images: Sequence[ImageReference] | None = None,
    ) -> bool:
        """Start the session if it is new (update-with-start: idempotent), and send a message.

        `initial_images` go with `initial_message` (which may then be empty). Returns
        what `send_user_message` returns, or True when no message was given. A
        message longer than `INLINE_TEXT_LIMIT` bytes needs the runtime store.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value; nothing
                was started or sent.
            UserError: the ID belongs to a session of another flow, or the message
                is refused as by `send_user_message`, or this client has no flow.
            SessionEndedError: the ID belongs to a session that ended.
        """
        check_session_id(session_id)
        check_text("initial_message", initial_message, optional=True)
        check_images("initial_images", initial_images)
        if (
            initial_message is not None
            and not initial_message.strip()
            and not initial_images
        ):
            # The workflow refuses it too, but update-with-start would have
            # started the session first.
            raise InvalidArgumentError(
                "initial_message",
                f"`initial_message` must not be blank, got {initial_message!r}; pass "
                "text (or images), or no message to start the session idle",
            )
        flow = self.flow
        if flow is None:
            raise UserError(
                "this `SessionClient` has no flow to start sessions of: pass one, "
                "as `SessionClient(client, flow, store)`"
            )
        client = self.client
        await _refuse_other_flow(client, flow, session_id)
        update_id = str(uuid.uuid4())  # one Update on the server, however often sent

        operations: list[WithStartWorkflowOperation[Any, None]] = []

        def operation() -> WithStartWorkflowOperation[Any, None]:
            # An operation is used once: a call sent again needs a new one.
            operations.append(
                WithStartWorkflowOperation(
                    flow.flow_type,
                    SessionInput(),
                    id=session_id,
                    task_queue=flow.task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    result_type=type(None),
                )
            )
            return operations[-1]

        try:
            return await self._start(
                session_id, update_id, operation, initial_message, initial_images
            )
        finally:
            for sent in operations:
                _seen(sent)

    async def _start(
        self,
        session_id: str,
        update_id: str,
        operation: Callable[[], WithStartWorkflowOperation[Any, None]],
        initial_message: str | None,
        initial_images: Sequence[ImageReference] | None,
    ) -> bool:
        """`start`'s update-with-start, sent until a worker answers."""
        client = self.client
        with _update_errors(session_id):
            if initial_message is None and not initial_images:
                await _answered(
                    lambda: _patient(
                        lambda: client.execute_update_with_start_workflow(  # pyright: ignore[reportUnknownMemberType]
                            "describe",
                            id=update_id,
                            start_workflow_operation=operation(),
                            result_type=int,
                        )
                    )
                )
                return True
            message = await user_message_input(
                session_id, initial_message or "", initial_images, self._store()
            )
            return await _answered(
                lambda: client.execute_update_with_start_workflow(  # pyright: ignore[reportUnknownMemberType]
                    "send_user_message",
                    message,
                    id=update_id,
                    start_workflow_operation=operation(),
                    result_type=bool,
                )
            )

    async def send_user_message(
        self,
        session_id: str,
        text: str,
        images: Sequence[ImageReference] | None = None,
    ) -> bool:
        """Send a user message to a running session; True once it is queued for a turn.

        `images` are media store references sent after the text. False means the
        message was not queued: it has images and the session's runner cannot send
        images (for a Claude agent, its definition has no `media_store`). A message
        longer than `INLINE_TEXT_LIMIT` bytes is written to the runtime store and
        sent by reference; at most `MAX_USER_MESSAGE_BYTES`.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value (nothing
                is sent or written).
            UnknownSessionError: no session has this ID.
            UserError: the text is empty or too long, or the session already queues
                `MAX_QUEUED_MESSAGES` messages.
        """
        check_session_id(session_id)
        message = await user_message_input(session_id, text, images, self._store())
        update_id = str(uuid.uuid4())  # one Update on the server, however often sent
        with _update_errors(session_id):
            return await _answered(
                lambda: _patient(
                    lambda: _handle(self.client, session_id).execute_update(  # pyright: ignore[reportUnknownMemberType]
                        "send_user_message", message, id=update_id, result_type=bool
                    )
                )
            )

    async def send_and_wait(
        self,
        session_id: str,
        text: str,
        images: Sequence[ImageReference] | None = None,
        *,
        turns: int = RECENT_TURNS,
    ) -> AgentSnapshot:
        """Send a user message and return the snapshot once its turn is over.

        The same as `send_user_message` followed by `wait_for_idle`, in one Update
        instead of an Update, a Query and another Update: the turn's answer (or the
        approval it waits for) arrives a round trip sooner, and the session's
        history holds fewer events. A worker older than this call gets the two calls.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value.
            UnknownSessionError: no session has this ID.
            UserError: as `send_user_message`, and for images the session's runner
                cannot send (nothing is queued).
        """
        check_session_id(session_id)
        check_count("turns", turns, minimum=0)
        store = self._store()
        message = await user_message_input(session_id, text, images, store)
        update_id = str(uuid.uuid4())  # one Update on the server, however often sent
        try:
            with _update_errors(session_id):
                snapshot = await _answered(
                    lambda: _patient(
                        lambda: _handle(self.client, session_id).execute_update(  # pyright: ignore[reportUnknownMemberType]
                            "send_and_wait",
                            message,
                            id=update_id,
                            result_type=AgentSnapshot,
                        )
                    )
                )
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if not (
                isinstance(cause, ApplicationError) and _NO_HANDLER in cause.message
            ):
                raise
            # A worker of a release before `send_and_wait`: nothing was queued.
            if not await self.send_user_message(session_id, text, images):
                raise UserError(_NO_IMAGES_MESSAGE) from err
            return await self.wait_for_idle(session_id, turns=turns)
        return await with_recent_turns(snapshot, store, turns)

    async def resolve_interrupt(
        self,
        session_id: str,
        interrupt_id: str,
        *,
        approved: bool,
        rejection_message: str | None = None,
        timeout: timedelta | float | None = None,
        resolved_by: str | None = None,
        edited_input: Mapping[str, Any] | None = None,
        new_spend_limit: float | None = None,
    ) -> bool:
        """Approve or reject a pending tool call, or approve it with an edited input.

        `resolved_by` names who decided: the session records it with the
        resolution (the interrupt, the call's record, the `interrupt_resolved`
        event), on the Update and on the recorded Signal alike.
        Returns False when the interrupt was already resolved (nothing changes).
        With `timeout` (seconds or a `timedelta`), a resolution that no worker
        takes in time is recorded in the session's history instead (the
        `record_resolution` Signal, kept with no worker running) and
        `NoWorkerError(recorded=True)` says so: it applies once a worker runs the
        session, exactly once, however many times it was sent; the first recorded
        answer of an interrupt is the one that applies. A worker gets at least
        1 s to take it, however short `timeout` is. Before recording it,
        the store's projection (what the session last published) is checked:
        an answer the session would refuse is refused here, and one to an
        interrupt answered already returns False, so nothing is recorded that
        would not apply. Without `timeout`, the call waits for a worker as
        long as it takes.

        `edited_input` (with `approved=True`) approves the call with this input
        instead of the model's: the worker checks it against the tool's schema and
        decides its policy again, the call runs with it, and its record and the
        `interrupt_resolved` event keep both inputs and who edited (`resolved_by`).
        The model reads the result with a note that a person edited the input. An
        edit longer than `MAX_INLINE_EDIT_BYTES` goes to the runtime store first.
        An edit is never recorded without a worker: it needs the check.

        An interrupt of kind `budget` (the session reached its spend limit; status
        `budget_reached`) is approved with `new_spend_limit`, in USD and above what
        the session spent: the turn goes on under it. Rejected, the turn fails as
        a spent limit always did.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value, such as
                an `approved` that is not a bool, or `timeout=0` with an edit
                (nothing is sent or recorded); `new_spend_limit` when the answer
                does not fit the interrupt's kind (with no worker too).
            InvalidEditError: the tool refuses `edited_input` (`field` names where);
                the call stays pending.
            UnknownSessionError: no session has this ID.
            UnknownInterruptError: the session never created `interrupt_id`
                (with no worker: the store's projection does not have it).
            NoWorkerError: no worker took it within `timeout`. `recorded` is True
                when it (or the same answer, earlier) is in the session's history;
                False when an earlier recorded answer applies instead (one of the
                other way, or an approval with another spend limit: `superseded`
                names it).
        """
        check_session_id(session_id)
        check_timeout(
            timeout,
            never_recorded="an edited approval" if edited_input is not None else "",
        )
        edit = None if edited_input is None else cast(JsonObject, edited_input)
        resolution = ResolveInterruptInput(
            interrupt_id=interrupt_id,
            approved=approved,
            rejection_message=rejection_message,
            resolved_by=resolved_by,
            edited_input=edit,
            new_spend_limit=new_spend_limit,
        )
        if edit is not None:
            # Every check before the store is written: a refused call writes nothing.
            check_resolution_input(replace(resolution, edited_input={}))
            check_json_object("edited_input", edit)
            resolution = await _edit_by_reference(session_id, resolution, self._store())
        check_resolution_input(resolution)
        deadline = Deadline(_take_seconds(timeout_seconds(timeout)))
        # An edit is never recorded for later, so one no worker took in time must
        # expire; another answer is recorded (a Signal) and may apply twice.
        send = _taken_update if resolution.edited else _bool_update
        taken, changed = await send(
            self.client,
            session_id,
            "resolve_interrupt",
            resolution,
            deadline,
            interrupt_id=interrupt_id,
        )
        if taken:
            return bool(changed)
        if resolution.edited:
            raise _not_taken(
                session_id,
                f"the edited approval of interrupt {interrupt_id!r} (an edit needs a "
                "worker to check it, so it is never recorded without one)",
                deadline,
            )
        if await _answered_already(self._store(), session_id, resolution):
            return False
        earlier = await recorded_resolution(self.client, session_id, interrupt_id)
        if earlier is None:
            await _handle(self.client, session_id).signal(RECORD_RESOLUTION, resolution)
        verb = "approval" if approved else "rejection"
        superseded = None if earlier is None else _superseding(earlier, resolution)
        raise NoWorkerError(
            session_id,
            f"the {verb} of interrupt {interrupt_id!r}",
            timeout=deadline.seconds or 0.0,
            recorded=superseded is None,
            superseded=superseded,
        )

    async def cancel_turn(
        self,
        session_id: str,
        *,
        reason: str = "",
        cancelled_by: str | None = None,
        timeout: timedelta | float | None = None,
    ) -> bool:
        """Stop the session's running turn (a Stop button); False when no turn runs.

        True once the request is applied; the turn then stops on its own: a
        running model segment is cancelled and its CLI killed (within about a
        heartbeat, on whichever worker runs it), an approval it waits for is
        closed as `cancelled`, and a tool Step in flight finishes and is recorded
        first (stopping a write midway would leave its outcome unknown). The turn
        ends `cancelled`, with the text it had streamed; its messages are not sent
        again, and the next turn's model is told it was stopped. Queued messages
        behind it start the next turn as usual. `wait_for_idle` after it returns
        once the turn stopped.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value, such
                as `timeout=0` (a cancel is never recorded for later).
            UnknownSessionError: no session has this ID.
            SessionEndedError: the session ended.
            NoWorkerError: no worker took the request within `timeout` (nothing
                was applied; call it again once a worker runs).
        """
        check_session_id(session_id)
        request = CancelTurnInput(reason=reason, cancelled_by=cancelled_by)
        check_cancel_input(request)
        check_timeout(timeout, never_recorded="a cancel")
        deadline = Deadline(_take_seconds(timeout_seconds(timeout)))
        taken, cancelled = await _taken_update(
            self.client, session_id, "cancel_turn", request, deadline
        )
        if not taken:
            raise _not_taken(session_id, "the cancel", deadline)
        return bool(cancelled)

    async def end(
        self,
        session_id: str,
        *,
        reason: str = "",
        force: bool = False,
        timeout: timedelta | float | None = None,
    ) -> bool:
        """End a session: its workflow completes, and its history stays readable.

        True once it ended; False if it had ended already (or its workflow was
        closed some other way). Ending is graceful, like a Temporal workflow that
        returns, never a cancellation of something running: an idle session ends
        at once. One with work in progress (a running turn, queued messages, or
        approvals waiting) is refused with `SessionBusyError` unless `force`;
        forced, its waiting approvals are rejected with "the session ended:
        <reason>" (the agent is not asked again), its queued messages are dropped,
        and a running turn stops after the Step it is in: a model segment or a
        tool call finishes (nothing is cut off mid-write), then the turn ends
        `failed` and nothing more runs. The call returns after the session's last
        publish: `snapshot` says `ended`, and `events` ends with `session_ended`.
        Later messages and approvals raise `SessionEndedError`.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value, such
                as `timeout=0` (an end is never recorded for later).
            SessionBusyError: work is in progress and `force` is False.
            UnknownSessionError: no session has this ID.
            NoWorkerError: no worker took the request within `timeout` (nothing
                was applied; call it again once a worker runs).
        """
        check_session_id(session_id)
        check_text("reason", reason)
        check_flag("force", force)
        check_timeout(timeout, never_recorded="an end")
        deadline = Deadline(_take_seconds(timeout_seconds(timeout)))
        request = EndSessionInput(reason=reason, force=force)
        try:
            taken, ended = await _taken_update(
                self.client, session_id, "end_session", request, deadline
            )
        except SessionEndedError:
            return False
        if not taken:
            raise _not_taken(session_id, "the end", deadline)
        return bool(ended)

    async def engine_info(self, session_id: str) -> EngineInfo:
        """How the engine runs the session: sandboxed, its runs, a parked segment.

        Raises:
            InvalidArgumentError: the session ID is not a valid ID.
            UnknownSessionError: no session has this ID.
            EngineError: no worker answered (the store holds no engine facts).
        """
        check_session_id(session_id)
        try:
            info = await _handle(self.client, session_id).query(
                "engine_info",
                result_type=EngineInfo,
                rpc_timeout=timedelta(seconds=_QUERY_LIMIT),
            )
        except RPCError as err:
            raise _unreadable(session_id, err) from err
        if info.parked_until is not None and info.parked_until <= datetime.now(UTC):
            # The workflow's clock stops between its tasks; this one does not.
            info = dataclasses.replace(info, parked_on=None, parked_until=None)
        return info

    async def snapshot(
        self, session_id: str, *, turns: int = RECENT_TURNS
    ) -> AgentSnapshot:
        """The session's snapshot, with its `turns` most recent turns when there is a store.

        The live part comes from the workflow (falling back to the store's
        projection when no worker answers); turns and messages come from the
        store, so the cost does not grow with the session's age. Older turns:
        `history`.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value.
            UnknownSessionError: no session has this ID (and the store has no
                snapshot of it).
            EngineError: no worker answered and the store has no snapshot.
        """
        check_session_id(session_id)
        check_count("turns", turns, minimum=0)
        store = self._store()
        snapshot, stopped = await asyncio.gather(
            _live_snapshot(self.client, session_id, store),
            _stopped(self.client, session_id),
        )
        if stopped is not None:
            raise stopped
        return await with_recent_turns(snapshot, store, turns)

    async def wait_for_idle(
        self,
        session_id: str,
        *,
        turns: int = RECENT_TURNS,
        timeout: timedelta | float | None = None,
    ) -> AgentSnapshot:
        """Wait until no turn runs (answered or waiting for approval); return the snapshot.

        An idle session is answered by a Query alone, which writes no history; a
        busy one by one Update that returns once it is idle. With `timeout`
        (seconds or a `timedelta`) the wait ends there (a worker still gets at
        least 1 s to take the Update, so `timeout=0` on a busy session it runs
        is `IdleTimeoutError`); without, it waits as long as it takes, for a
        worker too.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value.
            UnknownSessionError: no session has this ID.
            NoWorkerError: no worker took the wait within `timeout` (`recorded`
                is False: nothing changed).
            IdleTimeoutError: a worker runs the turn, and it was not over within
                `timeout`.
        """
        check_session_id(session_id)
        check_count("turns", turns, minimum=0)
        check_timeout(timeout)
        store = self._store()
        deadline = Deadline(timeout_seconds(timeout))
        snapshot, err = await _query_snapshot(self.client, session_id, store, deadline)
        if snapshot is None and err is not None and not _unanswered(err):
            raise _unreadable(session_id, err) from err
        # Neither the workflow nor the store answered: the session's worker is
        # not running (yet), so wait for it with the Update.
        if snapshot is None or snapshot.status == "running":
            try:
                snapshot = await _idle_snapshot(self.client, session_id, deadline)
            except RPCError as err:
                if not _closed(err):
                    raise
                raise (
                    await _stopped(self.client, session_id)
                    or SessionEndedError(session_id)
                ) from err
        return await with_recent_turns(snapshot, store, turns)

    def history(
        self, session_id: str, *, page_size: int = 100
    ) -> AsyncIterator[TurnSummary]:
        """Every finished turn of the session, newest first, read page by page.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value (at the
                call, before the first page is read).
            UserError: this client has no runtime store.
            UnknownSessionError: no session has this ID (neither the store nor
                Temporal knows it; raised at the first page).
        """
        check_session_id(session_id)
        check_count("page_size", page_size, minimum=1)
        return self._history(self._read_store(), session_id, page_size)

    async def _history(
        self, store: RuntimeStore, session_id: str, page_size: int
    ) -> AsyncIterator[TurnSummary]:
        empty = True
        async for turn in _history_pages(store, session_id, page_size):
            empty = False
            yield turn
        if empty:
            await self._require_known(store, session_id)

    async def events(self, session_id: str, *, after: int = 0) -> list[EventRecord]:
        """Events of the session after the cursor `after`.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value.
            UserError: this client has no runtime store.
            UnknownSessionError: no session has this ID (neither the store nor
                Temporal knows it).
        """
        check_session_id(session_id)
        check_count("after", after, minimum=0)
        store = self._read_store()
        events = await store.read_events(session_id, after=after)
        if not events:
            await self._require_known(store, session_id)
        return events

    def follow(self, session_id: str, *, after: int = 0) -> AsyncIterator[EventRecord]:
        """Follow the session's events as they are written.

        Raises:
            InvalidArgumentError: an argument has the wrong type or value (at
                the call, before any event is read).
            UserError: this client has no runtime store.
            UnknownSessionError: no session has this ID (neither the store nor
                Temporal knows it; raised before the first event, instead of
                waiting forever).
        """
        check_session_id(session_id)
        check_count("after", after, minimum=0)
        return self._follow(self._read_store(), session_id, after)

    async def _follow(
        self, store: RuntimeStore, session_id: str, after: int
    ) -> AsyncIterator[EventRecord]:
        first = await store.read_events(session_id, after=after)
        if not first:
            await self._require_known(store, session_id)
        for event in first:
            yield event
            after = event.cursor
        async for event in store.follow_events(session_id, after=after):
            yield event

    async def _require_known(self, store: RuntimeStore, session_id: str) -> None:
        """Raise `UnknownSessionError` unless the store or Temporal knows the session.

        Called after a read found nothing: a session with no snapshot in the
        store yet (no worker took it) may still exist, so Temporal is asked
        (`describe`). When Temporal cannot answer, nothing is raised: the
        empty read stands, as before.
        """
        if await store.get_snapshot(session_id) is not None:
            return
        try:
            await _handle(self.client, session_id).describe(
                rpc_timeout=timedelta(seconds=_QUERY_LIMIT)
            )
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise UnknownSessionError(session_id) from err
