"""`dex-agents demo`: durability shown end to end, in one command, offline.

It starts the embedded engine and a worker process for the README's support
agent (`dex_agents.examples.support_agent`, shipped in the package, so the demo
runs from any directory and from an installed wheel), then plays a
conversation: a read tool inline, a refund that waits for approval, the worker
SIGKILLed while it waits and a new one started, the approval, and the refund
running exactly once (the ledger shows one row).
Without `ANTHROPIC_API_KEY` it talks to the project's scripted Messages API on
127.0.0.1 through the real bundled Claude Code CLI, and says so first.

Ctrl-C or SIGTERM stops it at any step: the worker process, the model and the
server it started are stopped, one line says so, and it exits 128 + the
signal's number (130, 143), as a shell reports a command a signal ended.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path

import click
from rich.console import Console

from .._scripted import MockMessagesApi, scripted_model_env
from ..session._events import ModelRetryEvent
from ..stores import SQLiteRuntimeStore
from ..temporal import EmbeddedEngine, SessionClient
from ..temporal._engine import resolve_state_dir
from ..temporal._worker_process import WorkerProcess, WorkerProcessConfig
from ._agent_ref import load_flow
from ._errors import CommandError, prog

EXAMPLE_FLOW = "dex_agents.examples.support_agent:flow"

# (what the user says, the script the scripted model follows for it)
CONVERSATION = [
    (
        "Order 7 arrived broken. Can you check it?",
        'call lookup_order {"orderId": "7"}',
    ),
    ("Please refund order 7.", 'call create_refund {"orderId": "7"}'),
    ("Thanks!", "say you are welcome, the refund is on its way"),
]


class DemoFailed(CommandError):
    """A step of the demo did not happen as it should (exit code 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"the demo failed: {message}")


_STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _prompt(text: str, script: str, scripted: bool) -> str:
    return f"{text}\n\ndex-script: {script}" if scripted else text


def _refund_rows(db: Path) -> list[tuple[str, str]]:
    if not db.exists():
        return []
    with sqlite3.connect(db) as conn:
        try:
            return list(conn.execute("SELECT order_id, idempotency_key FROM refunds"))
        except sqlite3.OperationalError:
            return []


async def _stream_turn(
    sessions: SessionClient, console: Console, session_id: str, cursor: int
) -> int:
    """Print the turn's live text and tool calls until it is idle; return the new cursor."""
    idle = asyncio.create_task(sessions.wait_for_idle(session_id))
    try:
        return await _follow(sessions, console, session_id, cursor, idle)
    finally:
        # Stopped (Ctrl-C) mid-turn: the wait must not outlive the engine and
        # fail unseen ("Task exception was never retrieved").
        idle.cancel()
        await asyncio.gather(idle, return_exceptions=True)


async def _follow(
    sessions: SessionClient,
    console: Console,
    session_id: str,
    cursor: int,
    idle: asyncio.Task[object],
) -> int:
    """`_stream_turn`'s loop: print events until `idle` is done; the new cursor."""
    streamed = False
    while True:
        for event in await sessions.events(session_id, after=cursor):
            cursor = event.cursor
            match event.type:
                case "text_delta":
                    console.print(
                        str(event.data.get("text", "")), end="", style="green"
                    )
                    streamed = True
                case "tool_call_started":
                    console.print(
                        f"\n  [cyan]↳ {event.data.get('tool_name')}"
                        f" {event.data.get('arguments')}[/cyan]"
                    )
                case "tool_call_finished":
                    console.print(
                        f"  [cyan]✓ {event.data.get('tool_name')}: "
                        f"{str(event.data.get('output', ''))[:120]}[/cyan]"
                    )
                case "model_retry":
                    retry = event.payload()
                    if isinstance(retry, ModelRetryEvent):
                        console.print(
                            f"  ↻ {retry.text()}", style="yellow", markup=False
                        )
                case _:
                    pass
        if idle.done():
            break
        await asyncio.sleep(0.02)
    if streamed:
        console.print()
    await idle
    return cursor


async def _start_worker(worker: WorkerProcess) -> None:
    """Start a worker process; a stop (Ctrl-C) meanwhile waits for it to be started.

    `start` runs in a thread that a cancellation cannot stop: returning before it
    ends would leave a worker that nothing stops.
    """
    started = asyncio.ensure_future(asyncio.to_thread(worker.start))
    try:
        await asyncio.shield(started)
    except asyncio.CancelledError:
        await asyncio.gather(started, return_exceptions=True)
        raise


async def run_demo(state_dir: str | None = None, console: Console | None = None) -> int:
    """Play the demo; 0 when every step happened.

    Raises:
        DemoFailed: a step did not happen as it should.
        click.exceptions.Exit: Ctrl-C or SIGTERM stopped it (exit 128 + the
            signal's number), after everything it started was stopped.
    """
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stopped_by: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        # The first signal stops the demo; more would only cut its cleanup short.
        if not stopped_by:
            stopped_by.append(sig)
            main.cancel()

    for sig in _STOPPING_SIGNALS:
        loop.add_signal_handler(sig, stop, sig)
    try:
        return await _play(state_dir, console)
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        sig = stopped_by[0]
        how = "Ctrl-C" if sig == signal.SIGINT else sig.name
        click.echo(
            f"stopped ({how}) before the demo finished; `{prog()} demo` plays it "
            "again from the start",
            err=True,
        )
        raise click.exceptions.Exit(128 + sig.value) from None
    finally:
        for sig in _STOPPING_SIGNALS:
            loop.remove_signal_handler(sig)


