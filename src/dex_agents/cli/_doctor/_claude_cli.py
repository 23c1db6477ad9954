"""The Claude Code CLI a worker's segments would run, and its version."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from ...temporal._flow import AgentSessionFlow
from .._errors import one_line
from ._check import GRACE, Check, Subject, in_thread

TESTED_CLI_VERSION = "2.1.332"
"""The Claude Code CLI the adapter is tested with: the one claude-agent-sdk
0.2.189 (the top of the `claude` extra's range, and the lock's) bundles. The
adapter's comments describe 2.1.327, which `make cli-compat` finds the same
in every behavior the adapter relies on."""


def cli_choice(
    cli: str | None, flows: Sequence[AgentSessionFlow]
) -> tuple[str | None, str | None]:
    """The CLI named explicitly (`--cli`, else an agent's `cli_path`), and by whom."""
    if cli:
        return cli, "--cli"
    for flow in flows:
        options = getattr(definition(flow), "options", None)
        path = None if callable(options) else getattr(options, "cli_path", None)
        if path:
            return str(path), f"cli_path of flow {flow.flow_type}"
    return None, None


def definition(flow: AgentSessionFlow) -> object | None:
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


def claude_modules() -> tuple[ModuleType, ModuleType] | None:
    """`claude_agent_sdk` and the adapter's `_process`, or None without the extra."""
    try:
        import claude_agent_sdk

        from ...claude import _process
    except ImportError:
        return None
    return claude_agent_sdk, _process


async def check_cli(
    modules: tuple[ModuleType, ModuleType] | None,
    explicit: str | None,
    source: str | None,
    timeout: float,
) -> Check:
    about = Subject(name="claude_cli", title="Claude Code CLI")
    pinned = _pinned_sdk() or "its pinned version"
    if modules is None:
        return about.outcome(
            "fail",
            "claude-agent-sdk is not installed",
            "pip install 'dex-agents[claude]' (its claude-agent-sdk bundles the CLI)",
        )
    claude_agent_sdk, _process = modules
    bundled = Path(str(claude_agent_sdk.__file__)).parent / "_bundled" / "claude"
    try:
        path = _process.real_cli_path(explicit)
    except claude_agent_sdk.CLINotFoundError:
        return about.outcome(
            "fail",
            f"not found (claude-agent-sdk {claude_agent_sdk.__version__} bundles "
            "none, and no `claude` is on PATH)",
            f"pip install --force-reinstall 'claude-agent-sdk=={pinned}' (its "
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
    about.details = {
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
        return about.outcome(
            "fail",
            f"not found at {path} ({source})",
            f"pass `--cli` the path of a Claude Code CLI, or {instead}"
            if source == "--cli"
            else instead,
        )
    at = f" at {path} ({source})"
    try:
        done = await in_thread(lambda: _version_of(path, timeout), timeout + GRACE / 2)
    except (subprocess.TimeoutExpired, TimeoutError):
        return about.outcome(
            "fail",
            f"`--version` gave no answer within {timeout:g} s",
            "check that it is a Claude Code CLI (it prints its version at once), "
            f"or {instead}",
            sep=f"{at}: ",
        )
    except OSError as err:
        return about.outcome(
            "fail",
            f"cannot run: {err.strerror or err}",
            f"make it executable (chmod +x), or {instead}",
            sep=f"{at} ",
        )
    printed = (done.stdout or done.stderr).strip()
    match = re.search(r"\b\d+\.\d+\.\d+\S*", done.stdout)
    if done.returncode != 0 or match is None:
        said = f"exited {done.returncode}" if done.returncode else "printed no version"
        shown = f": {one_line(printed)[:160]}" if printed else ""
        return about.outcome(
            "fail",
            f"`--version` {said}{shown}",
            f"check that it is a Claude Code CLI, or {instead}",
            sep=f"{at}: ",
        )
    version = match.group(0)
    about.details["version"] = version
    about.title += f" {version} ({source})"
    if version != TESTED_CLI_VERSION:
        return about.outcome(
            "warn",
            f"{path}; the adapter is tested with {TESTED_CLI_VERSION}",
            f"if sessions misbehave, run {TESTED_CLI_VERSION}, the CLI bundled "
            f"with claude-agent-sdk {pinned}: {instead}",
        )
    return about.outcome("pass", path)


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
