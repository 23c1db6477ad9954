"""The `dex-agents` command: a thin click group over the session client.

Commands that serve an agent (`dev`, `worker`, `chat`) load it from
`--agent module:flow`. The others (`sessions`, `show`, `events`, `approvals`,
`approve`, `reject`, `cancel`, `end`) need no agent: a session's workflow already knows
its flow, and the store keeps a projection of every session for when no worker
runs. Every command's `--help` ends with examples, and session and interrupt
IDs complete in the shell (`_complete`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import socket
import sqlite3
import sys
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text
from temporalio.worker import Worker

from .._errors import DexAgentsError, EngineError, UserError
from .._scripted import UNSCRIPTED_REPLY, MockMessagesApi, scripted_model_env
from ..session._events import EventRecord
from ..session._json import JsonObject
from ..stores import RuntimeStore
from ..stores._open import open_runtime_store, redacted_store
from ..temporal import EmbeddedEngine, SessionClient, create_worker
from ..temporal._client import with_recent_turns
from ..temporal._engine import STATE_DIR_ENV, resolve_state_dir
from ..temporal._flow import AgentSessionFlow
from ..temporal._models import ResolveInterruptInput
from ..temporal._snapshot import AgentSnapshot
from . import _render as render
from ._agent_ref import load_flow
from ._approvals import (
    Verdict,
    edited_input_option,
    exit_with,
    pending_approvals,
    recorded_answers,
    resolve,
    spend_limit_option,
)
from ._cancel import cancel
from ._chat import run_chat
from ._complete import complete_interrupt, complete_session
from ._context import (
    CURSOR,
    INTERRUPT_ID,
    SESSION_ID,
    TEXT,
    Connection,
    Outage,
    Target,
    connect,
    describe_session,
    dev_restart_hint,
    no_worker,
    open_store,
    quiet_temporal_logs,
    recorded_name,
    remember_where,
    require_namespace,
    state_dir_option,
    store_error,
    store_exists,
    store_label,
    store_location,
    target_options,
    timeout_option,
    unknown_session,
    usage_errors,
    worker_seen,
)
from ._demo import run_demo
from ._dev_model import dev_model, shared_with_workers
from ._doctor import doctor
from ._doctor._credentials import credentials_warning
from ._end import end
from ._errors import (
    BadArgumentError,
    CommandError,
    command_words,
    release_engine_runtime,
    run,
    suggest,
)
from ._logs import library_log_lines
from ._views import ShownCall, turn_calls

_AGENT_HELP = (
    "The agent's session flow: `module:attr` or `path/to/file.py:attr` naming an "
    "`AgentSessionFlow` (or a function returning one)."
)
_JSON_HELP = "Print JSON instead of a view."

_Row = TypeVar("_Row")


def _examples(*lines: str) -> str:
    """A command's `--help` epilog: examples, kept as written, not rewrapped."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines) + "\n"


_MAIN_HELP = """Durable agent sessions on Temporal: run, chat with, inspect and approve them.

\b
Start here (the example agent ships with the package; without
ANTHROPIC_API_KEY a scripted model answers, offline):
  dex-agents demo
  dex-agents dev --agent dex_agents.examples.support_agent:flow
  dex-agents chat my-session --agent dex_agents.examples.support_agent:flow
"""


class _Main(click.Group):
    """The command group; every command ends by releasing Temporal's threads."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command, then stop Temporal's runtime before the interpreter exits."""
        try:
            return super().main(*args, **kwargs)
        finally:
            release_engine_runtime()


@click.group(
    cls=_Main,
    help=_MAIN_HELP,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="dex-agents", prog_name="dex-agents")
def main() -> None:
    """The `dex-agents` command group (see `_MAIN_HELP` for its help text)."""


# -- serving --------------------------------------------------------------------


_UNSCRIPTED_REPLY = UNSCRIPTED_REPLY


def _use_scripted_model(base_url: str, state_dir: Path) -> None:
    """Point this process's Claude CLIs at the scripted Messages API, offline.

    The same variables as `dex_agents.testing.scripted_model()` sets for code.
    """
    os.environ.update(scripted_model_env(base_url, state_dir / "claude-config"))


