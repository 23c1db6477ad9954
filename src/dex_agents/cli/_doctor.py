"""`dex-agents doctor`: what a worker needs, checked, one line each with its fix.

Five checks run at once, each under `--timeout`, so a doctor never hangs:

- the Claude Code CLI a segment would run (`real_cli_path`: the agent's
  `cli_path`, else the bundled binary, else `claude` on PATH), its
  `--version`, and whether that is the version the adapter is tested with (a
  warning, not a failure, when it is not);
- model credentials in the environment (an API key, a token, a cloud
  provider, or the scripted model's variables); they are not tried, since a
  doctor calls no model;
- Temporal at the target every command resolves (`--address`, else the state
  directory's dev server), connected as `worker` connects; a doctor never
  starts a server;
- the runtime store the worker opens, by a write that is rolled back (SQLite:
  in the file, or in its directory when the worker has yet to create it;
  PostgreSQL: a row in a transaction that never commits);
- with `--agent`, each flow's media store (an S3 bucket: `head_bucket`).

Nothing is left behind: no server, no session, no row, no file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import os
import re
import sqlite3
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, TypeVar

import click
from rich.text import Text
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.service import RPCError, RPCStatusCode

from .._errors import DexAgentsError, UserError
from ..stores import (
    DirectoryMediaStore,
    InMemoryMediaStore,
    MediaStore,
    is_database_url,
    open_runtime_store,
    redacted_store,
)
from ..stores._media import image_reference
from ..temporal import AgentSessionFlow, EngineConfig
from ..testing import SCRIPTED_MODEL_API_KEY
from . import _render as render
from ._agent_ref import load_flow
from ._context import Target, connect, store_label, target_options
from ._errors import DEBUG_ENV, CommandError, one_line, prog, run

TESTED_CLI_VERSION = "2.1.332"
"""The Claude Code CLI the adapter is tested with: the one claude-agent-sdk
0.2.189 (the top of the `claude` extra's range, and the lock's) bundles. The
adapter's comments describe 2.1.327, which `make cli-compat` finds the same
in every behavior the adapter relies on."""

Status = Literal["pass", "warn", "fail", "skip"]
_MARKS: dict[Status, tuple[str, str]] = {
    "pass": ("✓", "green"),
    "warn": ("!", "yellow"),
    "fail": ("✗", "bold red"),
    "skip": ("–", "dim"),
}
_GRACE = 1.0
"""Seconds a check may overrun `--timeout` with its own message before the
doctor gives up on it with a generic one."""
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Check:
    """One check's outcome: its line, and what to do when it failed or warned."""

    name: str
    """A stable key for `--json`: `claude_cli`, `credentials`, `temporal`,
    `runtime_store`, `media_store`."""
    status: Status
    text: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=lambda: {})

    def __post_init__(self) -> None:
        # One line per check, whatever a library's message looks like.
        object.__setattr__(self, "text", " ".join(self.text.split()))
        if self.fix is not None:
            object.__setattr__(self, "fix", " ".join(self.fix.split()))

    def line(self) -> Text:
        """The check as one line: a mark, what was found and, if any, the fix."""
        mark, style = _MARKS[self.status]
        line = Text.assemble((mark, style), " ", self.text)
        if self.fix:
            line.append(" — fix: ", style="dim")
            line.append(self.fix, style="yellow" if self.status == "warn" else "")
        return line

    def to_json(self) -> dict[str, Any]:
        """The check for `--json`."""
        return {
            "check": self.name,
            "status": self.status,
            "message": self.text,
            "fix": self.fix,
            **self.details,
        }


