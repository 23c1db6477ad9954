"""The `dex-agents` command: a thin click group over the session client.

Commands that serve an agent (`dev`, `worker`, `chat`) load it from
`--agent module:flow`. The others (`sessions`, `show`, `approve`, `reject`,
`events`) need no agent: a session's workflow already knows its flow, and the
store keeps a projection of every session for when no worker runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import click
from rich.console import Console
from rich.text import Text
from temporalio.worker import Worker

from .._errors import UnknownInterruptError, UserError
from ..session import EventRecord
from ..stores import RuntimeStore, open_runtime_store, redacted_store
from ..temporal import (
    AgentSessionFlow,
    AgentSnapshot,
    EmbeddedEngine,
    create_worker,
    get_agent_snapshot,
    resolve_interrupt,
    resolve_state_dir,
    with_recent_turns,
)
from ..testing import MockMessagesApi
from . import _render as render
from ._agent_ref import load_flow
from ._chat import run_chat
from ._context import (
    Connection,
    Target,
    connect,
    describe_session,
    no_worker,
    open_store,
    require_session,
    require_worker,
    store_exists,
    store_label,
    store_location,
    target_options,
    unknown_session,
    worker_seen,
)
from ._demo import DemoFailed, run_demo
from ._errors import CommandError, run

_AGENT_HELP = (
    "The agent's session flow: `module:attr` or `path/to/file.py:attr` naming an "
    "`AgentSessionFlow` (or a function returning one)."
)
_JSON_HELP = "Print JSON instead of a view."


_MAIN_HELP = """Durable agent sessions on Temporal: run, chat with, inspect and approve them.

\b
Start here:
  dex-agents dev --agent examples/support_agent.py:flow
  dex-agents chat my-session --agent examples/support_agent.py:flow
"""


@click.group(help=_MAIN_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dex-agents", prog_name="dex-agents")
def main() -> None:
    """The `dex-agents` command group (see `_MAIN_HELP` for its help text)."""


# -- serving --------------------------------------------------------------------


_UNSCRIPTED_REPLY = (
    "(scripted model) I follow `dex-script:` commands only: end your message with "
    '`dex-script: say hello`, `dex-script: call lookup_order {"orderId": "7"}` or '
    '`dex-script: call create_refund {"orderId": "7"}`. Set ANTHROPIC_API_KEY to talk to Claude.'
)


def _use_scripted_model(base_url: str, state_dir: Path) -> None:
    """Point this process's Claude CLIs at the scripted Messages API, offline."""
    os.environ.update(
        {
            "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "scripted-model-key",
            "NO_PROXY": "127.0.0.1,localhost",
            "CLAUDE_CONFIG_DIR": str((state_dir / "claude-config").resolve()),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
    )


@main.command()
@click.option(
    "--agent", "agents", multiple=True, metavar="MODULE:FLOW", help=_AGENT_HELP
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="DEX_AGENTS_STATE_DIR",
    show_envvar=True,
    help="Where the server's database, its log and the runtime store live. "
    "Default: ./.dex-agents",
)
@click.option("--port", type=int, help="Frontend port. Default: the last one, or any.")
@click.option(
    "--namespace", default="default", show_default=True, help="Temporal namespace."
)
@click.option(
    "--store",
    envvar="DEX_AGENTS_STORE",
    show_envvar=True,
    help="Runtime store: a SQLite file, or a postgresql:// URL shared by every "
    "machine. Default: <state dir>/runtime.sqlite.",
)
def dev(
    agents: Sequence[str],
    state_dir: Path | None,
    port: int | None,
    namespace: str,
    store: str | None,
) -> None:
    """Start the embedded Temporal dev server and a worker for the agent.

    Sessions live in the state directory and survive restarts. Other commands
    (in other terminals) find this server through the directory's
    `engine.json`. Ctrl-C stops the worker, then the server.
    """
    flows = [load_flow(ref) for ref in agents]
    run(_dev(flows, list(agents), state_dir, port, namespace, store))


async def _dev(
    flows: list[AgentSessionFlow],
    refs: list[str],
    state_dir: Path | None,
    port: int | None,
    namespace: str,
    store_arg: str | None,
) -> None:
    out = render.console()
    directory = resolve_state_dir(state_dir)
    engine = EmbeddedEngine(state_dir=directory, port=port, namespace=namespace)
    async with render.Progress(out, f"starting the Temporal dev server in {directory}"):
        await engine.start()
    try:
        try:
            store = await open_runtime_store(store_location(store_arg, directory))
        except UserError as e:
            raise CommandError(str(e)) from e
        origin = "started here" if engine.owned else "reused; its owner stops it"
        conn = Connection(
            client=await engine.client(),
            address=engine.address,
            namespace=namespace,
            where=f"dev server pid {engine.pid}, {origin}",
        )
        facts = [
            ("state dir", str(directory)),
            ("server db", str(engine.db_path)),
            ("server log", str(engine.log_path)),
        ]
        async with AsyncExitStack() as model_stack:
            if flows and not os.environ.get("ANTHROPIC_API_KEY"):
                api = await model_stack.enter_async_context(
                    MockMessagesApi(unscripted_reply=_UNSCRIPTED_REPLY)
                )
                _use_scripted_model(api.base_url, directory)
                facts.append(
                    (
                        "model",
                        f"scripted Messages API at {api.base_url} (no ANTHROPIC_API_KEY): "
                        'end a message with `dex-script: call lookup_order {"orderId": "7"}`',
                    )
                )
            try:
                await _serve("dev", conn, flows, store, refs, facts, out)
            finally:
                await store.close()
    finally:
        async with render.Progress(out, "stopping the Temporal dev server"):
            await asyncio.shield(engine.stop())
    out.print(Text("stopped", style="bold"))


@main.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    required=True,
    metavar="MODULE:FLOW",
    help=_AGENT_HELP,
)
@target_options
def worker(agents: Sequence[str], target: Target) -> None:
    """Run a worker for the agent against a cluster or a running dev server.

    Use it to serve the agent from several machines, or next to a `dev` server
    started without `--agent`. Ctrl-C stops it gracefully.
    """
    flows = [load_flow(ref) for ref in agents]
    run(_worker(flows, list(agents), target))


