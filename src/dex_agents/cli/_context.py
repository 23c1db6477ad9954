"""How a command finds the engine, the runtime store and a session.

The engine is, in order: `--address`/`--namespace` (or `DEX_AGENTS_TEMPORAL_ADDRESS`
with the other `DEX_AGENTS_TEMPORAL_*` variables for TLS and API key), else the dev
server recorded in the state directory's `engine.json`. Only `dev` starts a
server: every other command reuses a running one, so a read never leaves a server
behind and never fights `dev` over the SQLite file.

The runtime store is `<state_dir>/runtime.sqlite` unless `--store` names another
file or a `postgresql://` URL.
Read commands do not create it: a missing file is a store without sessions.

While Temporal is down its Rust core logs a `WARN ... tcp connect error` line for
every retried call, several a second; commands keep those off the terminal
(`quiet_temporal_logs`) and say it once in their own words instead (`Outage`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import getpass
import json
import math
import os
import shlex
import sqlite3
from collections.abc import Callable, Generator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
import temporalio.runtime
from rich.text import Text
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from .._errors import InvalidArgumentError, UserError
from ..stores import RuntimeStore
from ..stores._open import (
    is_database_url,
    open_runtime_store,
    redacted_store,
    without_password,
)
from ..temporal import EngineConfig, open_engine
from ..temporal._engine import (
    ADDRESS_ENV,
    STATE_DIR_ENV,
    expand_home,
    resolve_state_dir,
)
from ..temporal._pollers import worker_seen as worker_seen
from ._errors import (
    DEBUG_ENV,
    BadArgumentError,
    CommandError,
    set_where_options,
    suggest,
    unusable_path,
)

_Command = TypeVar("_Command", bound=Callable[..., Any])

STORE_FILE = "runtime.sqlite"
_RECORD_FILE = "engine.json"
_CONNECT_TIMEOUT = timedelta(seconds=5)
_HEALTH_TIMEOUT = timedelta(seconds=1)
"""A health check answers in milliseconds; a closed port fails at once."""


def start_hint() -> str:
    """How to start a server, said when none runs (with the options given)."""
    return (
        f"start one with `{suggest('dev', raw='--agent module:flow')}` (server and "
        "worker), or pass `--address host:port` for a running cluster"
    )


@dataclass(frozen=True, kw_only=True)
class Target:
    """Where a command looks for the engine and the runtime store."""

    state_dir: Path
    address: str | None
    namespace: str
    store: str
    """A SQLite file's absolute path, or a PostgreSQL URL."""
    store_given: bool = False
    """`--store` or DEX_AGENTS_STORE named it; False for the state dir's file."""


def store_location(store: str | Path | None, directory: Path) -> str:
    """The runtime store a command uses: `--store` as given, else the state dir's file."""
    if isinstance(store, str) and (is_database_url(store) or "://" in store):
        return store  # a URL stays as given: opening it refuses an unknown scheme
    path = expand_home(
        Path(store or directory / STORE_FILE), "store", named="`--store`"
    )
    return str(path.resolve())


def _typed(name: str) -> bool:
    """Whether the user typed option `name` (not a default, not the environment).

    An option from the environment is in that shell for the next command too.
    """
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return False
    return ctx.get_parameter_source(name) in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.PROMPT,
    )


def remember_where(
    *, directory: Path, store: str | None, address: str | None, namespace: str
) -> None:
    """Remember the typed options that select where sessions live, non-default only.

    Every command this one suggests (`_errors.suggest`) carries them, so a
    suggestion pasted as is reaches the same sessions. The one place that
    builds them: `target_options` commands and `dev` call it.
    """
    words: list[str] = []
    default_dir = resolve_state_dir(None, create=False)
    if _typed("state_dir") and directory != default_dir:
        words += ["--state-dir", str(directory)]
    if _typed("store") and store:
        location = store_location(store, directory)
        if location != store_location(None, directory):
            # No password in a command to paste: libpq reads PGPASSWORD or
            # ~/.pgpass (`***` would fail to sign in; the password in clear
            # would stand on the screen and in logs).
            words += ["--store", without_password(location)]
    if _typed("address") and address:
        words += ["--address", address]
    if _typed("namespace") and namespace != "default":
        words += ["--namespace", namespace]
    set_where_options(words)


def state_dir_option(help: str) -> Callable[[_Command], _Command]:
    """A command's `--state-dir DIRECTORY` (also `DEX_AGENTS_STATE_DIR`)."""
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="DEX_AGENTS_STATE_DIR",
        show_envvar=True,
        help=help,
    )