_DOCTOR_HELP = """Check what a worker needs: one line per check, with the fix for each that fails.

It checks the Claude Code CLI a worker runs (found, its version, and whether it
is the version the adapter is tested with), model credentials in the
environment, Temporal at the address the other commands use (it never starts
a server), that the runtime store can be written (a write it rolls back), and
with --agent each flow's media store. Each check has --timeout; nothing is
left behind.

\b
Exit codes: 0 every check passed (warnings allowed), 1 a check failed.

\b
Examples:
  dex-agents doctor
  dex-agents doctor --agent my_agent.py:flow --address temporal:7233 --store postgresql://agents@db/agents
  dex-agents doctor --json | jq -r '.checks[] | select(.status == "fail") | .fix'
"""


@click.command(help=_DOCTOR_HELP)
@click.option(
    "--agent",
    "agents",
    multiple=True,
    metavar="MODULE:FLOW",
    help="The agent a worker will serve, as `worker --agent` takes it: its "
    "definition's `cli_path` and media store are checked too.",
)
@click.option(
    "--cli",
    metavar="PATH",
    help="The Claude Code CLI to check. Default: the one a worker runs (the "
    "agent's `cli_path`, else the CLI bundled with claude-agent-sdk, else "
    "`claude` on PATH).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="Seconds each check may take.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@target_options
def doctor(
    agents: Sequence[str],
    cli: str | None,
    timeout: float,
    as_json: bool,
    target: Target,
) -> None:
    """Check what a worker needs (see `_DOCTOR_HELP` for its help text)."""
    flows = [load_flow(ref) for ref in agents]
    checks = run(_doctor(target, flows, cli, timeout, spinner=not as_json))
    failed = [c for c in checks if c.status == "fail"]
    if as_json:
        render.echo_json(
            {"ok": not failed, "checks": [check.to_json() for check in checks]}
        )
    else:
        out = render.console()
        for check in checks:
            out.print(check.line(), soft_wrap=True)
    if failed:
        names = ", ".join(c.name for c in failed)
        raise CommandError(
            f"{len(failed)} of {len(checks)} checks failed ({names}); each ✗ line "
            f"says the fix, then run `{prog()} doctor` again"
        )


async def _doctor(
    target: Target,
    flows: list[AgentSessionFlow],
    cli: str | None,
    timeout: float,
    *,
    spinner: bool,
) -> list[Check]:
    cli_path, cli_source = _cli_choice(cli, flows)
    sdk = _claude_modules()  # imports take a second: not part of a check's time
    checks = [
        _guarded(
            "claude_cli",
            "Claude Code CLI",
            _check_cli(sdk, cli_path, cli_source, timeout),
            timeout,
        ),
        _guarded("credentials", "model credentials", _check_credentials(), timeout),
        _guarded("temporal", "Temporal", _check_temporal(target, timeout), timeout),
        _guarded(
            "runtime_store",
            f"runtime store {redacted_store(target.store)}",
            _check_store(target, timeout),
            timeout,
        ),
        _guarded("media_store", "media store", _check_media(flows, timeout), timeout),
    ]
    if not spinner:
        return list(await asyncio.gather(*checks))
    async with render.Progress(render.console(), "checking"):
        return list(await asyncio.gather(*checks))


async def _guarded(
    name: str, title: str, check: Awaitable[Check], timeout: float
) -> Check:
    """`check`'s outcome, or a failed line when it overran or broke."""
    try:
        async with asyncio.timeout(timeout + _GRACE):
            return await check
    except TimeoutError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: no answer within {timeout:g} s",
            fix="check the network and the service it names, or pass a longer "
            "`--timeout`",
        )
    except Exception as err:
        if os.environ.get(DEBUG_ENV):
            raise
        return Check(
            name=name,
            status="fail",
            text=f"{title}: unexpected {type(err).__name__}: {one_line(str(err))}",
            fix=f"set {DEBUG_ENV}=1 to see the traceback, and please report it",
        )