@main.command()
@click.option(
    "--agent", "agents", multiple=True, metavar="MODULE:FLOW", help=_AGENT_HELP
)
@state_dir_option(
    "Where the server's database, its log and the runtime store live. "
    "Default: ./.dex-agents"
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="Frontend port; remembered, so later starts use it too. Default: the "
    "state directory's port, picked on its first start.",
)
@click.option(
    "--ui-port",
    type=click.IntRange(1, 65535),
    help="Port of Temporal's Web UI. Default: the remembered one, else --port + 1000.",
)
@click.option("--no-ui", is_flag=True, help="Run the server without the Web UI.")
@click.option(
    "--web-port",
    type=click.IntRange(0, 65535),
    help="Port of the approval inbox and HTTP API (127.0.0.1 only, no token). "
    "Default: --port + 2000, else any free port.",
)
@click.option("--no-web", is_flag=True, help="Do not serve the inbox and HTTP API.")
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
    ui_port: int | None,
    no_ui: bool,
    web_port: int | None,
    no_web: bool,
    namespace: str,
    store: str | None,
) -> None:
    """Start the embedded Temporal dev server and a worker for the agent.

    Sessions live in the state directory and survive restarts; so does the
    server's address (and its Web UI's, printed in the banner). Other commands
    (in other terminals) find this server through the directory's
    `engine.json`. A `dev` started while another runs on the same directory
    shares its server and takes it over when that one stops; a server that
    dies is started again. Ctrl-C stops the worker, then the server.
    """
    if no_ui and ui_port is not None:
        raise click.UsageError("--ui-port and --no-ui exclude each other; pass one")
    with usage_errors():
        directory = resolve_state_dir(state_dir, create=False)
        store_location(store, directory)  # a bad `--store` is refused before starting
        remember_where(
            directory=directory, store=store, address=None, namespace=namespace
        )
    flows = [load_flow(ref) for ref in agents]
    if no_web and web_port is not None:
        raise click.UsageError("--web-port and --no-web exclude each other; pass one")
    web = None if no_web else WebSettings(port=web_port)
    run(
        _dev(
            flows, list(agents), state_dir, port, namespace, store, ui_port, no_ui, web
        )
    )


@dataclass(frozen=True)
class WebSettings:
    """`dev`'s inbox and HTTP API: on 127.0.0.1, requests from this machine need no token."""

    port: int | None


