"""`dex-agents end SESSION`: end a session; its workflow completes, its history stays.

Like returning from a Temporal workflow, never like terminating one: an idle
session ends at once; one with work in progress (a running turn, queued
messages, approvals waiting) is refused unless `--force`, which rejects its
approvals ("the session ended"), drops its queued messages and lets a running
turn finish the Step it is in, then stops it. `show`, `events` and `sessions`
still read it afterwards; messages and approvals to it are refused.
"""

from __future__ import annotations

import click
from rich.text import Text

from .._errors import NoWorkerError, SessionBusyError
from ..temporal import SessionClient
from . import _render as render
from ._context import (
    SESSION_ID,
    TEXT,
    Target,
    connect,
    known_session,
    no_worker,
    require_worker,
    target_options,
    timeout_option,
)
from ._errors import CommandError, run, suggest

_END_HELP = """End a session: its workflow completes, and its history stays readable.

An idle session ends at once. One with work in progress (a running turn, queued
messages, approvals waiting) is refused unless --force: then its approvals are
rejected ("the session ended"), its queued messages are dropped, and a running
turn stops after the step it is in (a tool call already running finishes;
nothing runs after it). `show`, `events` and `sessions` still read the session;
it takes no more messages.

\b
Examples:
  dex-agents end session-1
  dex-agents end session-1 --force --reason "customer left"
"""


@click.command(help=_END_HELP)
@click.argument("session_id", metavar="SESSION", type=SESSION_ID)
@click.option(
    "--reason",
    "-r",
    default="",
    type=TEXT,
    help="Why: kept in the `session_ended` event.",
)
@click.option(
    "--force",
    is_flag=True,
    help="End it even with work in progress: reject its pending approvals, drop "
    "its queued messages, and stop a running turn after its current step.",
)
@timeout_option(30.0, "Seconds to wait for the session's worker to take the end.")
@target_options
def end(
    session_id: str, reason: str, force: bool, timeout: float, target: Target
) -> None:
    """End a session (see `_END_HELP` for its help text)."""
    run(_end(target, session_id, reason=reason, force=force, timeout=timeout))


async def _end(
    target: Target, session_id: str, *, reason: str, force: bool, timeout: float
) -> None:
    out = render.console()
    conn = await connect(target)
    info = await known_session(conn, session_id)
    if not info.running:
        render.say(
            out,
            f"session {session_id} had already ended (its workflow is "
            f"{info.status}); nothing changed",
            "yellow",
        )
        return
    await require_worker(conn.client, info.flow_type, info.task_queue)
    sessions = SessionClient(conn.client)
    before = await sessions.snapshot(session_id, turns=0)
    try:
        async with render.Progress(out, "waiting for the session to end"):
            ended = await sessions.end(
                session_id, reason=reason, force=force, timeout=timeout
            )
    except SessionBusyError as err:
        busy = str(err).split(";", 1)[0]
        raise CommandError(
            f"{busy}; wait until it is idle (and answer its approvals), or end it "
            "anyway with `--force`, which rejects its approvals, drops its queued "
            "messages and stops a running turn after its current step"
        ) from None
    except NoWorkerError:
        raise CommandError(
            f"{no_worker(info.flow_type, info.task_queue).format_message()} "
            f"(nothing answered within {timeout:g} s; nothing was ended)"
        ) from None
    if not ended:
        render.say(
            out, f"session {session_id} had already ended; nothing changed", "yellow"
        )
        return
    out.print(
        Text.assemble(("✓ ", "green"), f"ended session {session_id}"),
        soft_wrap=True,
    )
    for interrupt in before.pending_interrupts:
        render.say(
            out,
            f"  rejected the pending approval {interrupt.interrupt_id} "
            f"({interrupt.tool_name})",
            "yellow",
        )
    render.say(out, f"its history: {suggest('show', session_id)}", "dim")