async def _in_thread(fn: Callable[[], _T], timeout: float) -> _T:
    """`fn()` in a daemon thread, given up after `timeout` seconds.

    Not `asyncio.to_thread`: a call that hangs (a blackholed endpoint) would
    keep `asyncio.run` waiting for the executor at exit; a daemon thread ends
    with the process.

    Raises:
        TimeoutError: `fn` did not return in time.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle(outcome: Callable[[], _T]) -> None:
        if future.done():
            return  # given up on already
        try:
            future.set_result(outcome())
        except BaseException as err:
            future.set_exception(err)

    def work() -> None:
        try:
            result = fn()
        except BaseException as err:
            error = err

            def outcome() -> _T:
                raise error

        else:

            def outcome() -> _T:
                return result

        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=work, name="dex-agents-doctor", daemon=True).start()
    async with asyncio.timeout(timeout):
        return await future


# -- the Claude Code CLI ---------------------------------------------------------


def _cli_choice(
    cli: str | None, flows: Sequence[AgentSessionFlow]
) -> tuple[str | None, str | None]:
    """The CLI named explicitly (`--cli`, else an agent's `cli_path`), and by whom."""
    if cli:
        return cli, "--cli"
    for flow in flows:
        options = getattr(_definition(flow), "options", None)
        path = None if callable(options) else getattr(options, "cli_path", None)
        if path:
            return str(path), f"cli_path of flow {flow.flow_type}"
    return None, None


def _definition(flow: AgentSessionFlow) -> object | None:
    """The flow's agent definition (a `ClaudeAgentDefinition`), if its runner has one."""
    return getattr(flow.runner, "definition", None)


def _pinned_sdk() -> str | None:
    """The claude-agent-sdk version the installed dex-agents pins, if it says."""
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        for requirement in importlib.metadata.requires("dex-agents") or []:
            match = re.match(r"claude-agent-sdk\s*==\s*([\w.]+)", requirement)
            if match:
                return match.group(1)
    return None


def _claude_modules() -> tuple[ModuleType, ModuleType] | None:
    """`claude_agent_sdk` and the adapter's `_process`, or None without the extra."""
    try:
        import claude_agent_sdk

        from ..claude import _process
    except ImportError:
        return None
    return claude_agent_sdk, _process


async def _check_cli(
    modules: tuple[ModuleType, ModuleType] | None,
    explicit: str | None,
    source: str | None,
    timeout: float,
) -> Check:
    name, title = "claude_cli", "Claude Code CLI"
    pinned = _pinned_sdk() or "its pinned version"
    if modules is None:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: claude-agent-sdk is not installed",
            fix="pip install 'dex-agents[claude]' (its claude-agent-sdk bundles the "
            "CLI)",
        )
    claude_agent_sdk, _process = modules
    bundled = Path(str(claude_agent_sdk.__file__)).parent / "_bundled" / "claude"
    try:
        path = _process.real_cli_path(explicit)
    except claude_agent_sdk.CLINotFoundError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: not found (claude-agent-sdk {claude_agent_sdk.__version__} "
            "bundles none, and no `claude` is on PATH)",
            fix=f"pip install --force-reinstall 'claude-agent-sdk=={pinned}' (its "
            "wheel bundles the CLI), or pass `--cli` (the agent's `cli_path`) the "
            "path of a Claude Code CLI",
        )
    if source is None:
        variable = str(getattr(_process, "CLI_PATH_VARIABLE", "DEX_AGENTS_CLAUDE_CLI"))
        if Path(path) == bundled:
            source = f"bundled with claude-agent-sdk {claude_agent_sdk.__version__}"
        elif os.environ.get(variable):
            source = f"${variable}"
        else:
            source = "`claude` on PATH"
    details: dict[str, Any] = {
        "path": path,
        "source": source,
        "version": None,
        "tested_version": TESTED_CLI_VERSION,
    }
    if source == "--cli":
        instead = "leave `--cli` out to use the bundled one"
    elif source.startswith("cli_path"):
        instead = (
            "point the agent's `cli_path` at a Claude Code CLI, or leave it unset to "
            "use the bundled one"
        )
    else:
        instead = (
            f"pip install --force-reinstall 'claude-agent-sdk=={pinned}' (its wheel "
            "bundles the CLI)"
        )
    if not Path(path).is_file():
        return Check(
            name=name,
            status="fail",
            text=f"{title}: not found at {path} ({source})",
            fix=f"pass `--cli` the path of a Claude Code CLI, or {instead}"
            if source == "--cli"
            else instead,
            details=details,
        )
    try:
        done = await _in_thread(
            lambda: _version_of(path, timeout), timeout + _GRACE / 2
        )
    except (subprocess.TimeoutExpired, TimeoutError):
        return Check(
            name=name,
            status="fail",
            text=f"{title} at {path} ({source}): `--version` gave no answer within "
            f"{timeout:g} s",
            fix=f"check that it is a Claude Code CLI (it prints its version at "
            f"once), or {instead}",
            details=details,
        )
    except OSError as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title} at {path} ({source}) cannot run: {err.strerror or err}",
            fix=f"make it executable (chmod +x), or {instead}",
            details=details,
        )
    printed = (done.stdout or done.stderr).strip()
    match = re.search(r"\b\d+\.\d+\.\d+\S*", done.stdout)
    if done.returncode != 0 or match is None:
        said = f"exited {done.returncode}" if done.returncode else "printed no version"
        shown = f": {one_line(printed)[:160]}" if printed else ""
        return Check(
            name=name,
            status="fail",
            text=f"{title} at {path} ({source}): `--version` {said}{shown}",
            fix=f"check that it is a Claude Code CLI, or {instead}",
            details=details,
        )
    version = match.group(0)
    details["version"] = version
    if version != TESTED_CLI_VERSION:
        return Check(
            name=name,
            status="warn",
            text=f"{title} {version} ({source}): {path}; the adapter is tested with "
            f"{TESTED_CLI_VERSION}",
            fix=f"if sessions misbehave, run {TESTED_CLI_VERSION}, the CLI bundled "
            f"with claude-agent-sdk {pinned}: {instead}",
            details=details,
        )
    return Check(
        name=name,
        status="pass",
        text=f"{title} {version} ({source}): {path}",
        details=details,
    )