@contextlib.contextmanager
def usage_errors() -> Generator[None, None, None]:
    """Turn the library's refusal of an option's value into a usage error (exit 2).

    Such as `--store '~nosuchuser/x'`, or a state directory under an unknown
    `~user`: read before any command runs, outside its error translation.
    """
    try:
        yield
    except InvalidArgumentError as err:
        ctx = click.get_current_context(silent=True)
        from_env = ctx is not None and (
            ctx.get_parameter_source("state_dir")
            == click.core.ParameterSource.ENVIRONMENT
        )
        option = f"`{STATE_DIR_ENV}`" if from_env else "`--state-dir`"
        raise BadArgumentError(err.message.replace("`state_dir`", option)) from err


def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add `--state-dir`, `--address`, `--namespace`, `--store`; pass a `target`."""

    @state_dir_option("State directory of the embedded engine. Default: ./.dex-agents")
    @click.option(
        "--address",
        envvar="DEX_AGENTS_TEMPORAL_ADDRESS",
        show_envvar=True,
        help="host:port of a Temporal cluster (TLS and API key from "
        "DEX_AGENTS_TEMPORAL_TLS / _API_KEY). Default: the state directory's dev "
        "server.",
    )
    @click.option(
        "--namespace",
        envvar="DEX_AGENTS_TEMPORAL_NAMESPACE",
        show_envvar=True,
        default="default",
        show_default=True,
        help="Temporal namespace of the sessions.",
    )
    @click.option(
        "--store",
        "store",
        envvar="DEX_AGENTS_STORE",
        show_envvar=True,
        help="Runtime store: a SQLite file, or a postgresql:// URL shared by "
        "every machine. Default: <state dir>/runtime.sqlite.",
    )
    @functools.wraps(command)
    def wrapper(
        *args: Any,
        state_dir: Path | None,
        address: str | None,
        namespace: str,
        store: str | None,
        **kwargs: Any,
    ) -> Any:
        with usage_errors():
            directory = resolve_state_dir(state_dir, create=False)
            remember_where(
                directory=directory, store=store, address=address, namespace=namespace
            )
            target = Target(
                state_dir=directory,
                address=address.strip() if address and address.strip() else None,
                namespace=namespace,
                store=store_location(store, directory),
                store_given=bool(store),
            )
        return command(*args, target=target, **kwargs)

    return wrapper


MIN_TIMEOUT = 0.1
MAX_TIMEOUT = 86400.0
"""The longest `--timeout`: a day. A wait longer than that is a mistake (`1e308`)."""
MAX_ID_BYTES = 1000
"""The longest session or interrupt ID, in UTF-8 bytes (Temporal's limit for IDs)."""


def _bad(param: click.Parameter | None, value: object, why: str) -> BadArgumentError:
    """The one-line error (exit 2) of a wrong option or argument, naming it."""
    if param is None:
        name = "argument"
    elif isinstance(param, click.Option):
        name = max(param.opts, key=len)
    else:
        name = param.human_readable_name
    shown = value if isinstance(value, str) else str(value)
    quoted = shlex.quote(shown.encode("utf-8", "backslashreplace").decode())
    return BadArgumentError(f"bad `{name} {quoted}`: {why}")


class _Seconds(click.ParamType):  # pyright: ignore[reportMissingTypeArgument]: click<8.5 is not generic
    """`--timeout`: a finite number of seconds from `MIN_TIMEOUT` to `MAX_TIMEOUT`."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        """The seconds, or a one-line error (exit 2)."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            seconds = float(value)
        else:
            try:
                seconds = float(str(value))
            except (ValueError, OverflowError):
                seconds = math.nan
        if not (math.isfinite(seconds) and MIN_TIMEOUT <= seconds <= MAX_TIMEOUT):
            raise _bad(
                param,
                value,
                f"the timeout must be a finite number of seconds from {MIN_TIMEOUT:g} "
                f"to {MAX_TIMEOUT:g} (a day)",
            )
        return seconds


SECONDS = _Seconds()


def timeout_option(default: float, help: str) -> Callable[[_Command], _Command]:
    """A command's `--timeout SECONDS` (0.1 to a day), its default shown."""
    return click.option(
        "--timeout",
        type=SECONDS,
        default=default,
        show_default=True,
        help=f"{help} From {MIN_TIMEOUT:g} to {MAX_TIMEOUT:g} (a day).",
    )


class _Text(click.ParamType):  # pyright: ignore[reportMissingTypeArgument]: click<8.5 is not generic
    """Text that can be stored: no lone surrogate, and for an ID, a bounded size.

    A lone surrogate is a byte the terminal's encoding could not decode; an ID
    is also not empty and at most `MAX_ID_BYTES`.
    """

    def __init__(self, name: str, *, what: str | None = None) -> None:
        self.name = name
        self._what = what
        """What the ID is (for the errors); None for free text."""

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        """The text, or a one-line error (exit 2) naming the argument."""
        text = value if isinstance(value, str) else str(value)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise _bad(
                param,
                text,
                "it holds a byte that is not UTF-8 text; pass valid text",
            ) from None
        if self._what is None:
            return text
        if not text:
            raise _bad(param, text, f"{self._what} cannot be empty")
        if size > MAX_ID_BYTES:
            raise _bad(
                param,
                text[:40] + "...",
                f"{self._what} is {size:,} bytes long, over the limit of "
                f"{MAX_ID_BYTES} bytes",
            )
        return text


class _Cursor(click.ParamType):  # pyright: ignore[reportMissingTypeArgument]: click<8.5 is not generic
    """`events --after`: a cursor, a whole number from 0 to SQLite's largest."""

    name = "cursor"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        """The cursor, or a one-line error (exit 2)."""
        try:
            cursor = int(value)
        except (TypeError, ValueError):
            cursor = -1
        if not 0 <= cursor <= _MAX_CURSOR:
            raise _bad(
                param, value, f"a cursor is a whole number from 0 to {_MAX_CURSOR}"
            )
        return cursor


_MAX_CURSOR = 2**63 - 1
"""SQLite's largest integer."""
CURSOR = _Cursor()


SESSION_ID = _Text("session", what="a session ID")
"""A session ID argument: non-empty, UTF-8 text, at most 1000 bytes."""
INTERRUPT_ID = _Text("interrupt", what="an interrupt ID")
"""An interrupt ID argument, as `SESSION_ID`."""
TEXT = _Text("text")
"""Free text (`--as`, `--message`, `--reason`): valid UTF-8."""


def recorded_name(name: str | None) -> str | None:
    """Who an action is recorded as: `name` (`--as`), else the OS user, else nobody."""
    if name is None:
        with contextlib.suppress(OSError, KeyError, ImportError):  # no OS user here
            name = getpass.getuser()
    return name


@dataclass(frozen=True, kw_only=True)
class Connection:
    """A connected client and a description of what it reached, for messages."""

    client: Client
    address: str
    namespace: str
    where: str
    """`dev server (pid 12, state dir …)` or `cluster`: said in banners and errors."""
    restart_hint: str = "check that the Temporal cluster is running"
    """What to do when this server goes away, said once per outage."""


async def connect(target: Target) -> Connection:
    """Connect to the configured cluster, or to the state directory's dev server.

    Raises:
        CommandError: nothing answers; the message says how to start a server.
    """
    quiet_temporal_logs()
    config = EngineConfig.from_env()
    if target.address is not None:
        # TLS and the API key come from the environment however the address is
        # given: `--address` with an exported key must not connect in plaintext.
        base = EngineConfig.from_env({**os.environ, ADDRESS_ENV: target.address})
        assert base is not None
        config = dataclasses.replace(
            base, address=target.address, namespace=target.namespace
        )
    if config is not None:
        config = dataclasses.replace(config, connect_timeout=_CONNECT_TIMEOUT)
        engine = await open_engine(config).start()
        return Connection(
            client=await engine.client(),
            address=config.address,
            namespace=config.namespace,
            where="cluster",
        )
    return await _connect_dev_server(target)


async def require_namespace(conn: Connection) -> None:
    """Refuse, in one line, a namespace the server does not have.

    A worker started there printed its banner and "ready", then failed
    Temporal's worker validation with a traceback. A server that does not let
    this caller describe namespaces (an API key without the right) is let be.

    Raises:
        CommandError: the namespace does not exist; how to create it.
    """
    try:
        await conn.client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=conn.namespace),
            timeout=_CONNECT_TIMEOUT,
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CommandError(
                f"namespace {conn.namespace!r} does not exist on {conn.address}; pass "
                "`--namespace` (DEX_AGENTS_TEMPORAL_NAMESPACE) one that does, or create "
                f"it: `temporal operator namespace create --namespace "
                f"{shlex.quote(conn.namespace)} --address {conn.address}`"
            ) from err