async def _worker(
    flows: list[AgentSessionFlow], refs: list[str], target: Target
) -> None:
    out = render.console()
    async with render.Progress(out, "connecting to Temporal"):
        conn = await connect(target)
    store = await open_store(target, create=True)
    try:
        await _serve("worker", conn, flows, store, refs, [], out)
    finally:
        await store.close()
    out.print(Text("stopped", style="bold"))


async def _serve(
    title: str,
    conn: Connection,
    flows: list[AgentSessionFlow],
    store: RuntimeStore,
    refs: list[str],
    facts: list[tuple[str, str]],
    out: Console,
) -> None:
    """Run one worker per task queue until Ctrl-C or SIGTERM, then stop them."""
    by_queue: dict[str, list[AgentSessionFlow]] = {}
    for flow in flows:
        by_queue.setdefault(flow.task_queue, []).append(flow)
    out.print(Text(f"dex-agents {title}", style="bold"))
    render.print_facts(
        out,
        [
            ("Temporal", f"{conn.address}  namespace {conn.namespace}  ({conn.where})"),
            *facts,
            ("store", store_label(store)),
            *(
                ("worker", f"flow {f.flow_type} on task queue {f.task_queue}")
                for f in flows
            ),
        ],
    )
    if not flows:
        out.print(
            Text(
                "no --agent, so no worker runs here; start one with "
                "`dex-agents worker --agent module:flow`",
                style="yellow",
            ),
            soft_wrap=True,
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with AsyncExitStack() as stack:
            runs: list[asyncio.Task[None]] = []
            for queue, group in by_queue.items():
                w = create_worker(conn.client, group, store=store, task_queue=queue)
                runs.append(asyncio.create_task(w.run()))
                stack.push_async_callback(_shutdown, w, runs[-1])
            hint = (
                f"; chat: dex-agents chat my-session --agent {refs[0]}" if refs else ""
            )
            out.print(
                Text.assemble(
                    ("ready", "bold green"), (f"  Ctrl-C stops{hint}", "dim")
                ),
                soft_wrap=True,
            )
            waiter = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait(
                [waiter, *runs], return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            for task in done:
                if task is not waiter:
                    # A worker that ends by itself failed (e.g. a bad flow).
                    task.result()
                    raise CommandError("a worker stopped unexpectedly")
            out.print(Text("stopping the worker…", style="dim"))
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


async def _shutdown(w: Worker, run_task: asyncio.Task[None]) -> None:
    if not run_task.done():
        await w.shutdown()
    # The run task ends once shutdown is done; its error (if any) was raised above.
    await asyncio.gather(run_task, return_exceptions=True)


# -- reading --------------------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@target_options
def sessions(as_json: bool, target: Target) -> None:
    """List sessions: status, turns, pending approvals, cost (newest first).

    Read from the runtime store's projections, so it works with no server or
    worker running.
    """
    snapshots = run(_list_snapshots(target))
    if as_json:
        render.echo_json([render.session_summary_json(s) for s in snapshots])
        return
    out = render.console()
    if not snapshots:
        out.print(
            Text(f"no sessions yet in {redacted_store(target.store)}", style="dim"),
            soft_wrap=True,
        )
        return
    out.print(render.sessions_table(snapshots))


async def _list_snapshots(target: Target) -> list[AgentSnapshot]:
    if not store_exists(target):
        return []
    store = await open_store(target)
    try:
        return [render.snapshot_from_json(s) for s in await store.list_snapshots()]
    finally:
        await store.close()


@main.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@target_options
def show(session_id: str, as_json: bool, target: Target) -> None:
    """Show a session: status, turns, tool calls and pending approvals.

    Asks the session itself when its worker runs, else shows the store's last
    projection (and says so).
    """
    snapshot, note = run(_load_snapshot(target, session_id))
    if as_json:
        render.echo_json(render.snapshot_json(snapshot))
        return
    out = render.console()
    render.print_snapshot(out, snapshot, note=note)


async def _load_snapshot(target: Target, session_id: str) -> tuple[AgentSnapshot, str]:
    """The live snapshot, else the store's projection with a note saying so."""
    store = await open_store(target) if store_exists(target) else None
    try:
        try:
            conn: Connection | None = await connect(target)
            unreachable = ""
        except CommandError as err:
            conn, unreachable = None, err.format_message()
        info = None
        if conn is None:
            note = "(no Temporal server answered: the store's last projection)"
        else:
            info = await describe_session(conn.client, session_id)
            if info is not None and await worker_seen(conn.client, info.task_queue):
                snapshot = await get_agent_snapshot(
                    conn.client, None, session_id, store=store
                )
                return snapshot, ""
            note = (
                "(not known to Temporal: the store's last projection)"
                if info is None
                else f"(no worker serves flow {info.flow_type!r}: the store's last "
                "projection)"
            )
        projected = await store.get_snapshot(session_id) if store else None
        if projected is None:
            if conn is None:
                raise CommandError(
                    f"session {session_id!r} is not in the store "
                    f"{redacted_store(target.store)!r}, and {unreachable}"
                )
            if info is not None:
                raise no_worker(info.flow_type, info.task_queue)
            raise unknown_session(session_id, conn)
        snapshot = await with_recent_turns(render.snapshot_from_json(projected), store)
        return snapshot, note
    finally:
        if store is not None:
            await store.close()


@main.command()
@click.argument("session_id", metavar="SESSION")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events.")
@click.option(
    "--after", type=int, default=0, show_default=True, help="Start after this cursor."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@target_options
def events(
    session_id: str, follow: bool, after: int, as_json: bool, target: Target
) -> None:
    """Print a session's live events: text, tool calls, approvals, turns.

    Read from the runtime store, so it works with no worker running. With
    `--follow`, waits for new events until Ctrl-C.
    """
    # Ctrl-C is how a follow ends: not a failure.
    with contextlib.suppress(KeyboardInterrupt):
        run(_events(target, session_id, follow=follow, after=after, as_json=as_json))


async def _events(
    target: Target, session_id: str, *, follow: bool, after: int, as_json: bool
) -> None:
    if not store_exists(target):
        raise unknown_session(session_id)
    out = render.console()
    store = await open_store(target)

    def emit(event: EventRecord) -> None:
        if as_json:
            render.echo_json_line(render.event_json(event))
        else:
            out.print(render.event_line(event), soft_wrap=True)

    try:
        batch = await store.read_events(session_id, after=after)
        if not batch and await store.get_snapshot(session_id) is None:
            await _require_known(target, session_id)
        while batch:
            for event in batch:
                emit(event)
                after = event.cursor
            batch = await store.read_events(session_id, after=after)
        if follow:
            async for event in store.follow_events(
                session_id, after=after, poll_interval=0.05
            ):
                emit(event)
    finally:
        await store.close()


async def _require_known(target: Target, session_id: str) -> None:
    """Fail unless Temporal knows the session (it may have no events yet)."""
    try:
        conn = await connect(target)
    except CommandError:
        raise unknown_session(session_id) from None
    if await describe_session(conn.client, session_id) is None:
        raise unknown_session(session_id, conn)


# -- approvals ------------------------------------------------------------------

_TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for the session's worker to take the answer.",
)


@main.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("interrupt_id")
@_TIMEOUT_OPTION
@target_options
def approve(session_id: str, interrupt_id: str, timeout: float, target: Target) -> None:
    """Approve a pending tool call; the tool then runs in the session's worker."""
    run(_resolve(target, session_id, interrupt_id, True, None, timeout))


@main.command()
@click.argument("session_id", metavar="SESSION")
@click.argument("interrupt_id")
@click.option(
    "--message", "-m", help="Why: the agent reads it in place of the tool's result."
)
@_TIMEOUT_OPTION
@target_options
def reject(
    session_id: str,
    interrupt_id: str,
    message: str | None,
    timeout: float,
    target: Target,
) -> None:
    """Reject a pending tool call; it never runs, and the agent is told why."""
    run(_resolve(target, session_id, interrupt_id, False, message, timeout))


async def _resolve(
    target: Target,
    session_id: str,
    interrupt_id: str,
    approved: bool,
    message: str | None,
    timeout: float,
) -> None:
    out = render.console()
    conn = await connect(target)
    info = await require_session(conn, session_id)
    await require_worker(conn.client, info.flow_type, info.task_queue)
    verb = "approve" if approved else "reject"
    try:
        async with (
            render.Progress(out, f"waiting for the session to take the {verb}"),
            asyncio.timeout(timeout),
        ):
            changed = await resolve_interrupt(
                conn.client,
                None,
                session_id,
                interrupt_id=interrupt_id,
                approved=approved,
                rejection_message=message,
            )
    except TimeoutError:
        raise CommandError(
            f"{str(no_worker(info.flow_type, info.task_queue).format_message())} "
            f"(nothing answered within {timeout:g} s; repeating the {verb} is "
            "harmless)"
        ) from None
    except UnknownInterruptError:
        raise await _unknown_interrupt(conn, session_id, interrupt_id) from None
    if not changed:
        out.print(
            Text(
                f"{interrupt_id} was already resolved; nothing changed", style="yellow"
            )
        )
        return
    done = "approved" if approved else "rejected"
    out.print(
        Text.assemble(
            ("✓ " if approved else "✗ ", "green" if approved else "red"),
            f"{done} {interrupt_id} of session {session_id}",
        ),
        soft_wrap=True,
    )
    out.print(
        Text(f"follow the turn: dex-agents events {session_id} --follow", style="dim"),
        soft_wrap=True,
    )


async def _unknown_interrupt(
    conn: Connection, session_id: str, interrupt_id: str
) -> CommandError:
    snapshot = await get_agent_snapshot(conn.client, None, session_id)
    pending = ", ".join(
        f"{i.interrupt_id} ({i.tool_name})" for i in snapshot.pending_interrupts
    )
    return CommandError(
        f"session {session_id!r} has no interrupt {interrupt_id!r}; "
        + (f"pending: {pending}" if pending else "it has no pending approvals")
        + f" (see `dex-agents show {session_id}`)"
    )


# -- demo -----------------------------------------------------------------------


@main.command()
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="DEX_AGENTS_STATE_DIR",
    show_envvar=True,
    help="Where the demo's server, store and ledger live. Default: ./.dex-agents",
)
def demo(state_dir: Path | None) -> None:
    """Show durability end to end: a refund waits through a worker crash, then runs once.

    Runs offline with the scripted Messages API when `ANTHROPIC_API_KEY` is unset.
    Exits 0 when every step happened, non-zero otherwise.
    """
    try:
        code = run(run_demo(str(state_dir) if state_dir else None))
    except DemoFailed as err:
        raise CommandError(f"the demo failed: {err}") from err
    sys.exit(code)


# -- chat -----------------------------------------------------------------------


@main.command()
@click.argument("session_id", metavar="SESSION")
@click.option(
    "--agent",
    metavar="MODULE:FLOW",
    help=_AGENT_HELP + " Needed to start a new session.",
)
@target_options
def chat(session_id: str, agent: str | None, target: Target) -> None:
    """Chat with a session in the terminal, answering its approvals as they come.

    Text streams as the agent writes it, tool calls show as they start and
    finish, and each approval shows the tool, its effect and its exact input.
    Leave with /quit or Ctrl-D; the session keeps running, and coming back
    shows its history and any approval still waiting.
    """
    flow = load_flow(agent) if agent else None
    run_chat(target, session_id, flow)