def _version_of(path: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """`path --version`, offline (no update check), killed after `timeout`."""
    env = {**os.environ, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    return subprocess.run(
        [path, "--version"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


# -- model credentials -----------------------------------------------------------

_PROVIDERS = (
    ("CLAUDE_CODE_USE_BEDROCK", "Amazon Bedrock", "AWS"),
    ("CLAUDE_CODE_USE_VERTEX", "Google Vertex AI", "Google Cloud"),
    ("CLAUDE_CODE_USE_FOUNDRY", "Microsoft Foundry", "Azure"),
)
"""Variables that make the CLI call a cloud provider, with that cloud's credentials."""
_TOKENS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN")
"""Variables the CLI takes a credential of the Anthropic API from, in its order."""
_FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})


async def _check_credentials() -> Check:
    name, title = "credentials", "model credentials"
    env = os.environ
    base_url = env.get("ANTHROPIC_BASE_URL", "").strip()
    for variable, provider, cloud in _PROVIDERS:
        if env.get(variable, "").strip().lower() not in _FALSE_WORDS:
            return Check(
                name=name,
                status="pass",
                text=f"{title}: {provider} ({variable}={env[variable]}), with "
                f"{cloud}'s credentials (not tried)",
                details={"source": variable},
            )
    if base_url and env.get("ANTHROPIC_API_KEY") == SCRIPTED_MODEL_API_KEY:
        return Check(
            name=name,
            status="pass",
            text=f"{title}: the scripted model at {base_url} (dex_agents.testing; no "
            "real model answers)",
            details={"source": "scripted_model", "base_url": base_url},
        )
    for variable in _TOKENS:
        if env.get(variable, "").strip():
            at = f", for ANTHROPIC_BASE_URL {base_url}" if base_url else ""
            return Check(
                name=name,
                status="pass",
                text=f"{title}: {variable} is set{at} (not tried: a doctor calls no "
                "model)",
                details={"source": variable, "base_url": base_url or None},
            )
    fix = (
        "export ANTHROPIC_API_KEY=<your key> where the worker runs (or "
        "ANTHROPIC_AUTH_TOKEN, or CLAUDE_CODE_USE_BEDROCK=1 / CLAUDE_CODE_USE_VERTEX=1 "
        f"with that cloud's credentials); without one, only `{prog()} dev` and "
        f"`{prog()} demo` run, on the scripted model"
    )
    config = Path(env.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    login = config / ".credentials.json"
    if login.is_file():
        return Check(
            name=name,
            status="warn",
            text=f"{title}: none in the environment; the CLI's stored login "
            f"({login}) may answer",
            fix=fix,
            details={"source": "login"},
        )
    return Check(
        name=name,
        status="fail",
        text=f"{title}: none in the environment (no ANTHROPIC_API_KEY)",
        fix=fix,
        details={"source": None},
    )


# -- Temporal --------------------------------------------------------------------

_CLUSTER_FIX = (
    "check `--address` (DEX_AGENTS_TEMPORAL_ADDRESS) and that Temporal runs there, "
    "with DEX_AGENTS_TEMPORAL_TLS / DEX_AGENTS_TEMPORAL_API_KEY if it needs them; "
    "or leave `--address` out for the embedded dev server, which `{prog} dev` starts"
)


async def _check_temporal(target: Target, timeout: float) -> Check:
    name = "temporal"
    try:
        config = EngineConfig.from_env()
    except UserError as err:
        return _split("temporal", "Temporal", str(err))
    address = target.address or (config.address if config else None)
    details: dict[str, Any] = {
        "address": address,
        "namespace": target.namespace,
        "embedded": address is None,
        "state_dir": str(target.state_dir) if address is None else None,
    }
    title = f"Temporal at {address}" if address else "Temporal"
    try:
        async with asyncio.timeout(timeout):
            conn = await connect(target)
    except CommandError as err:
        return _split(name, title, err.format_message(), details)
    except (TimeoutError, DexAgentsError, RuntimeError, OSError) as err:
        said = (
            f"no answer within {timeout:g} s" if isinstance(err, TimeoutError) else ""
        )
        return Check(
            name=name,
            status="fail",
            text=f"{title} (namespace {target.namespace}): {said or _reason(err)}",
            fix=_CLUSTER_FIX.format(prog=prog())
            if address
            else f"start it with `{prog()} dev`",
            details=details,
        )
    details["address"] = conn.address
    title = f"Temporal at {conn.address}, namespace {conn.namespace}"
    try:
        await conn.client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=conn.namespace),
            timeout=timedelta(seconds=timeout),
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return Check(
                name=name,
                status="fail",
                text=f"{title}: the namespace does not exist",
                fix="pass `--namespace` (DEX_AGENTS_TEMPORAL_NAMESPACE) one that "
                "does, or create it: `temporal operator namespace create --namespace "
                f"{conn.namespace} --address {conn.address}`",
                details=details,
            )
        if err.status != RPCStatusCode.PERMISSION_DENIED:  # a worker needs no describe
            return Check(
                name=name,
                status="fail",
                text=f"{title}: Temporal answered {err.status.name}: {err.message}",
                fix=_CLUSTER_FIX.format(prog=prog()),
                details=details,
            )
    return Check(
        name=name, status="pass", text=f"{title}: {conn.where}", details=details
    )


def _reason(err: BaseException) -> str:
    """Why a connection failed, in a few words rather than a transport's dump."""
    cause = err.__cause__ or err
    if isinstance(cause, TimeoutError):
        return "no answer"
    text = str(cause)
    lowered = text.lower()
    for needle, said in (
        ("connection refused", "connection refused (nothing listens there)"),
        ("dns error", "the host name does not resolve"),
        ("failed to lookup address", "the host name does not resolve"),
        ("certificate", "TLS failed (certificate)"),
        ("connection reset", "the connection was reset (TLS expected?)"),
        ("unauthenticated", "refused the credentials (API key?)"),
    ):
        if needle in lowered:
            return said
    return one_line(text)[:200]


def _split(
    name: str, title: str, message: str, details: dict[str, Any] | None = None
) -> Check:
    """A failed check from a message that says `what; what to do`."""
    what, _, fix = message.partition("; ")
    return Check(
        name=name,
        status="fail",
        text=f"{title}: {what}",
        fix=fix or None,
        details=details or {},
    )


# -- the runtime store -----------------------------------------------------------

_STORE_FIX = "pass `--store` (or `--state-dir`) a place the worker can write"
_PROBE_TABLE = "event_cursors"
"""The PostgreSQL store's simplest table; the probe's row never commits."""


async def _check_store(target: Target, timeout: float) -> Check:
    location = target.store
    if is_database_url(location):
        return await _check_database(location, timeout)
    if "://" in location:
        # Opening refuses an unknown scheme before it connects anywhere.
        try:
            await (await open_runtime_store(location)).close()
        except UserError as err:
            return _split("runtime_store", f"runtime store {location}", str(err))
    path = Path(location)
    return await _in_thread(lambda: _probe_sqlite(path, timeout), timeout)


def _probe_sqlite(path: Path, timeout: float) -> Check:
    """Whether the worker can write the SQLite store at `path` (or create it there)."""
    name, title = "runtime_store", f"runtime store {path}"
    details: dict[str, Any] = {"location": str(path), "kind": "sqlite"}

    def failed(text: str, fix: str = _STORE_FIX) -> Check:
        return Check(
            name=name, status="fail", text=f"{title}: {text}", fix=fix, details=details
        )

    try:
        if path.exists():
            if not path.is_file():
                return failed("it is a directory, not a SQLite file")
            try:
                _rolled_back_write(path, timeout)
            except (OSError, sqlite3.Error) as err:
                return failed(
                    f"cannot write it: {_os_reason(err)}",
                    f"fix the permissions of it and of {path.parent} (SQLite writes a "
                    f"journal next to it), or {_STORE_FIX}",
                )
            details["exists"] = True
            return Check(
                name=name,
                status="pass",
                text=f"{title}: writable (SQLite)",
                details=details,
            )
        existing = path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            return failed(f"cannot be created: {existing} is a file, not a directory")
        try:
            with tempfile.TemporaryDirectory(
                prefix=".dex-agents-doctor-", dir=existing
            ) as probe:
                _rolled_back_write(Path(probe) / "probe.sqlite", timeout)
        except (OSError, sqlite3.Error) as err:
            return failed(
                f"cannot be created: cannot write {existing}: {_os_reason(err)}",
                f"fix the permissions of {existing}, or {_STORE_FIX}",
            )
    except OSError as err:
        return failed(f"cannot be reached: {_os_reason(err)}")
    details["exists"] = False
    return Check(
        name=name,
        status="pass",
        text=f"{title}: not there yet; the worker creates it ({existing} can be "
        "written)",
        details=details,
    )


def _rolled_back_write(path: Path, timeout: float) -> None:
    """Write a table and a row into the SQLite file `path`, read it, and roll it back.

    Raises:
        sqlite3.Error: the file cannot be written (or read back).
    """
    table = f"dex_agents_doctor_{uuid.uuid4().hex[:12]}"
    token = uuid.uuid4().hex
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(f"CREATE TABLE {table} (token TEXT)")
            conn.execute(f"INSERT INTO {table} VALUES (?)", (token,))
            row = conn.execute(f"SELECT token FROM {table}").fetchone()
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()
    if row != (token,):
        raise sqlite3.DatabaseError(f"read back {row!r} instead of what was written")


def _os_reason(err: OSError | sqlite3.Error) -> str:
    if isinstance(err, OSError):
        where = f" ({err.filename})" if err.filename else ""
        return f"{err.strerror or err}{where}"
    return str(err)


async def _check_database(dsn: str, timeout: float) -> Check:
    """Open the PostgreSQL store as a worker does, then write a row that never commits."""
    name = "runtime_store"
    title = f"runtime store {redacted_store(dsn)}"
    details: dict[str, Any] = {"location": redacted_store(dsn), "kind": "postgresql"}
    try:
        store = await open_runtime_store(dsn)
    except ImportError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: the `postgres` extra is not installed",
            fix="pip install 'dex-agents[postgres]'",
            details=details,
        )
    except UserError as err:
        return _split(name, title, str(err), details)
    try:
        title = f"runtime store {store_label(store)}"
    finally:
        await store.close()
    import psycopg

    probe = f"dex-agents-doctor-{uuid.uuid4().hex}"
    try:
        conn = await psycopg.AsyncConnection.connect(
            dsn, connect_timeout=max(1, round(timeout))
        )
        async with conn, conn.transaction(force_rollback=True):
            await conn.execute(
                "INSERT INTO dex_agents_event_cursors (session_id, last_cursor) "
                "VALUES (%s, 0)",
                (probe,),
            )
            cursor = await conn.execute(
                "SELECT session_id FROM dex_agents_event_cursors WHERE session_id = %s",
                (probe,),
            )
            row = await cursor.fetchone()
    except psycopg.Error as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: cannot write: {one_line(str(err))}",
            fix="GRANT this role SELECT, INSERT, UPDATE and DELETE on the "
            f"dex_agents_* tables, or {_STORE_FIX}",
            details=details,
        )
    if row is None or row[0] != probe:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: a written row did not read back",
            fix=_STORE_FIX,
            details=details,
        )
    return Check(
        name=name,
        status="pass",
        text=f"{title}: writable (PostgreSQL)",
        details=details,
    )


