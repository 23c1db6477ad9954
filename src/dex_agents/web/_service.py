"""What the API and the inbox pages do, on top of `SessionClient` and the runtime store.

Routes only parse, authorize and render; every operation is here, once, so a
form on a page and a JSON call do exactly the same thing. Each call that
needs a worker has a deadline (`create_app(worker_timeout=...)`): a request never
hangs because no worker runs.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar, cast

from pydantic import TypeAdapter
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from .._errors import EngineError, UnknownSessionError
from ..session._events import parsed_time
from ..session._json import JsonObject
from ..session._state import SessionStatus, TurnSummary, call_fields
from ..stores import RuntimeStore
from ..stores._cursors import cursor_before_turn
from ..temporal import SessionClient
from ..temporal._client import unapplied_resolutions, with_recent_turns
from ..temporal._flow import AgentSessionFlow
from ..temporal._pollers import worker_seen
from ..temporal._snapshot import AgentSnapshot
from ._errors import ApiError, images_not_supported, translated
from ._models import (
    Approval,
    ApprovalPage,
    Cancelled,
    CancelTurn,
    Ended,
    EndSession,
    HistoryPage,
    Queued,
    RecordedAnswer,
    Rejection,
    Resolution,
    SendMessage,
    SessionPage,
    SessionSnapshot,
    SessionSummary,
    SessionView,
    Started,
    StartSession,
)
from ._tokens import Principal

ClientSource = Client | Callable[[], Awaitable[Client]]
"""A connected client, or how to connect one (in the server's own event loop)."""

_SNAPSHOT = TypeAdapter(AgentSnapshot)
_TURN = TypeAdapter(TurnSummary)
_T = TypeVar("_T")
_log = logging.getLogger(__name__)
_GAVE_UP = (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError)
"""What a call cut short by its deadline raises (Temporal turns the cancelled
wait for an Update into its own error)."""


@dataclass(frozen=True, kw_only=True)
class WebOptions:
    """How long the app waits, and how often it polls."""

    worker_timeout: float = 10.0
    """Seconds a request waits for a worker to take it (then 503 `no_worker`)."""
    wait_timeout: float = 300.0
    """Seconds `POST .../messages` with `wait: true` waits for the turn (then 504)."""
    poll_interval: float = 0.02
    """Seconds between two reads of the event log by a followed session's poller."""


class Service:
    """The app's operations on sessions and approvals."""

    def __init__(
        self,
        client: ClientSource,
        flows: Sequence[AgentSessionFlow],
        store: RuntimeStore,
        options: WebOptions,
    ) -> None:
        self._client_source = client
        self._client: Client | None = client if isinstance(client, Client) else None
        self._connecting = asyncio.Lock()
        self.flows = {f.flow_type: f for f in flows}
        self.store = store
        self.options = options
        self._recorded_seen: dict[str, tuple[float, dict[str, RecordedAnswer]]] = {}
        """Recorded answers looked up for a list, by session: (when, answers)."""
        self._refreshing: asyncio.Task[None] | None = None
        """The background lookup of recorded answers for a list, while it runs."""

    async def client(self) -> Client:
        """The Temporal client, connected on first use in this event loop.

        A connection that fails is the engine being out of reach, not a bug of
        the request: 503 `engine_unavailable`, and the next request tries again.

        Raises:
            ApiError: 503 `engine_unavailable` when the client cannot be had.
        """
        if self._client is None:
            async with self._connecting:
                if self._client is None:
                    source = cast(Callable[[], Awaitable[Client]], self._client_source)
                    try:
                        self._client = await source()
                    except Exception as err:
                        raise _unreachable(err) from err
        return self._client

    async def sessions(self, flow: AgentSessionFlow | None = None) -> SessionClient:
        """A session client; the flow matters only to `start`.

        Every other call is answered by the session's own workflow, which
        knows its flow, so any flow (or none) does.
        """
        chosen = flow or next(iter(self.flows.values()), None)
        return SessionClient(await self.client(), chosen, self.store)

    # -- sessions ----------------------------------------------------------

    async def list_sessions(
        self, status: SessionStatus | None, limit: int, before: str | None
    ) -> SessionPage:
        """A page of sessions, most recently updated first."""
        with translated():
            rows = await self.store.list_snapshots(
                status=status, limit=limit, before=before
            )
        summaries = [_summary(_SNAPSHOT.validate_python(r)) for r in rows]
        next_before = summaries[-1].session_id if len(summaries) == limit else None
        return SessionPage(sessions=summaries, next_before=next_before)

    async def start(self, body: StartSession) -> Started:
        """Start a session and send its first message, if any."""
        flow = self._flow(body.flow)
        session_id = body.session_id or f"web-{uuid.uuid4().hex[:12]}"
        if body.images and not flow.workflow_class.supports_images:
            # Refused here: update-with-start would start the session first.
            raise images_not_supported(session_id, started=True)
        sessions = await self.sessions(flow)
        with translated(session_id):
            queued = await self._in_time(
                sessions.start(
                    session_id,
                    initial_message=body.message,
                    initial_images=[i.reference() for i in body.images] or None,
                ),
                f"the start of session {session_id!r}",
                applies_later=True,
            )
        if not queued:  # the session's worker runs a runner without images
            raise images_not_supported(session_id)
        return Started(session_id=session_id, queued=queued)

    def _flow(self, name: str | None) -> AgentSessionFlow:
        if not self.flows:
            raise ApiError(
                400,
                "invalid_request",
                "this app serves no flow, so it cannot start sessions; create it "
                "with `flows=[...]` (`dex-agents serve --agent module:flow`)",
            )
        if name is None:
            if len(self.flows) == 1:
                return next(iter(self.flows.values()))
            raise ApiError(
                400,
                "invalid_request",
                f"this app serves several flows; name one in `flow`: {sorted(self.flows)}",
            )
        flow = self.flows.get(name)
        if flow is None:
            raise ApiError(
                400,
                "invalid_request",
                f"unknown flow {name!r}; this app serves {sorted(self.flows)}",
            )
        return flow

    async def send(self, session_id: str, body: SendMessage) -> Queued | SessionView:
        """Queue a user message; with `wait`, answer with the snapshot after its turn."""
        if body.images and not await self._takes_images(session_id):
            raise images_not_supported(session_id)
        sessions = await self.sessions()
        images = [i.reference() for i in body.images] or None
        with translated(session_id):
            if body.wait:
                try:
                    async with asyncio.timeout(self.options.wait_timeout):
                        snapshot = await sessions.send_and_wait(
                            session_id, body.text, images
                        )
                except _GAVE_UP:
                    raise ApiError(
                        504,
                        "timeout",
                        f"the turn of session {session_id!r} was not over within "
                        f"{self.options.wait_timeout:g} s; it goes on: follow its "
                        "events, or read its snapshot later",
                    ) from None
                return SessionView(snapshot=SessionSnapshot.of(snapshot))
            queued = await self._in_time(
                sessions.send_user_message(session_id, body.text, images),
                f"the message to session {session_id!r}",
                applies_later=True,
            )
        if not queued:  # only a message with images the runner cannot send
            raise images_not_supported(session_id)
        return Queued(queued=queued)

    async def _takes_images(self, session_id: str) -> bool:
        """False when the session runs, as a flow of this app whose runner cannot send images.

        Asked of Temporal (no worker needed, nothing written) before a message
        with images is sent: the session's own refusal would be recorded in
        its history. A session of a flow this app does not serve, or one that
        ended, is left to the session to answer.
        """
        client = await self.client()
        with translated(session_id):
            description = await client.get_workflow_handle(session_id).describe()
        flow = self.flows.get(description.workflow_type)
        return (
            flow is None
            or description.status != WorkflowExecutionStatus.RUNNING
            or flow.workflow_class.supports_images
        )

    async def _in_time(
        self, call: Awaitable[_T], what: str, *, applies_later: bool
    ) -> _T:
        """`call`, or 503 `no_worker` when no worker took it within `worker_timeout`."""
        try:
            async with asyncio.timeout(self.options.worker_timeout):
                return await call
        except _GAVE_UP:
            later = (
                "Temporal keeps a request it admitted, so it may still apply when a "
                "worker starts: read the session before sending it again"
                if applies_later
                else "nothing was applied"
            )
            raise ApiError(
                503,
                "no_worker",
                f"no worker took {what} within {self.options.worker_timeout:g} s; "
                f"{later} (`dex-agents worker --agent module:flow` starts one)",
            ) from None

    async def view(self, session_id: str, turns: int) -> SessionView:
        """The snapshot with its `turns` most recent turns (who decided is in it).

        Each pending interrupt carries the answer recorded for it while no
        worker ran (`recorded`), read from the session's history only when an
        approval waits.
        """
        sessions = await self.sessions()
        with translated(session_id):
            snapshot = await sessions.snapshot(session_id, turns=turns)
        recorded = await self._recorded([snapshot], fresh=True)
        return SessionView(
            snapshot=SessionSnapshot.of(snapshot, recorded.get(session_id))
        )

    async def require_session(self, session_id: str) -> None:
        """Raise `UnknownSessionError` (404) unless a session has this ID.

        The store's projection answers for a session that ran a turn; else
        Temporal's `describe`. Never a Query: with no worker, one waits its
        whole deadline, and an event stream opened (or reopened by a browser)
        waited 5 s for it.
        """
        if await self.store.get_snapshot(session_id) is not None:
            return
        client = await self.client()
        try:
            await client.get_workflow_handle(session_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise UnknownSessionError(session_id) from err
            raise

    async def history(
        self, session_id: str, before: int | None, limit: int
    ) -> HistoryPage:
        """A page of finished turns, newest first."""
        with translated(session_id):
            rows = await self.store.read_turns(session_id, before=before, limit=limit)
            if not rows and before is None and await self._unknown(session_id):
                raise ApiError(
                    404,
                    "session_not_found",
                    f"no session {session_id!r}; list sessions with `GET /api/sessions`",
                )
        turns = [_TURN.validate_python(r) for r in rows]
        next_before = (
            int(turns[-1].turn_id.rpartition("-")[2]) if len(turns) == limit else None
        )
        return HistoryPage(turns=turns, next_before=next_before)

    async def _unknown(self, session_id: str) -> bool:
        if await self.store.get_snapshot(session_id) is not None:
            return False
        # A session started without a message has no projection until its first
        # turn: the engine knows it.
        sessions = await self.sessions()
        try:
            await sessions.snapshot(session_id, turns=0)
        except UnknownSessionError:
            return True
        return False

    async def end(self, session_id: str, body: EndSession) -> Ended:
        """End the session (`SessionClient.end`), if this release of the core has it."""
        sessions = await self.sessions()
        end = getattr(sessions, "end", None)
        if end is None:
            raise ApiError(
                501,
                "not_implemented",
                "ending a session needs `SessionClient.end`, which this release of "
                "dex-agents lacks; upgrade dex-agents",
            )
        with translated(session_id):
            ended = await end(
                session_id,
                reason=body.reason,
                force=body.force,
                timeout=self.options.worker_timeout,
            )
        return Ended(ended=bool(ended))

    async def cancel(
        self, session_id: str, body: CancelTurn, principal: Principal
    ) -> Cancelled:
        """Stop the running turn as the token's name (`SessionClient.cancel_turn`).

        Never recorded for later: with no worker it is 503 `no_worker`, and
        nothing changed.
        """
        sessions = await self.sessions()
        with translated(session_id):
            cancelled = await sessions.cancel_turn(
                session_id,
                reason=body.reason,
                cancelled_by=principal.name,
                timeout=self.options.worker_timeout,
            )
        return Cancelled(cancelled=bool(cancelled))

    # -- approvals ---------------------------------------------------------

    async def approvals(self, limit: int, before: str | None) -> ApprovalPage:
        """Pending approvals of every session waiting for one, a page of sessions at a time.

        A session waits for a tool call's approval (`waiting_for_approval`) or
        for a new spend limit (`budget_reached`): both lists are read, merged
        newest first, and cut to `limit`, so `before` pages through both.
        """
        with translated():
            rows = [
                row
                for status in _WAITING
                for row in await self.store.list_snapshots(
                    status=status, limit=limit, before=before
                )
            ]
        rows.sort(key=lambda row: str(row.get("updated_at") or ""), reverse=True)
        rows = rows[:limit]
        snapshots = [
            await with_recent_turns(_SNAPSHOT.validate_python(row), self.store, turns=0)
            for row in rows
        ]
        recorded = await self._recorded(snapshots)
        now = datetime.now(UTC)
        approvals: list[Approval] = []
        for snapshot in snapshots:
            answers = recorded.get(snapshot.session_id, {})
            approvals.extend(
                Approval(
                    session_id=snapshot.session_id,
                    **call_fields(i),
                    turn_id=i.turn_id,
                    arguments=i.arguments,
                    reason=i.reason,
                    created_at=i.created_at,
                    age_seconds=_age(i.created_at, now),
                    at_least_once=i.at_least_once,
                    kind=i.kind,
                    recorded=answers.get(i.interrupt_id),
                )
                for i in snapshot.pending_interrupts
            )
        next_before = str(rows[-1]["session_id"]) if len(rows) == limit else None
        return ApprovalPage(approvals=approvals, next_before=next_before)

    async def _recorded(
        self, snapshots: Sequence[AgentSnapshot], *, fresh: bool = False
    ) -> dict[str, dict[str, RecordedAnswer]]:
        """The answers recorded while no worker ran, by session ID, then interrupt ID.

        An answer no worker took waits in the session's history as a Signal and
        applies when a worker starts; until then the approval is still pending.
        Only sessions with an approval waiting are asked (`unapplied_resolutions`:
        one `describe`, and the history only while a workflow task is pending),
        `_HISTORY_READS` at a time; one that cannot be read has none (the
        request does not fail for it).

        With `fresh` (a session's own view) they are asked now. A list, which an
        open inbox polls every second, answers from what was found before and
        asks again in the background about sessions not asked for
        `_RECORDED_SECONDS`: a listing never waits for the engine, and the
        engine is asked about each waiting session at most that often, however
        many inboxes are open. An answer this app records is known at once.
        """
        waiting = [
            s for s in snapshots if any(not i.resolved for i in s.pending_interrupts)
        ]
        if not waiting:
            return {}
        if fresh:
            await self._ask_recorded([s.session_id for s in waiting])
        else:
            self._refresh_recorded(waiting)
        found: dict[str, dict[str, RecordedAnswer]] = {}
        for snapshot in waiting:
            known = self._recorded_seen.get(snapshot.session_id)
            answers = {
                i.interrupt_id: known[1][i.interrupt_id]
                for i in snapshot.pending_interrupts
                if known is not None and not i.resolved and i.interrupt_id in known[1]
            }
            if answers:
                found[snapshot.session_id] = answers
        return found

    def _refresh_recorded(self, waiting: Sequence[AgentSnapshot]) -> None:
        """Ask again, in the background, about the sessions not asked for a while."""
        if self._refreshing is not None and not self._refreshing.done():
            return  # one refresh at a time; the next listing asks for the rest
        now = time.monotonic()
        seen = self._recorded_seen
        for session_id in [
            k for k, (at, _) in seen.items() if now - at > 3 * _RECORDED_SECONDS
        ]:
            del seen[session_id]  # a session no longer listed
        stale = [
            s
            for s in waiting
            if s.session_id not in seen
            or now - seen[s.session_id][0] > _RECORDED_SECONDS
        ]
        if stale:
            self._refreshing = asyncio.create_task(self._ask_unserved(stale))

    async def _ask_unserved(self, stale: Sequence[AgentSnapshot]) -> None:
        """Ask about the sessions whose flow no worker serves now.

        A worker that runs takes a recorded answer at once, so only while none
        polls a flow's task queue can one wait (and for a minute or so after
        the last one stopped, the queue still counts as served: an answer
        recorded elsewhere then shows once that minute is over, or on the
        session's own view). One `describe_task_queue` per flow, then one
        `describe` per session of an unserved flow.
        """
        try:
            client = await self.client()
        except Exception as err:  # the listing answered already; log, ask later
            _log.warning("cannot reach Temporal for recorded answers: %s", err)
            return
        queues = {
            flow.task_queue
            for s in stale
            if (flow := self.flows.get(s.flow_type)) is not None
        }
        served: set[str] = set()
        for queue in queues:
            try:
                if await worker_seen(client, queue):
                    served.add(queue)
            except RPCError as err:
                _log.warning("cannot tell whether a worker serves %r: %s", queue, err)
        now = time.monotonic()
        for s in stale:
            flow = self.flows.get(s.flow_type)
            if flow is None or flow.task_queue in served:
                # Served (or not this app's flow): nothing waits; asked again later.
                known = self._recorded_seen.get(s.session_id)
                self._recorded_seen[s.session_id] = (now, known[1] if known else {})
        await self._ask_recorded(
            [
                s.session_id
                for s in stale
                if (flow := self.flows.get(s.flow_type)) is not None
                and flow.task_queue not in served
            ]
        )

    async def _ask_recorded(self, session_ids: Sequence[str]) -> None:
        """Ask about each session's unapplied answers, `_HISTORY_READS` at a time."""
        reads = asyncio.Semaphore(_HISTORY_READS)

        async def ask(session_id: str) -> None:
            async with reads:
                answers = await self._recorded_answers(session_id)
            self._recorded_seen[session_id] = (time.monotonic(), answers)

        await asyncio.gather(*map(ask, session_ids))

    async def _recorded_answers(self, session_id: str) -> dict[str, RecordedAnswer]:
        """The first answer recorded for each interrupt no worker took yet, by ID."""
        try:
            client = await self.client()
            async with asyncio.timeout(_HISTORY_READ_SECONDS):
                resolutions = await unapplied_resolutions(client, session_id)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                _log.warning(
                    "cannot read the answers recorded in session %r's history: %s",
                    session_id,
                    err.message or err.status.name,  # an outage has no message
                )
            return {}  # not known to Temporal: nothing can be recorded for it
        except Exception as err:  # a read that fails shows no answer, never an error
            _log.warning(
                "cannot read the answers recorded in session %r's history: %s",
                session_id,
                str(err) or type(err).__name__,  # a timeout says nothing itself
            )
            return {}
        return {
            interrupt_id: RecordedAnswer.of(resolution)
            for interrupt_id, resolution in resolutions.items()
        }

    async def resolve(
        self,
        session_id: str,
        interrupt_id: str,
        principal: Principal,
        *,
        approved: bool,
        rejection: Rejection | None = None,
        edited_input: JsonObject | None = None,
        new_spend_limit: float | None = None,
    ) -> Resolution:
        """Approve or reject a pending call as the token's name.

        The name travels with the resolution (`resolved_by`): the session
        records it on the interrupt, the call's record and the
        `interrupt_resolved` event, on the Update and on the recorded Signal
        alike, so nothing is written beside it and a crash cannot lose it.
        `edited_input` approves with that input instead of the model's; the
        worker checks it (422 `invalid_edit` when refused), so it is never
        recorded without one (503 `no_worker`). `new_spend_limit` approves a
        spend-limit interrupt with that limit (400 `invalid_request` when it
        does not fit the interrupt).
        """
        message = rejection.message if rejection is not None else None
        sessions = await self.sessions()
        recorded = False
        try:
            with translated(session_id):
                changed = await sessions.resolve_interrupt(
                    session_id,
                    interrupt_id,
                    approved=approved,
                    rejection_message=message,
                    timeout=self.options.worker_timeout,
                    resolved_by=principal.name,
                    edited_input=edited_input,
                    new_spend_limit=new_spend_limit,
                )
        except ApiError as err:
            if err.code != "no_worker" or edited_input is not None:
                raise
            # Recorded in the session's history: it applies when a worker runs.
            changed, recorded = False, True
            await self._ask_recorded([session_id])  # listed as recorded at once
        if not changed and not recorded:
            who = await self._earlier_answer(session_id, interrupt_id)
            raise ApiError(
                409,
                "already_resolved",
                f"interrupt {interrupt_id!r} of session {session_id!r} was answered "
                f"already{who}; nothing changed. Read the session for its outcome",
            )
        return Resolution(
            interrupt_id=interrupt_id,
            approved=approved,
            by=principal.name,
            resolved=not recorded,
            recorded=recorded,
        )

    async def _earlier_answer(self, session_id: str, interrupt_id: str) -> str:
        """How `interrupt_id` was answered, from its event (` (approved by 'x')`), or "".

        Reads the events of the session's last few turns only: an interrupt
        lives in the turn that asked, so its answer is recent.
        """
        with translated(session_id):
            turns = await self.store.count_turns(session_id)
            after = await cursor_before_turn(
                self.store, session_id, max(1, turns - _ANSWER_TURNS)
            )
            while batch := await self.store.read_events(session_id, after=after):
                for event in batch:
                    after = event.cursor
                    data = event.data
                    if (
                        event.type == "interrupt_resolved"
                        and data.get("interrupt_id") == interrupt_id
                    ):
                        way = "approved" if data.get("approved") else "rejected"
                        by = data.get("resolved_by")
                        return f" ({way} by {by!r})" if by else f" ({way})"
        return ""


_WAITING: tuple[SessionStatus, ...] = ("waiting_for_approval", "budget_reached")
"""Statuses of a session with an approval waiting (a tool call's, or a spend limit's)."""
_ANSWER_TURNS = 5
"""Turns back from the newest whose events `_earlier_answer` reads."""
_HISTORY_READS = 16
"""Session histories one request reads at once (for their recorded answers)."""
_RECORDED_SECONDS = 10.0
"""Seconds a list reuses the recorded answers it found for a session."""
_HISTORY_READ_SECONDS = 5.0
"""Seconds a history read may take before its session shows no recorded answer."""


def _unreachable(err: Exception) -> ApiError:
    """The 503 of a Temporal client that cannot be had: the engine is out of reach.

    The library's own errors (a failed connection) are worded for people and
    quoted; anything else the app's client function raised is named by its
    type only, with the details in the log, as a 500 keeps internals there.
    """
    if isinstance(err, EngineError | RPCError):
        _log.warning("cannot connect to Temporal: %s", err)
        reason = str(err)
    else:
        _log.warning("the app's Temporal client function failed", exc_info=err)
        reason = f"the app's client function raised {type(err).__name__}; its log has the details"
    return ApiError(
        503,
        "engine_unavailable",
        f"the Temporal engine cannot be reached now ({reason}); try again later, "
        "and check that the engine runs and that this app can reach it",
    )


def _summary(snapshot: AgentSnapshot) -> SessionSummary:
    return SessionSummary(
        session_id=snapshot.session_id,
        flow_type=snapshot.flow_type,
        status=snapshot.status,
        turn_count=snapshot.turn_count,
        pending_approvals=len(snapshot.pending_interrupts),
        updated_at=snapshot.updated_at,
        cost_usd=snapshot.usage.cost_usd,
    )


def _age(created_at: str, now: datetime) -> float:
    created = parsed_time(created_at)
    return max(0.0, (now - created).total_seconds()) if created is not None else 0.0
