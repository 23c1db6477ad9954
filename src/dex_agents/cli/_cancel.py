"""`dex-agents cancel SESSION`: stop the session's running turn, like a Stop button.

The request goes to the session's worker as an Update (`cancel_turn`); it is
never recorded for later, so with no worker it fails at once, saying how to
start one. Once applied, the command waits (up to `--timeout`) for the turn
to stop and prints one line: which turn, why, and what it had streamed.
"""

from __future__ import annotations

import asyncio
import contextlib

import click
from rich.console import Console
from rich.text import Text
from temporalio.service import RPCError

from .._errors import (
    EngineError,
    InvalidArgumentError,
    NoWorkerError,
    SessionEndedError,
)
from ..session._state import TurnSummary
from ..stores import RuntimeStore
from ..temporal import SessionClient
from . import _render as render
from ._complete import complete_session
from ._context import (
    SESSION_ID,
    TEXT,
    Connection,
    Target,
    connect,
    known_session,
    no_worker,
    open_store,
    recorded_name,
    require_worker,
    store_exists,
    target_options,
    timeout_option,
)
from ._errors import BadArgumentError, CommandError, run, suggest

_CANCEL_HELP = """Stop a session's running turn, from any terminal (a Stop button).

A running model call is stopped and its CLI killed within about a second; an
approval the turn waits for is closed as cancelled (its call never runs); a
tool call already running finishes and is recorded first. The turn ends
`cancelled` with the text it had streamed, and the next message starts a new
turn as usual (its model is told the turn was stopped). With no turn running
there is nothing to stop: it says so and exits 0.

\b
Examples:
  dex-agents cancel session-1
  dex-agents cancel session-1 --reason "wrong order" --as ana
"""

_LIVE = ("running", "waiting_for_approval")
"""Statuses of a turn that has not ended."""
_POLL = 0.1
"""Seconds between two looks at the session while its turn stops."""
_OPTIONS = {"reason": "--reason", "cancelled_by": "--as", "timeout": "--timeout"}
"""The library's arguments and the options they are here."""


@click.command(help=_CANCEL_HELP)
@click.argument(
    "session_id", metavar="SESSION", type=SESSION_ID, shell_complete=complete_session
)
@click.option(
    "--reason",
    "-r",
    default="",
    type=TEXT,
    help="Why: kept in the turn's error and its `turn_cancelled` event; the "
    "next turn's model reads it.",
)
@click.option(
    "--as",
    "cancelled_by",
    metavar="NAME",
    type=TEXT,
    help="Who stops it, recorded in the `turn_cancelled` event (`events`, the "
    "web page). [default: your OS user name]",
)
@timeout_option(
    10.0,
    "Seconds to wait for the session's worker to take the cancel (nothing is "
    "cancelled if none does), then for the turn to stop.",
)
@target_options
def cancel(
    session_id: str,
    reason: str,
    cancelled_by: str | None,
    timeout: float,
    target: Target,
) -> None:
    """Stop a session's running turn (see `_CANCEL_HELP` for its help text)."""
    run(
        _cancel(
            target,
            session_id,
            reason=reason,
            cancelled_by=recorded_name(cancelled_by),
            timeout=timeout,
        )
    )


async def _cancel(
    target: Target,
    session_id: str,
    *,
    reason: str,
    cancelled_by: str | None,
    timeout: float,
) -> None:
    out = render.console()
    conn = await connect(target)
    info = await known_session(conn, session_id)
    if not info.running:
        raise _ended(session_id, info.status)
    await require_worker(conn.client, info.flow_type, info.task_queue)
    store = await open_store(target) if store_exists(target) else None
    try:
        turn_id = await _running_turn(store, session_id)
        try:
            async with render.Progress(
                out, "waiting for the session's worker to take the cancel"
            ):
                applied = await SessionClient(conn.client).cancel_turn(
                    session_id,
                    reason=reason,
                    cancelled_by=cancelled_by,
                    timeout=timeout,
                )
        except InvalidArgumentError as err:
            option = _OPTIONS.get(err.argument, err.argument)
            raise BadArgumentError(f"bad `{option}`: {err}") from None
        except SessionEndedError:
            raise _ended(session_id, "COMPLETED") from None
        except NoWorkerError:
            raise CommandError(
                f"{no_worker(info.flow_type, info.task_queue).format_message()} "
                f"(nothing answered within {timeout:g} s; nothing was cancelled)"
            ) from None
        if not applied:
            render.say(out, f"nothing to cancel: session {session_id} runs no turn")
            return
        async with render.Progress(out, "waiting for the turn to stop"):
            turn = await _stopped(conn, store, session_id, turn_id, timeout)
    finally:
        if store is not None:
            await store.close()
    _report(out, session_id, turn_id, turn, reason)


async def _running_turn(store: RuntimeStore | None, session_id: str) -> str | None:
    """The turn the store's projection shows running, if any (read with no RPC)."""
    data = await store.get_snapshot(session_id) if store is not None else None
    if data is None:
        return None
    turns = render.snapshot_from_json(data).turns
    running = [t.turn_id for t in turns if t.status in _LIVE]
    return running[-1] if running else None


async def _stopped(
    conn: Connection,
    store: RuntimeStore | None,
    session_id: str,
    turn_id: str | None,
    timeout: float,
) -> TurnSummary | None:
    """The cancelled turn once it has ended; None if it still runs after `timeout`.

    `turn_id` None (the projection showed none: the turn started as the
    cancel was sent, or there is no store): the turn the session runs, else
    its newest.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: TurnSummary | None = None
    while True:
        with contextlib.suppress(EngineError, RPCError):
            snapshot = await SessionClient(conn.client, store=store).snapshot(
                session_id, turns=5
            )
            if turn_id is None and snapshot.turns:
                live = [t for t in snapshot.turns if t.status in _LIVE]
                turn_id = (live or snapshot.turns)[-1].turn_id
            found = [t for t in snapshot.turns if t.turn_id == turn_id]
            last = found[-1] if found else None
            if last is None and turn_id is not None and store is None:
                # Published and gone from the live snapshot; no store to read it from.
                return TurnSummary(turn_id=turn_id, status="cancelled")
            if last is not None and last.status not in _LIVE:
                return last
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(_POLL)


def _report(
    out: Console,
    session_id: str,
    turn_id: str | None,
    turn: TurnSummary | None,
    reason: str,
) -> None:
    """The one line that says what happened to the turn (and what it had streamed)."""
    name = turn.turn_id if turn is not None else (turn_id or "the turn")
    if turn is None:
        out.print(
            Text.assemble(
                ("■ ", "yellow"),
                f"cancelling {name} of session {session_id}: it stops once the tool "
                f"call in flight finishes and is recorded (follow it: "
                f"`{suggest('events', session_id, '--follow')}`)",
            ),
            soft_wrap=True,
        )
        return
    if turn.status != "cancelled":
        render.say(
            out,
            f"{name} of session {session_id} ended {turn.status} before the "
            "cancel applied; nothing was stopped",
            "yellow",
        )
        return
    why = f" (reason: {reason})" if reason else ""
    out.print(
        Text.assemble(
            ("■ ", "yellow"), f"cancelled {name} of session {session_id}{why}"
        ),
        soft_wrap=True,
    )
    if turn.final_text:
        render.say(out, f"  it had streamed: {render.preview(turn.final_text)}", "dim")


def _ended(session_id: str, status: str) -> CommandError:
    return CommandError(
        f"session {session_id!r} has ended (its workflow is {status}), so no turn "
        f"runs in it; its history: `{suggest('show', session_id)}`"
    )