async def _connect_dev_server(target: Target) -> Connection:
    record_path = target.state_dir / _RECORD_FILE
    record = _read_record(record_path)
    if record is None:
        raise CommandError(
            f"no Temporal server is running for state directory "
            f"{str(target.state_dir)!r}; {start_hint()}"
        )
    address, pid, namespaces = record
    if not _pid_alive(pid):
        raise CommandError(
            f"the Temporal dev server of {str(target.state_dir)!r} (pid {pid}) has "
            f"exited; {start_hint()}"
        )
    if target.namespace not in namespaces:
        raise CommandError(
            f"the dev server on {address} serves namespaces {list(namespaces)!r}, "
            f"not {target.namespace!r}; pass `--namespace` with one of them"
        )
    config = EngineConfig(
        address=address, namespace=target.namespace, connect_timeout=_CONNECT_TIMEOUT
    )
    engine = open_engine(config)
    try:
        await engine.start()
    except Exception as err:
        raise CommandError(
            f"the dev server of {str(target.state_dir)!r} (pid {pid}, {address}) does "
            "not answer; stop `dex-agents dev` and start it again"
        ) from err
    return Connection(
        client=await engine.client(),
        address=address,
        namespace=target.namespace,
        where=f"dev server (pid {pid}, state dir {target.state_dir})",
        restart_hint=dev_restart_hint(),
    )