async def _play(state_dir: str | None, console: Console | None) -> int:
    """`run_demo`'s steps, every process it starts stopped when it ends."""
    # soft_wrap: piped (as `make demo` in CI) its lines are not cut at 80 columns.
    console = console or Console(highlight=False, soft_wrap=True)
    scripted = not os.environ.get("ANTHROPIC_API_KEY")
    if scripted:
        console.print(
            "[bold]No ANTHROPIC_API_KEY: using the project's scripted Messages API on "
            "127.0.0.1, through the real bundled Claude Code CLI.[/bold]"
        )
    else:
        console.print("[bold]ANTHROPIC_API_KEY is set: talking to Claude.[/bold]")
    state = resolve_state_dir(state_dir)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    ledger = state / f"demo-{run_id}-refunds.sqlite"
    env = dict(os.environ)
    env.update(
        {
            "DEX_AGENTS_EXAMPLE_DB": str(ledger.resolve()),
            "DEX_AGENTS_EXAMPLE_WORKDIR": str((state / "agents").resolve()),
        }
    )
    async with AsyncExitStack() as stack:
        with console.status("starting the embedded Temporal dev server…"):
            engine = await stack.enter_async_context(EmbeddedEngine(state_dir=state))
        console.print(
            f"engine: Temporal dev server at {engine.address}, data in {state}/"
        )
        if scripted:
            api = await stack.enter_async_context(MockMessagesApi())
            env.update(scripted_model_env(api.base_url, state / "claude-config"))
            console.print(f"model: scripted Messages API at {api.base_url}")
        store_path = state / "runtime.sqlite"
        store = SQLiteRuntimeStore(store_path)
        stack.push_async_callback(store.close)
        flow_ref = EXAMPLE_FLOW
        # A queue of its own: a `dex-agents dev` serving the same agent on this
        # server would otherwise take the demo's turns and run its refund.
        flow = replace(load_flow(flow_ref), task_queue=f"dex-agents-demo-{run_id}")
        worker = WorkerProcess(
            WorkerProcessConfig(
                address=engine.address,
                namespace=engine.namespace,
                store_path=str(store_path),
                flow_ref=flow_ref,
                task_queue=flow.task_queue,
            ),
            state,
            env=env,
        )
        stack.callback(worker.__exit__, None, None, None)
        with console.status("starting a worker process…"):
            await _start_worker(worker)
        assert worker.process is not None
        console.print(f"worker: pid {worker.process.pid}, agent {flow_ref}\n")
        client = await engine.client()
        sessions = SessionClient(client, flow, store)
        session_id = f"demo-{run_id}"
        cursor = 0

        first, script = CONVERSATION[0]
        console.print(f"[bold]you:[/bold] {first}")
        await sessions.start(
            session_id, initial_message=_prompt(first, script, scripted)
        )
        cursor = await _stream_turn(sessions, console, session_id, cursor)

        text, script = CONVERSATION[1]
        console.print(f"\n[bold]you:[/bold] {text}")
        await sessions.send_user_message(session_id, _prompt(text, script, scripted))
        cursor = await _stream_turn(sessions, console, session_id, cursor)
        snapshot = await sessions.snapshot(session_id)
        if not snapshot.pending_interrupts:
            raise DemoFailed("the refund did not wait for approval")
        interrupt = snapshot.pending_interrupts[0]
        console.print(
            f"\n[yellow]⏸ approval needed: {interrupt.tool_name} ({interrupt.effect}) "
            f"{interrupt.arguments}[/yellow]"
        )
        console.print(f"refunds in the ledger: {len(_refund_rows(ledger))}")

        old_pid = worker.process.pid
        worker.kill()
        console.print(
            f"\n[red]✗ worker pid {old_pid} killed (SIGKILL) while the refund waits[/red]"
        )
        with console.status("starting a new worker process…"):
            await _start_worker(worker)
        console.print(f"worker: pid {worker.process.pid} started")
        snapshot = await sessions.snapshot(session_id)
        still = [i.interrupt_id for i in snapshot.pending_interrupts]
        if still != [interrupt.interrupt_id]:
            raise DemoFailed(f"the approval was lost after the crash: {still}")
        console.print(f"the approval is still waiting: {interrupt.interrupt_id}")

        console.print("\n[bold]approving the refund[/bold]")
        await sessions.resolve_interrupt(
            session_id, interrupt.interrupt_id, approved=True
        )
        cursor = await _stream_turn(sessions, console, session_id, cursor)

        text, script = CONVERSATION[2]
        console.print(f"\n[bold]you:[/bold] {text}")
        await sessions.send_user_message(session_id, _prompt(text, script, scripted))
        cursor = await _stream_turn(sessions, console, session_id, cursor)

        rows = _refund_rows(ledger)
        console.print(f"\nrefunds in the ledger: {len(rows)} {rows}")
        final = await sessions.snapshot(session_id)
        failed = [t.turn_id for t in final.turns if t.status != "completed"]
        if failed:
            raise DemoFailed(f"turns did not complete: {failed}")
        if len(rows) != 1:
            raise DemoFailed(f"expected exactly one refund, the ledger has {len(rows)}")
        console.print(
            f"[bold green]✓ the refund ran exactly once, across a worker crash "
            f"({len(final.turns)} turns, {final.usage.model_calls} model calls).[/bold green]"
        )
        # Ended, not left running on a queue only this demo's worker polls.
        await sessions.end(session_id, reason="the demo is over")
        console.print(f"see it again: {prog()} show {session_id} --state-dir {state}")
    return 0
