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
import contextlib
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import click
from rich.console import Console
from rich.text import Text
from temporalio.client import Client
from temporalio.service import RPCError

from .._errors import (
    DexAgentsError,
    EngineError,
    InvalidArgumentError,
    InvalidEditError,
    NoWorkerError,
    UnknownInterruptError,
)
from ..session._blob import BlobReference
from ..session._events import parsed_time
from ..session._json import JsonObject
from ..session._state import Interrupt
from ..stores import RuntimeStore
from ..stores._open import redacted_store
from ..temporal import SessionClient
from ..temporal._activities import read_arguments
from ..temporal._client import (
    unapplied_resolutions,
    with_recent_turns,
)
from ..temporal._models import ResolveInterruptInput
from ..temporal._snapshot import AgentSnapshot
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
from ._errors import (
    EXIT_RECORDED,
    BadArgumentError,
    CommandError,
    ConflictError,
    suggest,
)
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
    edited: bool = False
    """It was approved with an edited input."""
    edited_arguments: JsonObject | None = None
    """The edited input it was approved with, when the event carries it whole."""
    edited_arguments_ref: BlobReference | None = None
    """Where the runtime store keeps that input, when it is long."""
    new_spend_limit: float | None = None
    """The new limit a spend-limit interrupt was approved with (USD)."""
    budget: bool = False
    """It asked for a new spend limit (its `interrupt_created` says kind `budget`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What `approve` or `reject` answers to one interrupt, and who answers."""

    approved: bool
    message: str | None = None
    """Why it is rejected: the agent reads it in place of the tool's result."""
    resolved_by: str | None = None
    """Who decides (`--as`, else the OS user), recorded with the answer."""
    edited_input: JsonObject | None = None
    """Approve the call with this input instead of the model's."""
    new_spend_limit: float | None = None
    """Approve a spend-limit interrupt with this new limit (USD)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Logged:
    """What the event log says about an interrupt."""

    created: bool
    answer: Answer | None


async def logged(store: RuntimeStore, session_id: str, interrupt_id: str) -> Logged:
    """Whether the session's event log has the interrupt, and its answer if any."""
    call_id: object = None
    answer: Answer | None = None
    created = expired = budget = False
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
                budget = data.get("kind") == "budget"
            elif event.type == "interrupt_resolved":
                answer = _answer_of(data)
    if answer is not None:
        answer = replace(answer, expired=answer.expired or expired, budget=budget)
    return Logged(created=created, answer=answer)


def _answer_of(data: JsonObject) -> Answer:
    """The answer an `interrupt_resolved` event's data says."""
    message = data.get("rejection_message")
    edited = data.get("edited_arguments")
    ref = data.get("edited_arguments_ref")
    limit = data.get("new_spend_limit")
    return Answer(
        approved=bool(data.get("approved")),
        rejection_message=message if isinstance(message, str) else None,
        expired=bool(data.get("expired")),
        edited="edited_arguments" in data or "edited_arguments_ref" in data,
        edited_arguments=cast(JsonObject, edited) if isinstance(edited, dict) else None,
        edited_arguments_ref=_blob_reference(ref),
        new_spend_limit=float(limit)
        if isinstance(limit, int | float) and not isinstance(limit, bool)
        else None,
    )


def _blob_reference(value: object) -> BlobReference | None:
    """The blob reference an event's data holds, or None if it holds none."""
    if not isinstance(value, dict):
        return None
    ref = cast(JsonObject, value)
    blob_id, size, sha256 = ref.get("blob_id"), ref.get("size"), ref.get("sha256")
    if isinstance(blob_id, str) and isinstance(size, int) and isinstance(sha256, str):
        return BlobReference(blob_id=blob_id, size=size, sha256=sha256)
    return None


async def _edited_input(
    store: RuntimeStore | None, session_id: str, answer: Answer
) -> JsonObject | None:
    """The edited input `answer` approved, read back whole; None if it cannot be read."""
    if answer.edited_arguments_ref is None:
        return answer.edited_arguments
    if store is None:
        return None
    try:
        return await read_arguments(store, session_id, answer.edited_arguments_ref)
    except (DexAgentsError, ValueError):
        return None  # missing or changed: it cannot be the same edit, as far as known


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