def dev_restart_hint() -> str:
    """How to bring a state directory's dev server back, for outage lines."""
    return f"start it again with `{suggest('dev', raw='--agent module:flow')}`"


def quiet_temporal_logs() -> None:
    """Keep the Rust core's log lines (retry WARN floods) off the terminal.

    Only a process's first Temporal connection picks its runtime, so this runs
    before any; a process that already has one (a program that runs a command
    in-process, a test) keeps its own. With `DEX_AGENTS_DEBUG` set the core logs
    as usual.
    """
    if os.environ.get(DEBUG_ENV):
        return
    ref = getattr(temporalio.runtime, "_runtime_ref", None)
    if getattr(ref, "_default_runtime", None) is not None:
        return
    quiet = temporalio.runtime.Runtime(
        telemetry=temporalio.runtime.TelemetryConfig(logging=None)
    )
    # Another thread may have set one meanwhile: that one stays.
    with contextlib.suppress(RuntimeError):
        temporalio.runtime.Runtime.set_default(quiet)


def unreachable(err: BaseException) -> bool:
    """Whether `err` means Temporal cannot be reached, rather than that it refused."""
    return isinstance(err, RPCError) and err.status == RPCStatusCode.UNAVAILABLE


async def server_answers(client: Client) -> bool:
    """Whether the server answers a health check now (no retries: a second at most)."""
    try:
        return await client.service_client.check_health(timeout=_HEALTH_TIMEOUT)
    except (RPCError, RuntimeError, TimeoutError):
        return False


class Outage:
    """Says once that the Temporal server went away, and once that it is back.

    The chat and `worker` call `check()` while they wait, however often; the
    user reads one line per outage instead of a retry per second.
    """

    def __init__(
        self, conn: Connection, say: Callable[[Text], None], *, meanwhile: str
    ) -> None:
        self._conn = conn
        self._say = say
        self._meanwhile = meanwhile
        self.lost = False
        """Whether the server is known to be gone (the advice was printed)."""

    def report_lost(self) -> None:
        """The server did not answer: print the advice, once per outage."""
        if self.lost:
            return
        self.lost = True
        self._say(
            Text(
                f"lost the Temporal server at {self._conn.address}; "
                f"{self._conn.restart_hint} ({self._meanwhile})",
                style="yellow",
            )
        )

    def report_back(self) -> None:
        """The server answered again: say so, once."""
        if not self.lost:
            return
        self.lost = False
        self._say(
            Text(f"the Temporal server at {self._conn.address} is back", style="green")
        )

    async def check(self) -> bool:
        """Ask the server now; report a change. Returns whether it answers."""
        answers = await server_answers(self._conn.client)
        if answers:
            self.report_back()
        else:
            self.report_lost()
        return answers