async def _serve_web(
    stack: AsyncExitStack,
    web: WebSettings,
    engine_port: int,
    conn: Connection,
    flows: list[AgentSessionFlow],
    store: RuntimeStore,
) -> str:
    """Start the web app for the block of `stack`; its URL, or why it is off."""
    try:
        from ..web import create_app
        from ..web._server import serving
        from ..web._tokens import load_tokens
        from ._serve import listen_error
    except ImportError:
        return "off: install the `web` extra (pip install 'dex-agents[web]')"
    app = create_app(
        conn.client,
        flows,
        store,
        tokens=load_tokens(env=os.environ),
        allow_anonymous_loopback=True,
    )
    port = web.port
    if port is None:
        derived = engine_port + 2000
        port = derived if derived <= 65535 and _port_free(derived) else 0
    taken = listen_error("127.0.0.1", port, "--web-port")
    if taken is not None:
        raise taken
    try:
        running = await stack.enter_async_context(
            serving(app, host="127.0.0.1", port=port)
        )
    except RuntimeError as err:
        raise CommandError(
            f"cannot serve the inbox on 127.0.0.1:{port}: {err}; pass another "
            "`--web-port`, or `--no-web`"
        ) from err
    return f"{running.url}/inbox  (API: {running.url}/api/openapi.json)"


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def _dev(
    flows: list[AgentSessionFlow],
    refs: list[str],
    state_dir: Path | None,
    port: int | None,
    namespace: str,
    store_arg: str | None,
    ui_port: int | None = None,
    no_ui: bool = False,
    web: WebSettings | None = None,
) -> None:
    out = render.console()
    directory = resolve_state_dir(state_dir)
    # The agent's code in this process sees the run's state directory as a plain
    # `EmbeddedEngine()` would find it (the shipped example keeps its data there).
    os.environ[STATE_DIR_ENV] = str(directory)
    quiet_temporal_logs()
    engine = EmbeddedEngine(
        state_dir=directory,
        port=port,
        namespace=namespace,
        ui=not no_ui,
        ui_port=ui_port,
    )
    async with render.Progress(out, f"starting the Temporal dev server in {directory}"):
        try:
            await engine.start()
        except EngineError as err:
            raise _in_dev_words(err) from err
    try:
        location = store_location(store_arg, directory)
        try:
            store = await open_runtime_store(location)
        except UserError as e:
            raise CommandError(str(e)) from e
        except (OSError, sqlite3.Error) as e:
            raise store_error(e, location) from e
        origin = (
            "started here"
            if engine.owned
            else "reused; taken over here if its owner stops"
        )
        conn = Connection(
            client=await engine.client(),
            address=engine.address,
            namespace=namespace,
            where=f"dev server pid {engine.pid}, {origin}",
            restart_hint=dev_restart_hint(),
        )
        if engine.ui_url is not None:
            ui = f"{engine.ui_url}/namespaces/{namespace}/workflows"
        elif no_ui:
            ui = "off (--no-ui)"
        else:
            ui = (
                f"off: the reused server (pid {engine.pid}) runs without it; it "
                "comes on when this dev starts the server"
            )
        facts = [
            ("Web UI", ui),
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
                model_stack.enter_context(shared_with_workers(directory, api.base_url))
                facts.append(
                    (
                        "model",
                        f"scripted Messages API at {api.base_url} (no ANTHROPIC_API_KEY): "
                        'end a message with `dex-script: call lookup_order {"orderId": "7"}`',
                    )
                )
            web_stack = AsyncExitStack()
            try:
                if web is not None:
                    inbox = await _serve_web(
                        web_stack, web, engine.port, conn, flows, store
                    )
                    facts.insert(1, ("inbox", inbox))
                keep = functools.partial(_keep_server, engine, out)
                await _serve("dev", conn, flows, store, refs, facts, out, watch=keep)
            finally:
                # The web app reads the store: it stops first.
                await web_stack.aclose()
                await store.close()
    finally:
        async with render.Progress(out, "stopping the Temporal dev server"):
            await asyncio.shield(engine.stop())
    out.print(Text("stopped", style="bold"))


def _in_dev_words(err: EngineError) -> CommandError:
    """An engine error with `dev`'s own options for the Web UI's settings.

    `CommandError` already turns `port=` and the other shared keywords into
    options; the UI's are `dev`'s alone.
    """
    message = str(err)
    for library, option in (("`ui_port=`", "`--ui-port`"), ("`ui=False`", "`--no-ui`")):
        message = message.replace(library, option)
    return CommandError(message)


_WATCH_INTERVAL = 0.5
"""How often `dev` looks at its server's process (a /proc read, no RPC)."""


async def _keep_server(engine: EmbeddedEngine, out: Console) -> None:
    """Start the dev server again whenever it goes away, on the same address.

    It goes away when it is killed, or when the other `dev` whose server this
    one reused stops: then this `dev` takes over. Its worker reconnects on its
    own. Ends only by raising, when the server cannot be started again.
    """
    while True:
        await asyncio.sleep(_WATCH_INTERVAL)
        if engine.running:
            continue
        address, pid = engine.address, engine.pid
        render.say(
            out,
            f"the Temporal server on {address} (pid {pid}) is gone; starting it "
            "again on the same address",
            "yellow",
        )
        try:
            await engine.ensure_running()
        except EngineError as err:
            raise _in_dev_words(err) from err
        how = "started here" if engine.owned else "started by another dev, reused"
        render.say(
            out,
            f"the Temporal server on {engine.address} is back (pid {engine.pid}, "
            f"{how})",
            "green",
        )


async def _watch_connection(conn: Connection, out: Console) -> None:
    """Say once when the Temporal server goes away, and once when it is back.

    The worker itself retries quietly meanwhile and picks up where it was.
    """
    outage = Outage(
        conn,
        lambda line: out.print(line, soft_wrap=True),
        meanwhile="the worker waits and reconnects",
    )
    while True:
        await asyncio.sleep(_WATCH_INTERVAL if outage.lost else 2.0)
        await outage.check()


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
    started without `--agent`. Without ANTHROPIC_API_KEY, on the state directory
    of a `dev` that serves the scripted Messages API, it uses that model too.
    Ctrl-C stops it gracefully.
    """
    flows = [load_flow(ref) for ref in agents]
    run(_worker(flows, list(agents), target))


async def _worker(
    flows: list[AgentSessionFlow], refs: list[str], target: Target
) -> None:
    out = render.console()
    facts: list[tuple[str, str]] = []
    shared = (
        dev_model(target.state_dir)
        if target.address is None and not os.environ.get("ANTHROPIC_API_KEY")
        else None
    )
    if shared is not None:
        _use_scripted_model(shared.base_url, target.state_dir)
        facts.append(
            (
                "model",
                f"the scripted Messages API at {shared.base_url}, of the `dev` "
                f"(pid {shared.pid}) on this state dir (no ANTHROPIC_API_KEY)",
            )
        )
    warnings = [w for w in (await credentials_warning(), _local_store(target)) if w]
    async with render.Progress(out, "connecting to Temporal"):
        conn = await connect(target)
        await require_namespace(conn)
    store = await open_store(target, create=True)
    try:
        watch = functools.partial(_watch_connection, conn, out)
        await _serve(
            "worker",
            conn,
            flows,
            store,
            refs,
            facts,
            out,
            watch=watch,
            warnings=warnings,
        )
    finally:
        await store.close()
    out.print(Text("stopped", style="bold"))


def _local_store(target: Target) -> str | None:
    """A warning for a worker of a cluster on the state dir's SQLite store by default.

    Sessions and their clients must share the store their workers write; a
    worker that got no `--store` (or a misspelled DEX_AGENTS_STORE) wrote
    turns where no client of the cluster looked, and its approvals went unseen.
    """
    if target.address is None or target.store_given:
        return None
    return (
        f"warning: runtime store: no `--store` given, so this machine's "
        f"{target.store}; every worker and client of these sessions must use the "
        "same store — fix: pass `--store` (DEX_AGENTS_STORE) the one they use, "
        "`postgresql://…` for several machines"
    )


async def _serve(
    title: str,
    conn: Connection,
    flows: list[AgentSessionFlow],
    store: RuntimeStore,
    refs: list[str],
    facts: list[tuple[str, str]],
    out: Console,
    *,
    watch: Callable[[], Coroutine[Any, Any, None]],
    warnings: Sequence[str] = (),
) -> None:
    """Run one worker per task queue until Ctrl-C or SIGTERM, then stop them.

    `watch` runs alongside (it keeps the server, or reports outages) and is
    stopped first; if it raises, serving ends with its error. `warnings` are
    lines printed below the banner (each one line, in yellow).
    """
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
    for warning in warnings:
        render.say(out, warning, "yellow")
    if not flows:
        render.say(
            out,
            command_words(
                "no --agent, so no worker runs here; start one with "
                f"`{suggest('worker', raw='--agent module:flow')}`"
            ),
            "yellow",
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with AsyncExitStack() as stack:
            stack.enter_context(library_log_lines(out))
            runs: list[asyncio.Task[None]] = []
            for queue, group in by_queue.items():
                w = create_worker(conn.client, group, store=store, task_queue=queue)
                runs.append(asyncio.create_task(w.run()))
                stack.push_async_callback(_shutdown, w, runs[-1])
            hint = (
                f"; chat: {suggest('chat', 'my-session', '--agent', refs[0])}"
                if refs
                else ""
            )
            out.print(
                Text.assemble(
                    ("ready", "bold green"), (f"  Ctrl-C stops{hint}", "dim")
                ),
                soft_wrap=True,
            )
            waiter = asyncio.create_task(stop.wait())
            watcher = asyncio.create_task(watch())
            try:
                done, _ = await asyncio.wait(
                    [waiter, watcher, *runs], return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                waiter.cancel()
                watcher.cancel()
                await asyncio.gather(watcher, return_exceptions=True)
            if watcher in done:
                watcher.result()  # it ends only by raising
            for task in done:
                if task is not waiter and task is not watcher:
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


@main.command(
    epilog=_examples(
        "dex-agents sessions",
        'dex-agents sessions --json | jq -r \'.[] | select(.status == "idle") '
        "| .session_id'",
        "dex-agents sessions --state-dir /srv/agents/.dex-agents",
    )
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@target_options
def sessions(as_json: bool, target: Target) -> None:
    """List sessions: status, turns, pending approvals, cost (newest first).

    The status is idle, running, waiting for approval, budget reached (the
    spend limit: `approve --spend-limit`), or ended (by `dex-agents end`). Read from the runtime store's projections, so it works
    with no server or worker running.
    """
    snapshots = run(_list_snapshots(target))
    _print_listing(
        snapshots,
        as_json=as_json,
        json_of=render.session_summary_json,
        table=render.sessions_table,
        none=_no_sessions(target),
    )


def _no_sessions(target: Target) -> str:
    """What `sessions` says when the store it read has none, and where else to look.

    The listing reads the runtime store only (it works with no server), so an
    `--address` alone still reads this directory's store: say so, since the
    sessions of a cluster's workers are in the store those workers were given.
    """
    where = redacted_store(target.store)
    if target.address is not None:
        return (
            f"no sessions yet in {where}: `sessions` reads the runtime store, not the "
            f"Temporal server at {target.address}; pass the `--store` its workers use"
        )
    return (
        f"no sessions yet in {where} (sessions of another directory: "
        "`--state-dir DIR`, or `--store`)"
    )


def _print_listing(
    rows: Sequence[_Row],
    *,
    as_json: bool,
    json_of: Callable[[_Row], JsonObject],
    table: Callable[[Sequence[_Row]], Table],
    none: str,
) -> Console | None:
    """Print a listing command's `rows`: as JSON, as a table, or `none` (dim).

    Returns the console when it printed a table, for what the command adds below.
    """
    if as_json:
        render.echo_json([json_of(row) for row in rows])
        return None
    out = render.console()
    if not rows:
        render.say(out, none, "dim")
        return None
    out.print(table(rows))
    return out


async def _list_snapshots(target: Target) -> list[AgentSnapshot]:
    if not store_exists(target):
        return []
    store = await open_store(target)
    try:
        return [render.snapshot_from_json(s) for s in await store.list_snapshots()]
    finally:
        await store.close()


@main.command(
    epilog=_examples(
        "dex-agents show session-1",
        "dex-agents show session-1 --json | jq '.pending_interrupts'",
    )
)
@click.argument(
    "session_id", metavar="SESSION", type=SESSION_ID, shell_complete=complete_session
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@target_options
def show(session_id: str, as_json: bool, target: Target) -> None:
    """Show a session: status, turns, tool calls and pending approvals.

    Asks the session itself when its worker runs, else shows the store's last
    projection (and says so), with the answers recorded for its approvals
    while no worker ran (they apply when one starts).
    """
    shown = run(_load_snapshot(target, session_id, calls=not as_json))
    if as_json:
        render.echo_json(render.shown_snapshot_json(shown.snapshot, shown.recorded))
        return
    out = render.console()
    render.print_snapshot(
        out, shown.snapshot, note=shown.note, calls=shown.calls, recorded=shown.recorded
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Shown:
    """What `show` prints of a session."""

    snapshot: AgentSnapshot
    note: str
    """Where the snapshot came from, when not from the session itself."""
    calls: dict[str, list[ShownCall]]
    recorded: dict[str, ResolveInterruptInput]
    """Answers recorded for pending interrupts while no worker ran, by ID."""


async def _load_snapshot(target: Target, session_id: str, *, calls: bool) -> _Shown:
    """The snapshot with a note on where it came from, and its turns' tool calls.

    `calls`: read every tool call of the shown turns from the event log
    (inline reads too), not only the deferred ones the turns record.
    """
    store = await open_store(target) if store_exists(target) else None
    try:
        snapshot, note, recorded = await _snapshot_and_note(target, session_id, store)
        shown = (
            await turn_calls(store, session_id, snapshot.turns)
            if calls and store is not None
            else {}
        )
        return _Shown(snapshot=snapshot, note=note, calls=shown, recorded=recorded)
    finally:
        if store is not None:
            await store.close()


async def _parked_note(conn: Connection, session_id: str) -> str:
    """A line on the session's parked segment, if a worker holds one."""
    try:
        engine = await SessionClient(conn.client).engine_info(session_id)
    except DexAgentsError:
        return ""
    if engine.parked_on is None or engine.parked_until is None:
        return ""
    until = engine.parked_until.astimezone(UTC).strftime("%H:%M:%S UTC")
    return (
        f"(its next segment waits parked on queue {engine.parked_on} until {until}: "
        "an answer before then resumes it without starting Claude Code, if the "
        "worker that parked it still runs)"
    )


async def _live_snapshot(
    conn: Connection, session_id: str, store: RuntimeStore | None
) -> AgentSnapshot | None:
    """The session's own snapshot, or None when no worker answers for it.

    A worker that stopped moments ago still counts as seen; its session then
    answers nothing, and the caller reads the store's projection instead.
    """
    try:
        snapshot = await SessionClient(conn.client).snapshot(session_id, turns=0)
    except EngineError:
        return None
    return await with_recent_turns(snapshot, store)


async def _snapshot_and_note(
    target: Target, session_id: str, store: RuntimeStore | None
) -> tuple[AgentSnapshot, str, dict[str, ResolveInterruptInput]]:
    """The live snapshot, else the store's projection with a note saying so.

    With the projection come the answers recorded for its pending interrupts
    while no worker ran (read from the session's history), by interrupt ID.
    """
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
            snapshot = await _live_snapshot(conn, session_id, store)
            if snapshot is not None:
                return snapshot, await _parked_note(conn, session_id), {}
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
                f"{redacted_store(target.store)!r} (a session of another directory: "
                f"pass its `--state-dir`), and {unreachable}"
            )
        if info is not None:
            raise no_worker(info.flow_type, info.task_queue)
        raise unknown_session(session_id, conn)
    snapshot = await with_recent_turns(render.snapshot_from_json(projected), store)
    recorded = (
        await recorded_answers(conn.client, session_id, snapshot.pending_interrupts)
        if conn is not None and info is not None
        else {}
    )
    return snapshot, note, recorded