# -- the media store -------------------------------------------------------------


async def _check_media(flows: Sequence[AgentSessionFlow], timeout: float) -> Check:
    name, title = "media_store", "media store"
    if not flows:
        return Check(
            name=name,
            status="skip",
            text=f"{title}: not checked: it is part of an agent's definition; pass "
            "`--agent` to check it",
        )
    stores: list[tuple[AgentSessionFlow, MediaStore]] = []
    for flow in flows:
        store = getattr(_definition(flow), "media_store", None)
        if store is not None:
            stores.append((flow, store))
    if not stores:
        types = ", ".join(flow.flow_type for flow in flows)
        return Check(
            name=name,
            status="pass",
            text=f"{title}: none configured (flow {types} takes no images)",
            details={"stores": []},
        )
    results = [await _probe_media(flow, store, timeout) for flow, store in stores]
    for status in ("fail", "warn"):
        for result in results:
            if result.status == status:
                return result
    return Check(
        name=name,
        status="pass",
        text="; ".join(result.text for result in results),
        details={"stores": [result.details for result in results]},
    )


async def _probe_media(
    flow: AgentSessionFlow, store: MediaStore, timeout: float
) -> Check:
    """Whether `store` answers, without storing anything in it."""
    name = "media_store"
    with contextlib.suppress(ImportError):
        from ..s3 import S3MediaStore

        if isinstance(store, S3MediaStore):
            return await _probe_s3(flow, store, timeout)
    if isinstance(store, InMemoryMediaStore):
        return Check(
            name=name,
            status="warn",
            text=f"media store of flow {flow.flow_type}: in memory: images that a "
            "client in another process uploads are not there",
            fix="use a `DirectoryMediaStore` or an `S3MediaStore` that every worker "
            "and client of the session share",
            details={"flow_type": flow.flow_type, "kind": "memory"},
        )
    if isinstance(store, DirectoryMediaStore):
        return await _in_thread(lambda: _probe_directory(flow, store.path), timeout)
    # Any other store: a reference it cannot hold must be a KeyError, not a failure.
    kind = type(store).__name__
    title = f"media store of flow {flow.flow_type} ({kind})"
    details = {"flow_type": flow.flow_type, "kind": kind}
    never_stored = image_reference(
        f"dex-agents doctor {uuid.uuid4().hex}".encode(), "image/png"
    )
    try:
        async with asyncio.timeout(timeout):
            await store.get_image(never_stored)
    except KeyError:
        return Check(
            name=name, status="pass", text=f"{title}: answers", details=details
        )
    except TimeoutError:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: no answer within {timeout:g} s",
            fix="check that the service it uses runs and can be reached",
            details=details,
        )
    except Exception as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: {type(err).__name__}: {one_line(str(err))}",
            fix="check that the service it uses runs and can be reached",
            details=details,
        )
    return Check(name=name, status="pass", text=f"{title}: answers", details=details)