_EDIT_HINT = (
    "pass the call's whole input as a JSON object, e.g. `--edit "
    '\'{"orderId": "8"}\'`, or `--edit @input.json` to read it from a file'
)
_JSON_KINDS: dict[type[object], str] = {
    list: "an array",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}


def edited_input_option(value: str) -> JsonObject:
    """`--edit`'s value as the edited input: a JSON object, or `@FILE` holding one.

    `@-` reads it from stdin. JSON's non-standard `NaN` and `Infinity` are
    refused here, as the session would refuse them.

    Raises:
        BadArgumentError: not JSON, not an object, or an unreadable file (exit 2).
    """
    text, named = value, "`--edit`"
    if value.startswith("@"):
        name = value[1:]
        named = f"`--edit {value}`"
        if not name:
            raise BadArgumentError(
                f"bad {named}: name a file after `@` (`--edit @input.json`, or "
                "`--edit @-` for stdin)"
            )
        try:
            text = (
                sys.stdin.read()
                if name == "-"
                else Path(name).read_text(encoding="utf-8")
            )
        except (OSError, UnicodeDecodeError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else err
            raise BadArgumentError(
                f"bad {named}: cannot read {name!r}: {why}"
            ) from None
    try:
        parsed: object = json.loads(text, parse_constant=_no_constant)
    except ValueError as err:
        shown = text if len(text) <= 40 else f"{text[:39]}…"
        raise BadArgumentError(
            f"bad {named}: {shown!r} is not JSON ({err}); {_EDIT_HINT}"
        ) from None
    if not isinstance(parsed, dict):
        kind = _JSON_KINDS.get(type(parsed), type(parsed).__name__)
        raise BadArgumentError(
            f"bad {named}: the edited input must be a JSON object ({{...}}), not "
            f"{kind}; {_EDIT_HINT}"
        )
    return cast(JsonObject, parsed)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def spend_limit_option(value: float) -> float:
    """`--spend-limit`'s value: a positive, finite number of USD.

    Raises:
        BadArgumentError: zero, negative, `inf` or `nan` (exit 2).
    """
    if not math.isfinite(value) or value <= 0:
        raise BadArgumentError(
            f"bad `--spend-limit {value:g}`: the new limit must be a positive, finite "
            "number of USD (above what the session spent), e.g. `--spend-limit 5`"
        )
    return value


def _suggested_limit(interrupt: Interrupt) -> str:
    """A new limit to show in advice: twice the larger of the spend and the old limit."""
    old = interrupt.arguments.get("spend_limit_usd")
    base = max(
        render.spent_usd(interrupt.arguments),
        float(old) if isinstance(old, int | float) else 0.0,
    )
    return f"{base * 2:.4g}" if base > 0 else "5"


async def _pending_interrupt(
    conn: Connection,
    store: RuntimeStore | None,
    session_id: str,
    interrupt_id: str,
    *,
    live: bool,
) -> Interrupt | None:
    """The pending interrupt `interrupt_id`: from the store's projection, else the session.

    None when neither has it pending (answered, unknown, or unreadable): the
    session's own answer then says what it is.
    """
    data = await store.get_snapshot(session_id) if store is not None else None
    pending = render.snapshot_from_json(data).pending_interrupts if data else []
    if live and not any(i.interrupt_id == interrupt_id for i in pending):
        with contextlib.suppress(EngineError, RPCError):
            snapshot = await SessionClient(conn.client).snapshot(session_id, turns=0)
            pending = snapshot.pending_interrupts
    return next((i for i in pending if i.interrupt_id == interrupt_id), None)


def _check_kind(
    interrupt: Interrupt | None,
    session_id: str,
    *,
    approved: bool,
    new_spend_limit: float | None,
    edited: bool,
) -> None:
    """Refuse an answer that does not fit what the interrupt asks (exit 2).

    A spend-limit interrupt is approved with `--spend-limit` above what was
    spent; a tool call's takes no `--spend-limit`.
    """
    if interrupt is None:
        return
    command = (session_id, interrupt.interrupt_id)
    if not render.is_budget(interrupt):
        if new_spend_limit is not None:
            raise BadArgumentError(
                f"`--spend-limit` answers a spend-limit interrupt only; "
                f"{interrupt.interrupt_id} asks to approve the tool call "
                f"{interrupt.tool_name}: `{suggest('approve', *command)}` (without "
                "`--spend-limit`)"
            )
        return
    if not approved:
        return
    spent = render.spent_usd(interrupt.arguments)
    what = render.budget_text(interrupt.arguments, hint=False)
    if edited:
        raise BadArgumentError(
            f"{interrupt.interrupt_id} asks for a new spend limit ({what}), which has "
            f"no input to edit: `{suggest('approve', *command, raw='--spend-limit USD')}`"
        )
    if new_spend_limit is None:
        raise BadArgumentError(
            f"{interrupt.interrupt_id} of session {session_id!r} asks for a new spend "
            f"limit ({what}): approve it with `--spend-limit USD` above the "
            f"{spent:.4f} USD spent, e.g. `"
            f"{suggest('approve', *command, '--spend-limit', _suggested_limit(interrupt))}"
            f"`, or decline it with `{suggest('reject', *command)}`"
        )
    if new_spend_limit <= spent:
        raise BadArgumentError(
            f"bad `--spend-limit {new_spend_limit:g}`: the new limit must be above the "
            f"{spent:.4f} USD the session spent ({what}), e.g. `--spend-limit "
            f"{_suggested_limit(interrupt)}`"
        )


async def resolve(
    target: Target,
    session_id: str,
    interrupt_id: str,
    verdict: Verdict,
    *,
    timeout: float,
) -> int:
    """Answer one approval with `verdict`; the exit code (0 done, 3 recorded for later).

    An edited input is checked by the session's worker first, so an edit is
    never recorded for later. A new spend limit is checked against the
    interrupt's kind and spend first, so a wrong one changes nothing.

    Raises:
        CommandError: no such session or interrupt, or it has ended; a refused
            edit (the call still waits), or an edit that no worker took.
        BadArgumentError: an edit the library refuses before sending it.
        ConflictError: the call was already answered the other way, or
            approved with another edit or spend limit than `verdict`'s, or such
            an answer is recorded for when a worker starts (nothing changed).
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
                return await _already(
                    out, store, session_id, interrupt_id, verdict, known.answer
                )
            if not known.created and await store.get_snapshot(session_id):
                raise await _unknown(conn, store, session_id, interrupt_id, live=False)
        interrupt = await _pending_interrupt(
            conn, store, session_id, interrupt_id, live=seen
        )
        _check_kind(
            interrupt,
            session_id,
            approved=verdict.approved,
            new_spend_limit=verdict.new_spend_limit,
            edited=verdict.edited_input is not None,
        )
        budget = interrupt is not None and render.is_budget(interrupt)
        verb = "approve" if verdict.approved else "reject"
        try:
            async with render.Progress(
                out, f"waiting for the session's worker to take the {verb}"
            ):
                changed = await SessionClient(
                    conn.client, store=store
                ).resolve_interrupt(
                    session_id,
                    interrupt_id=interrupt_id,
                    approved=verdict.approved,
                    rejection_message=verdict.message,
                    timeout=timeout if seen else min(timeout, _UNSEEN_WAIT),
                    resolved_by=verdict.resolved_by,
                    edited_input=verdict.edited_input,
                    new_spend_limit=verdict.new_spend_limit,
                )
        except InvalidEditError as err:
            raise CommandError(
                f"the edit was refused and {interrupt_id} still waits: {err}"
            ) from None
        except InvalidArgumentError as err:
            if err.argument == "new_spend_limit":
                text = str(err).replace("`new_spend_limit`", "`--spend-limit USD`")
                raise BadArgumentError(f"bad `--spend-limit`: {text}") from None
            if err.argument != "edited_input":
                raise
            raise BadArgumentError(f"bad `--edit`: {err}") from None
        except NoWorkerError as err:
            log = await logged(store, session_id, interrupt_id) if store else None
            if log is not None and log.answer is not None:
                # Answered before the worker stopped: what was recorded changes nothing.
                return await _already(
                    out, store, session_id, interrupt_id, verdict, log.answer
                )
            if verdict.edited_input is not None:
                raise CommandError(
                    f"no worker of flow {info.flow_type!r} took the edited approval "
                    f"of {interrupt_id} (session {session_id!r}); an edit needs a "
                    "worker to check it, so nothing was recorded, and it will not "
                    f"apply later: start one (`{suggest('worker', raw='--agent module:flow')}`) "
                    "and approve again"
                ) from None
            if err.superseded is not None:
                raise _superseded(
                    session_id, interrupt_id, verdict, err.superseded
                ) from None
            known = log is not None and log.created
            done = "approval" if verdict.approved else "rejection"
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
                    f"starts{caveat}: `{suggest('worker', raw='--agent module:flow')}` "
                    f"(or `{suggest('dev', raw='--agent module:flow')}`)",
                ),
                soft_wrap=True,
            )
            return EXIT_RECORDED
        except UnknownInterruptError:
            raise await _unknown(conn, store, session_id, interrupt_id) from None
        if not changed:
            answer = await _answer_when_logged(store, session_id, interrupt_id)
            return await _already(out, store, session_id, interrupt_id, verdict, answer)
    finally:
        if store is not None:
            await store.close()
    done = "approved" if verdict.approved else "rejected"
    edit = (
        f" with an edited input: it runs with {render.input_summary(verdict.edited_input)}"
        if verdict.edited_input is not None
        else ""
    )
    if budget and verdict.approved and verdict.new_spend_limit is not None:
        edit = f": the spend limit is now {verdict.new_spend_limit:.4f} USD, and the turn goes on"
    elif budget and not verdict.approved:
        done = "declined"
        edit = ": no new spend limit, so the turn fails (spend limit reached)"
    out.print(
        Text.assemble(
            (
                "✓ " if verdict.approved else "✗ ",
                "green" if verdict.approved else "red",
            ),
            f"{done} {interrupt_id} of session {session_id}{edit}",
        ),
        soft_wrap=True,
    )
    render.say(
        out, f"follow the turn: {suggest('events', session_id, '--follow')}", "dim"
    )
    return 0


def _superseded(
    session_id: str, interrupt_id: str, verdict: Verdict, superseded: str
) -> ConflictError:
    """Refuse an answer no worker took when another one is recorded first (exit 4).

    With no worker, the first recorded answer of an interrupt is the one that
    applies: one of the other way, or an approval with another spend limit,
    was not recorded.
    """
    if verdict.new_spend_limit is not None:
        this = f"this `--spend-limit {verdict.new_spend_limit:g}`"
        then = "; if the session reaches that limit too, answer its next spend-limit approval"
    else:
        this = f"this {'approve' if verdict.approved else 'reject'}"
        then = ""
    return ConflictError(
        f"{interrupt_id} (session {session_id!r}) already has {superseded} recorded, "
        f"which applies first when a worker starts; {this} was not recorded, and "
        f"nothing changed (start a worker: "
        f"`{suggest('worker', raw='--agent module:flow')}`{then})"
    )


async def _already(
    out: Console,
    store: RuntimeStore | None,
    session_id: str,
    interrupt_id: str,
    verdict: Verdict,
    answer: Answer | None,
) -> int:
    """Say how an interrupt was answered before: 0 the same way, else fail (exit 4).

    An approval with `--edit` or `--spend-limit` is the same only when the call
    was approved with that very input or limit; otherwise it was not applied.
    """
    unused = " (this edit was not applied)" if verdict.edited_input is not None else ""
    if answer is None:
        render.say(
            out,
            f"{interrupt_id} was already answered; nothing changed{unused} (how: "
            f"`{suggest('events', session_id)}`)",
            "yellow",
        )
        return 0
    edited = await _edited_input(store, session_id, answer) if answer.edited else None
    way = _way(answer, edited)
    if answer.approved == verdict.approved and not answer.expired:
        not_applied = _not_applied(verdict, answer, edited)
        if not_applied is not None:
            if verdict.edited_input is not None and not answer.budget:
                way = _approved_input(answer, edited)
            raise ConflictError(
                f"{interrupt_id} of session {session_id!r} was already {way}; "
                f"{not_applied} was not applied, and nothing changed (see "
                f"`{suggest('show', session_id)}`)"
            )
    if answer.approved == verdict.approved:
        render.say(out, f"{interrupt_id} was already {way}; nothing changed", "yellow")
        return 0
    verb = "approve" if verdict.approved else "reject"
    raise ConflictError(
        f"{interrupt_id} of session {session_id!r} was already {way}; this {verb} "
        "changed nothing"
    )


def _way(answer: Answer, edited: JsonObject | None) -> str:
    """How an interrupt was answered, as `was already ...` ends."""
    if answer.expired:
        return "expired: no approval before the deadline"
    message = answer.rejection_message
    if not answer.approved and answer.budget:
        return f"declined (no new spend limit{f': {message!r}' if message else ''})"
    if not answer.approved:
        return f"rejected ({message!r})" if message else "rejected"
    if answer.new_spend_limit is not None:
        return f"approved with a new spend limit of {answer.new_spend_limit:.4f} USD"
    if answer.edited:
        shown = f" {render.input_summary(edited)}" if edited is not None else ""
        return f"approved with an edit{shown}"
    return "approved"


def _approved_input(answer: Answer, edited: JsonObject | None) -> str:
    """What an approved call ran with: an earlier edit (`edited`, when read), else its own input."""
    if not answer.edited:
        return "approved with its original input (the model's)"
    shown = f" {render.input_summary(edited)}" if edited is not None else ""
    return f"approved with an earlier edit{shown}"


def _not_applied(
    verdict: Verdict, answer: Answer, edited: JsonObject | None
) -> str | None:
    """What of an approval that came after another did not apply; None: all of it did.

    An edit applied only if the call ran with that very input, and a new spend
    limit only if it is the one the interrupt was approved with.
    """
    if verdict.edited_input is not None and (
        not answer.edited or edited != verdict.edited_input
    ):
        return f"this edit {render.input_summary(verdict.edited_input)}"
    limit = verdict.new_spend_limit
    if limit is not None and answer.new_spend_limit != limit:
        return f"this `--spend-limit {limit:g}`"
    return None


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
        # With the store: a worker that just stopped (still listed) answers no
        # Query, and the projection then says what is pending.
        snapshot = await SessionClient(conn.client, store=store).snapshot(
            session_id, turns=0
        )
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
        + f"{source} (see `{suggest('show', session_id)}`)"
    )


# -- the list -------------------------------------------------------------------


async def recorded_answers(
    client: Client, session_id: str, pending: Sequence[Interrupt]
) -> dict[str, ResolveInterruptInput]:
    """The answers recorded for `pending` interrupts (no worker took them), by ID.

    They wait in the session's history and apply when a worker starts. The
    history is read only when something is pending; a session Temporal does not
    know (or cannot answer for) has none that can be read.
    """
    if not pending:
        return {}
    try:
        recorded = await unapplied_resolutions(client, session_id)
    except RPCError:
        return {}
    return {
        i.interrupt_id: recorded[i.interrupt_id]
        for i in pending
        if i.interrupt_id in recorded
    }


async def _client_or_none(target: Target) -> Client | None:
    """A client of the target's server, or None when none answers."""
    try:
        return (await connect(target)).client
    except (CommandError, DexAgentsError):
        return None


async def pending_approvals(target: Target) -> list[Pending]:
    """Every approval waiting in every session of the store, the longest-waiting first.

    Read from the store's projections, so it works with no server or worker
    running; a long input is read back whole. An approval answered while no
    worker ran is still listed (it has not applied), with the answer recorded
    in its session's history, read only for sessions with approvals waiting
    and when a server answers.
    """
    if not store_exists(target):
        return []
    store = await open_store(target)
    try:
        snapshots = [
            await with_recent_turns(snapshot, store, turns=0)
            for snapshot in map(render.snapshot_from_json, await store.list_snapshots())
            if snapshot.pending_interrupts
        ]
    finally:
        await store.close()
    client = await _client_or_none(target) if snapshots else None
    reads = asyncio.Semaphore(_HISTORY_READS)

    async def pending(snapshot: AgentSnapshot) -> list[Pending]:
        recorded: dict[str, ResolveInterruptInput] = {}
        if client is not None:
            async with reads:
                recorded = await recorded_answers(
                    client, snapshot.session_id, snapshot.pending_interrupts
                )
        return [
            Pending(
                session_id=snapshot.session_id,
                flow_type=snapshot.flow_type,
                interrupt=i,
                recorded=recorded.get(i.interrupt_id),
            )
            for i in snapshot.pending_interrupts
        ]

    waiting = [p for ps in await asyncio.gather(*map(pending, snapshots)) for p in ps]
    return sorted(waiting, key=lambda p: _created(p.interrupt))


_HISTORY_READS = 16
"""Sessions whose history `approvals` reads at once (for their recorded answers)."""


def _created(interrupt: Interrupt) -> datetime:
    return parsed_time(interrupt.created_at) or datetime.min.replace(tzinfo=UTC)


def exit_with(code: int) -> None:
    """End the command with `code` (0 returns normally)."""
    if code:
        raise click.exceptions.Exit(code)
