"""Answering approvals: `approve`, `reject` and the `approvals` list, with or without a worker.

An answer goes to the session's worker as an Update. When no worker takes it
in time (none runs, or the one that ran just died), the library records it in
the session's history instead (`NoWorkerError(recorded=True)`), and the
command says it applies when a worker starts (exit code 3). With no worker,
nothing can ask the session itself, so the runtime store's event log is read
instead: whether the interrupt exists, and whether (and how) it was answered.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import click
from rich.console import Console
from rich.text import Text

from .._errors import NoWorkerError, UnknownInterruptError
from ..stores import RuntimeStore, redacted_store
from ..temporal import (
    AgentSnapshot,
    Interrupt,
    get_agent_snapshot,
    resolve_interrupt,
    with_recent_turns,
)
from . import _render as render
from ._context import (
    Connection,
    Target,
    connect,
    open_store,
    require_session,
    store_exists,
    worker_seen,
)
from ._errors import EXIT_RECORDED, CommandError, ConflictError, prog
from ._views import Pending

_UNSEEN_WAIT = 2.0
"""Seconds an answer waits for a worker when none has polled lately: it is
recorded at once, unless a worker that is just starting takes it."""
_EVENT_LAG = 3.0
"""Seconds to wait for the event that says how an interrupt was answered: the
worker publishes it right after the answer."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """How an interrupt was answered, from its `interrupt_resolved` event."""

    approved: bool
    rejection_message: str | None
    expired: bool = False
    """Its deadline answered it (its call's `tool_call_finished` says `expired`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Logged:
    """What the event log says about an interrupt."""

    created: bool
    answer: Answer | None


async def logged(store: RuntimeStore, session_id: str, interrupt_id: str) -> Logged:
    """Whether the session's event log has the interrupt, and its answer if any."""
    call_id: object = None
    answer: Answer | None = None
    created = expired = False
    after = 0
    while batch := await store.read_events(session_id, after=after):
        for event in batch:
            after = event.cursor
            data = event.data
            if event.type == "tool_call_finished":
                if call_id is not None and data.get("tool_call_id") == call_id:
                    expired = data.get("status") == "expired"
            elif data.get("interrupt_id") != interrupt_id:
                continue
            elif event.type == "interrupt_created":
                created, call_id = True, data.get("tool_call_id")
            elif event.type == "interrupt_resolved":
                message = data.get("rejection_message")
                answer = Answer(
                    approved=bool(data.get("approved")),
                    rejection_message=message if isinstance(message, str) else None,
                )
    if answer is not None and expired:
        answer = replace(answer, expired=True)
    return Logged(created=created, answer=answer)


async def _answer_when_logged(
    store: RuntimeStore | None, session_id: str, interrupt_id: str
) -> Answer | None:
    """The interrupt's answer, waiting a moment for the worker to publish it."""
    if store is None:
        return None
    deadline = asyncio.get_running_loop().time() + _EVENT_LAG
    while True:
        answer = (await logged(store, session_id, interrupt_id)).answer
        if answer is not None or asyncio.get_running_loop().time() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def resolve(
    target: Target,
    session_id: str,
    interrupt_id: str,
    *,
    approved: bool,
    message: str | None,
    timeout: float,
    resolved_by: str | None = None,
) -> int:
    """Answer one approval as `resolved_by`; the exit code (0 done, 3 recorded for later).

    Raises:
        CommandError: no such session or interrupt, or it has ended.
        ConflictError: the call was already answered the other way, or such an
            answer is recorded for when a worker starts.
    """
    out = render.console()
    conn = await connect(target)
    info = await require_session(conn, session_id)
    store = await open_store(target) if store_exists(target) else None
    try:
        seen = await worker_seen(conn.client, info.task_queue)
        if not seen and store is not None:
            known = await logged(store, session_id, interrupt_id)
            if known.answer is not None:
                return _already(out, session_id, interrupt_id, approved, known.answer)
            if not known.created and await store.get_snapshot(session_id):
                raise await _unknown(conn, store, session_id, interrupt_id, live=False)
        verb = "approve" if approved else "reject"
        try:
            async with render.Progress(
                out, f"waiting for the session's worker to take the {verb}"
            ):
                changed = await resolve_interrupt(
                    conn.client,
                    None,
                    session_id,
                    interrupt_id=interrupt_id,
                    approved=approved,
                    rejection_message=message,
                    timeout=timeout if seen else min(timeout, _UNSEEN_WAIT),
                    resolved_by=resolved_by,
                )
        except NoWorkerError as err:
            log = await logged(store, session_id, interrupt_id) if store else None
            if log is not None and log.answer is not None:
                # Answered before the worker stopped: what was recorded changes nothing.
                return _already(out, session_id, interrupt_id, approved, log.answer)
            if err.superseded is not None:
                verb = "approve" if approved else "reject"
                raise ConflictError(
                    f"{err.superseded} of {interrupt_id} (session {session_id!r}) is "
                    "already recorded and applies first when a worker starts; this "
                    f"{verb} was not recorded"
                ) from None
            known = log is not None and log.created
            done = "approval" if approved else "rejection"
            caveat = (
                ""
                if known
                else f", if the session has interrupt {interrupt_id} (the store "
                f"{redacted_store(target.store)!r} cannot tell: no worker wrote it "
                "there)"
            )
            out.print(
                Text.assemble(
                    ("recorded: ", "bold yellow"),
                    f"the {done} of {interrupt_id} (session {session_id}). No worker "
                    f"serves flow {info.flow_type!r} now; it applies when one "
                    f"starts{caveat}: `{prog()} worker --agent module:flow` (or "
                    f"`{prog()} dev --agent module:flow`)",
                ),
                soft_wrap=True,
            )
            return EXIT_RECORDED
        except UnknownInterruptError:
            raise await _unknown(conn, store, session_id, interrupt_id) from None
        if not changed:
            answer = await _answer_when_logged(store, session_id, interrupt_id)
            return _already(out, session_id, interrupt_id, approved, answer)
    finally:
        if store is not None:
            await store.close()
    done = "approved" if approved else "rejected"
    out.print(
        Text.assemble(
            ("✓ " if approved else "✗ ", "green" if approved else "red"),
            f"{done} {interrupt_id} of session {session_id}",
        ),
        soft_wrap=True,
    )
    out.print(
        Text(f"follow the turn: {prog()} events {session_id} --follow", style="dim"),
        soft_wrap=True,
    )
    return 0


def _already(
    out: Console,
    session_id: str,
    interrupt_id: str,
    approved: bool,
    answer: Answer | None,
) -> int:
    """Say how an interrupt was answered before; fail if it was the other way."""
    if answer is None:
        out.print(
            Text(
                f"{interrupt_id} was already answered; nothing changed (how: "
                f"`{prog()} events {session_id}`)",
                style="yellow",
            ),
            soft_wrap=True,
        )
        return 0
    way = "approved" if answer.approved else "rejected"
    if answer.expired:
        way = "rejected: its approval deadline passed"
    elif not answer.approved and answer.rejection_message:
        way = f"rejected ({answer.rejection_message!r})"
    if answer.approved == approved:
        out.print(
            Text(f"{interrupt_id} was already {way}; nothing changed", style="yellow"),
            soft_wrap=True,
        )
        return 0
    verb = "approve" if approved else "reject"
    raise ConflictError(
        f"{interrupt_id} of session {session_id!r} was already {way}; this {verb} "
        "changed nothing"
    )


async def _unknown(
    conn: Connection,
    store: RuntimeStore | None,
    session_id: str,
    interrupt_id: str,
    *,
    live: bool = True,
) -> CommandError:
    """The error for an interrupt the session does not have, naming the pending ones."""
    if live:
        snapshot = await get_agent_snapshot(conn.client, None, session_id, turns=0)
        source = ""
    else:
        data = await store.get_snapshot(session_id) if store else None
        snapshot = render.snapshot_from_json(data) if data else None
        source = " (from the store's last projection: no worker runs)"
    pending = ", ".join(
        f"{i.interrupt_id} ({i.tool_name})"
        for i in (snapshot.pending_interrupts if snapshot else [])
    )
    return CommandError(
        f"session {session_id!r} has no interrupt {interrupt_id!r}; "
        + (f"pending: {pending}" if pending else "it has no pending approvals")
        + f"{source} (see `dex-agents show {session_id}`)"
    )


# -- the list -------------------------------------------------------------------


async def pending_approvals(target: Target) -> list[Pending]:
    """Every approval waiting in every session of the store, the longest-waiting first.

    Read from the store's projections, so it works with no server or worker
    running; a long input is read back whole.
    """
    if not store_exists(target):
        return []
    store = await open_store(target)
    try:
        waiting: list[Pending] = []
        for data in await store.list_snapshots():
            snapshot: AgentSnapshot = render.snapshot_from_json(data)
            if not snapshot.pending_interrupts:
                continue
            snapshot = await with_recent_turns(snapshot, store, turns=0)
            waiting += [
                Pending(
                    session_id=snapshot.session_id,
                    flow_type=snapshot.flow_type,
                    interrupt=i,
                )
                for i in snapshot.pending_interrupts
            ]
    finally:
        await store.close()
    return sorted(waiting, key=lambda p: _created(p.interrupt))


def _created(interrupt: Interrupt) -> datetime:
    try:
        at = datetime.fromisoformat(interrupt.created_at)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def exit_with(code: int) -> None:
    """End the command with `code` (0 returns normally)."""
    if code:
        raise click.exceptions.Exit(code)