def _probe_directory(flow: AgentSessionFlow, path: Path) -> Check:
    """Whether a `DirectoryMediaStore`'s directory can be written (or created)."""
    name = "media_store"
    title = f"media store of flow {flow.flow_type}: directory {path}"
    details = {"flow_type": flow.flow_type, "kind": "directory", "path": str(path)}
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return Check(
            name=name,
            status="fail",
            text=f"{title}: {existing} is a file, not a directory",
            fix="give the `DirectoryMediaStore` a directory every worker can write",
            details=details,
        )
    try:
        with tempfile.NamedTemporaryFile(prefix=".dex-agents-doctor-", dir=existing):
            pass
    except OSError as err:
        return Check(
            name=name,
            status="fail",
            text=f"{title}: cannot write {existing}: {_os_reason(err)}",
            fix=f"fix the permissions of {existing}, or give the "
            "`DirectoryMediaStore` another directory",
            details=details,
        )
    return Check(name=name, status="pass", text=f"{title}: writable", details=details)


async def _probe_s3(flow: AgentSessionFlow, store: Any, timeout: float) -> Check:
    """`head_bucket` with the store's own client: its credentials, region, endpoint."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    name = "media_store"
    client: Any = store._client  # pyright: ignore[reportPrivateUsage]
    bucket = str(store.bucket)
    endpoint = str(client.meta.endpoint_url)
    title = f"media store of flow {flow.flow_type}: S3 bucket {bucket!r} at {endpoint}"
    details = {
        "flow_type": flow.flow_type,
        "kind": "s3",
        "bucket": bucket,
        "endpoint_url": endpoint,
    }

    def failed(text: str, fix: str) -> Check:
        return Check(
            name=name, status="fail", text=f"{title}: {text}", fix=fix, details=details
        )

    try:
        await _in_thread(lambda: client.head_bucket(Bucket=bucket), timeout)
    except TimeoutError:
        return failed(
            f"no answer within {timeout:g} s",
            "check the endpoint (`endpoint_url`) and that the network reaches it",
        )
    except NoCredentialsError:
        return failed(
            "no AWS credentials",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) where "
            "the worker runs, or give the `S3MediaStore` a client with credentials",
        )
    except EndpointConnectionError as err:
        return failed(
            f"cannot connect ({err})",
            "check the endpoint (`endpoint_url` of the `S3MediaStore`) and that the "
            "S3 service runs there",
        )
    except ClientError as err:
        code = str(err.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            return failed(
                "the bucket does not exist",
                f"create it (`aws s3 mb s3://{bucket}`), or name an existing one in "
                "the `S3MediaStore`",
            )
        if code in ("403", "AccessDenied", "Forbidden", "SignatureDoesNotMatch"):
            return failed(
                f"access denied ({code})",
                "check the AWS credentials where the worker runs, and give them "
                f"s3:ListBucket, s3:GetObject and s3:PutObject on {bucket}",
            )
        return failed(f"S3 answered {code}: {err}", "check the bucket and credentials")
    except BotoCoreError as err:
        return failed(
            f"{type(err).__name__}: {err}",
            "check the endpoint, the region and the AWS credentials",
        )
    return Check(name=name, status="pass", text=f"{title}: reachable", details=details)