@main.command(
    epilog=_examples(
        "dex-agents events session-1",
        "dex-agents events session-1 --follow",
        "dex-agents events session-1 --json --after 120 | jq -c '{type, data}'",
    )
)
@click.argument(
    "session_id", metavar="SESSION", type=SESSION_ID, shell_complete=complete_session
)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events.")
@click.option(
    "--after",
    type=CURSOR,
    default=0,
    show_default=True,
    help="Start after this cursor.",
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

_TIMEOUT_OPTION = timeout_option(
    10.0,
    "Seconds to wait for the session's worker to take the answer; then it is "
    "recorded, and applies when a worker starts (exit code 3).",
)
_AS_OPTION = click.option(
    "--as",
    "resolved_by",
    metavar="NAME",
    type=TEXT,
    help="Who decides, recorded with the answer (`show`, `events`, the web inbox). "
    "[default: your OS user name]",
)


_RESOLVE_EXIT = """
\b
Exit codes: 0 done (or already answered the same way, with the same edit
or spend limit), 1 an error (the message says what to do), 2 a wrong
argument (nothing was sent), 3 recorded: no worker took it now, it applies
when one starts, 4 already answered another way (the other way, or approved
with another input or spend limit): nothing changed.
"""


@main.command(
    epilog=_examples(
        "dex-agents approve session-1 intr_0123456789abcdef",
        'dex-agents approve session-1 intr_0123456789abcdef --edit \'{"orderId": "8"}\'',
        "dex-agents approve session-1 intr_0123456789abcdef --edit @input.json",
        "dex-agents approve session-1 intr_0123456789abcdef --spend-limit 5   # a "
        "spend limit reached",
        "dex-agents approvals   # every pending approval, with its IDs",
    )
    + _RESOLVE_EXIT
)
@click.argument(
    "session_id", metavar="SESSION", type=SESSION_ID, shell_complete=complete_session
)
@click.argument("interrupt_id", type=INTERRUPT_ID, shell_complete=complete_interrupt)
@click.option(
    "--edit",
    "edit",
    metavar="JSON|@FILE",
    help="Approve with this input instead of the model's: the call's whole input "
    "as a JSON object, or @FILE to read it from a file (@- reads stdin). The "
    "worker checks it against the tool's schema; a refused edit changes nothing "
    "(exit code 1) and the call still waits. `show` and `events` keep both "
    "inputs and who edited.",
)
@click.option(
    "--spend-limit",
    "spend_limit",
    type=float,
    metavar="USD",
    help="Answer a spend-limit interrupt (status `budget reached`) with this new "
    "limit, in USD and above what the session spent: the turn goes on under it. "
    "Needed for such an interrupt, refused for a tool call's.",
)
@_TIMEOUT_OPTION
@_AS_OPTION
@target_options
def approve(
    session_id: str,
    interrupt_id: str,
    edit: str | None,
    spend_limit: float | None,
    timeout: float,
    resolved_by: str | None,
    target: Target,
) -> None:
    """Approve a pending tool call; the tool then runs in the session's worker.

    With no worker running, the approval is recorded in the session's history
    and applies (once) when a worker starts. An approval with `--edit` needs a
    worker (it checks the edit), so it is never recorded for later. A
    spend-limit interrupt (the session reached its `spend_limit`) is approved
    with `--spend-limit USD`, a new limit above what it spent.
    """
    if edit is not None and spend_limit is not None:
        raise BadArgumentError(
            "`--edit` and `--spend-limit` exclude each other: `--edit` approves a "
            "tool call with another input, `--spend-limit` answers a spend-limit "
            "interrupt"
        )
    new_spend_limit = (
        spend_limit_option(spend_limit) if spend_limit is not None else None
    )
    verdict = Verdict(
        approved=True,
        resolved_by=recorded_name(resolved_by),
        edited_input=edited_input_option(edit) if edit is not None else None,
        new_spend_limit=new_spend_limit,
    )
    exit_with(run(resolve(target, session_id, interrupt_id, verdict, timeout=timeout)))


@main.command(
    epilog=_examples(
        "dex-agents reject session-1 intr_0123456789abcdef -m 'not this order'",
    )
    + _RESOLVE_EXIT
)
@click.argument(
    "session_id", metavar="SESSION", type=SESSION_ID, shell_complete=complete_session
)
@click.argument("interrupt_id", type=INTERRUPT_ID, shell_complete=complete_interrupt)
@click.option(
    "--message",
    "-m",
    type=TEXT,
    help="Why: the agent reads it in place of the tool's result.",
)
@click.option("--edit", "edit", hidden=True)  # refused, with what to run instead
@_TIMEOUT_OPTION
@_AS_OPTION
@target_options
def reject(
    session_id: str,
    interrupt_id: str,
    message: str | None,
    edit: str | None,
    timeout: float,
    resolved_by: str | None,
    target: Target,
) -> None:
    """Reject a pending tool call; it never runs, and the agent is told why.

    With no worker running, the rejection is recorded in the session's history
    and applies when a worker starts. Rejecting a spend-limit interrupt
    declines a new limit: the turn fails (spend limit reached).
    """
    if edit is not None:
        raise BadArgumentError(
            "`reject` takes no `--edit`: a rejected call never runs. To run it with "
            f"another input, `{suggest('approve', session_id, interrupt_id, raw='--edit JSON')}`"
        )
    verdict = Verdict(
        approved=False, message=message, resolved_by=recorded_name(resolved_by)
    )
    exit_with(run(resolve(target, session_id, interrupt_id, verdict, timeout=timeout)))


@main.command(
    epilog=_examples(
        "dex-agents approvals",
        "dex-agents approvals --json | jq -r '.[].interrupt_id'",
    )
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@target_options
def approvals(as_json: bool, target: Target) -> None:
    """List every approval waiting, in every session (the longest-waiting first).

    Each row has the session and interrupt IDs that `approve` and `reject`
    take, the tool, its effect, its input, the deadline and how long it has
    waited; a spend-limit interrupt shows what was spent of which limit
    (answer it with `approve --spend-limit USD`). Read from the runtime store,
    so it works with no server or worker running. An approval answered while
    no worker ran stays listed, with its answer (ANSWER: recorded; it applies
    when a worker starts).
    """
    waiting = run(pending_approvals(target))
    out = _print_listing(
        waiting,
        as_json=as_json,
        json_of=render.approval_json,
        table=render.approvals_table,
        none=f"no approvals waiting in {redacted_store(target.store)}",
    )
    if out is None:
        return
    unanswered = [p for p in waiting if p.recorded is None]
    if unanswered:
        first = unanswered[0]
        limit = " --spend-limit USD" if render.is_budget(first.interrupt) else ""
        render.say(
            out,
            f"answer one: "
            f"{suggest('approve', first.session_id, first.interrupt.interrupt_id, raw=limit.strip())}"
            " (or reject ... -m 'why')",
            "dim",
        )
    if len(unanswered) < len(waiting):
        render.say(
            out,
            "recorded: answered while no worker ran, not applied yet; each applies "
            "when a worker of its session's flow starts: "
            f"{suggest('worker', raw='--agent module:flow')}",
            "dim",
        )


# -- demo -----------------------------------------------------------------------


@main.command()
@state_dir_option(
    "Where the demo's server, store and ledger live. Default: ./.dex-agents"
)
def demo(state_dir: Path | None) -> None:
    """Show durability end to end: a refund waits through a worker crash, then runs once.

    Runs offline with the scripted Messages API when `ANTHROPIC_API_KEY` is unset.
    Exits 0 when every step happened, non-zero otherwise (130 on Ctrl-C).
    """
    sys.exit(run(run_demo(str(state_dir) if state_dir else None)))


# -- chat -----------------------------------------------------------------------


@main.command()
@click.argument("session_id", metavar="SESSION", type=SESSION_ID)
@click.option(
    "--agent",
    metavar="MODULE:FLOW",
    help=_AGENT_HELP + " Needed to start a new session.",
)
@target_options
def chat(session_id: str, agent: str | None, target: Target) -> None:
    """Chat with a session in the terminal, answering its approvals as they come.

    Text streams as the agent writes it, tool calls show as they start and
    finish, and each approval shows the tool, its effect and its exact input
    (a spend limit reached asks for a new limit). Ctrl-C while a turn runs
    stops it (the turn ends cancelled) and comes back to the prompt. Leave
    with /quit, Ctrl-D or Ctrl-C at the prompt; the session keeps running,
    and coming back shows its history and any approval still waiting.
    """
    flow = load_flow(agent) if agent else None
    run_chat(target, session_id, flow)


main.add_command(cancel)
main.add_command(end)
main.add_command(doctor)
try:  # `serve` needs the `web` extra
    from ._serve import serve

    main.add_command(serve)
except ImportError as _no_web:
    _web_missing = str(_no_web)

    @main.command(
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def serve() -> None:
        """Serve sessions on the web (needs the `web` extra: pip install "dex-agents[web]")."""
        # Listed and refused in one line, not "No such command 'serve'".
        raise CommandError(_web_missing)


_EPILOGS = {
    "dev": _examples(
        "dex-agents dev --agent dex_agents.examples.support_agent:flow",
        "dex-agents dev --agent my_agent.py:flow --state-dir /srv/agents/.dex-agents",
        "dex-agents dev   # the server only; serve agents with `dex-agents worker`",
    ),
    "worker": _examples(
        "dex-agents worker --agent my_agent.py:flow",
        "dex-agents worker --agent my_agent:flow --address temporal:7233 "
        "--store postgresql://agents@db/agents",
    ),
    "chat": _examples(
        "dex-agents chat session-1 --agent dex_agents.examples.support_agent:flow",
        "dex-agents chat session-1   # an existing session: no --agent needed",
    ),
    "demo": _examples(
        "dex-agents demo",
        "dex-agents demo --state-dir /tmp/dex-demo",
    ),
    "serve": _examples(
        "dex-agents serve --new-token alice --role approve",
        "dex-agents serve --tokens-file tokens.toml --agent my_agent.py:flow",
        "dex-agents serve --allow-anonymous-loopback --agent my_agent.py:flow",
    ),
}
"""Examples for the `--help` of the commands whose definitions have none."""
for _name, _epilog in _EPILOGS.items():
    _command = main.commands.get(_name)
    has = f"{_command.help or ''}{_command.epilog or ''}" if _command else ""
    if _command is not None and "Examples:" not in has:
        _command.epilog = _epilog