def _read_record(path: Path) -> tuple[str, int, tuple[str, ...]] | None:
    """Address, pid and namespaces from `engine.json` (see `dex_agents.temporal`)."""
    try:
        data = json.loads(path.read_text())
        return (
            str(data["address"]),
            int(data["pid"]),
            tuple(str(n) for n in data["namespaces"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def open_store(target: Target, *, create: bool = False) -> RuntimeStore:
    """The runtime store; without `create`, a missing file is an error to handle.

    Raises:
        CommandError: the file is missing and `create` is False, or the
            database cannot be reached.
    """
    if not create and not store_exists(target):
        raise CommandError(
            f"no runtime store at {redacted_store(target.store)!r}; pass `--store` (or "
            "`--state-dir`) where the worker writes it"
        )
    try:
        return await open_runtime_store(target.store)
    except UserError as e:
        if isinstance(e.__cause__, sqlite3.Error):  # said with this command's options
            raise store_error(e.__cause__, target.store) from e
        raise CommandError(str(e)) from e
    except (OSError, sqlite3.Error) as e:
        raise store_error(e, target.store) from e


def store_error(err: OSError | sqlite3.Error, store: str) -> Exception:
    """The one-line error of a store that cannot be opened, or `err` itself.

    A file that is not SQLite (`--store` naming another file) says so.
    """
    if isinstance(err, sqlite3.DatabaseError) and "not a database" in str(err):
        return CommandError(
            f"{redacted_store(store)!r} is not a dex-agents SQLite store (the file "
            "is not an SQLite database); pass `--store` the runtime store's file, "
            "or `--state-dir` the directory whose runtime.sqlite it is"
        )
    unusable = unusable_path(err, redacted_store(store))
    return err if unusable is None else CommandError(unusable)


def store_label(store: RuntimeStore) -> str:
    """How banners name a store: its file, or its database without credentials."""
    for attribute in ("path", "description"):
        value = getattr(store, attribute, None)
        if value is not None:
            return str(value)
    return type(store).__name__


def store_exists(target: Target) -> bool:
    """Whether the runtime store exists (read commands treat a missing file as empty).

    A database (or any URL) is assumed to exist: opening it says clearly if it
    cannot be reached or is not a store this library supports.
    """
    store = target.store
    return is_database_url(store) or "://" in store or Path(store).exists()


@dataclass(frozen=True, kw_only=True)
class SessionInfo:
    """What Temporal knows about a session's workflow: enough to act without `--agent`."""

    session_id: str
    flow_type: str
    task_queue: str
    status: str
    """Temporal's execution status, e.g. `RUNNING` or `TERMINATED`."""

    @property
    def running(self) -> bool:
        """Whether the workflow can still take messages and approvals."""
        return self.status == "RUNNING"


async def describe_session(client: Client, session_id: str) -> SessionInfo | None:
    """The session's workflow type, task queue and status, or None if unknown."""
    try:
        description = await client.get_workflow_handle(session_id).describe(
            rpc_timeout=_CONNECT_TIMEOUT
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    status = description.status
    return SessionInfo(
        session_id=session_id,
        flow_type=description.workflow_type,
        task_queue=description.task_queue,
        status=status.name
        if isinstance(status, WorkflowExecutionStatus)
        else "UNKNOWN",
    )


async def known_session(conn: Connection, session_id: str) -> SessionInfo:
    """The session `session_id`, running or ended.

    Raises:
        CommandError: no such session.
    """
    info = await describe_session(conn.client, session_id)
    if info is None:
        raise unknown_session(session_id, conn)
    return info


async def require_session(conn: Connection, session_id: str) -> SessionInfo:
    """The running session `session_id`.

    Raises:
        CommandError: no such session, or it has ended.
    """
    info = await known_session(conn, session_id)
    if not info.running:
        raise CommandError(
            f"session {session_id!r} has ended (its workflow is {info.status}); it "
            "takes no more messages or approvals"
        )
    return info


def unknown_session(session_id: str, conn: Connection | None = None) -> CommandError:
    """The error for a session ID that neither Temporal nor the store knows."""
    where = f" on {conn.address} (namespace {conn.namespace})" if conn else ""
    return CommandError(
        f"unknown session {session_id!r}{where}; list sessions with "
        f"`{suggest('sessions')}`"
    )


def no_worker(flow_type: str, task_queue: str) -> CommandError:
    """The error for a session whose flow no worker serves."""
    return CommandError(
        f"no worker is serving flow {flow_type!r} (task queue {task_queue!r}); start "
        f"one with `{suggest('worker', raw='--agent module:flow')}` (or "
        f"`{suggest('dev', raw='--agent module:flow')}`) and try again"
    )


async def require_worker(client: Client, flow_type: str, task_queue: str) -> None:
    """Fail fast when no worker serves the flow, instead of waiting forever.

    Raises:
        CommandError: no worker polled the task queue recently.
    """
    if not await worker_seen(client, task_queue):
        raise no_worker(flow_type, task_queue)
