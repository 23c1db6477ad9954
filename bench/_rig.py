"""The shared set-up: a temporary state directory, the engine, the scripted API.

Every figure runs against the same embedded dev server and the same scripted
Messages API, in a process whose environment is hermetic: the CLI it starts
cannot reach a real model, a real account or the user's `~/.claude`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing._hermetic import hermetic_cli_env
from dex_agents.testing._refusing_proxy import RefusingProxy


class BenchError(RuntimeError):
    """A run did not do what it should; its time would measure something else."""


class Progress:
    """Progress lines on stderr, so stdout carries only the table."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def log(self, message: str) -> None:
        """Print one progress line with the time since the start."""
        print(f"[bench {self.elapsed:6.1f} s] {message}", file=sys.stderr, flush=True)


@dataclass(kw_only=True)
class Rig:
    """What every figure shares."""

    tmp: Path
    api: MockMessagesApi
    proxy: RefusingProxy
    engine: EmbeddedEngine
    client: Client
    progress: Progress
    quick: bool
    """Fewer runs and sessions: for trying the bench out, not for numbers."""

    def directory(self, name: str) -> Path:
        """A fresh directory under the run's temporary directory."""
        path = self.tmp / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def check_hermetic(self) -> list[str]:
        """Requests that left the script: any of them puts the numbers in doubt."""
        problems = [
            f"the scripted API could not serve {r.method} {r.path}"
            for r in self.api.unserved
        ]
        problems += [
            f"something tried to leave the machine: {a}" for a in self.proxy.attempts
        ]
        return problems


@contextlib.asynccontextmanager
async def open_rig(progress: Progress, *, quick: bool) -> AsyncIterator[Rig]:
    """Start the scripted API, the refusing proxy and the engine; clean up after."""
    with tempfile.TemporaryDirectory(prefix="dex-agents-bench-") as name:
        tmp = Path(name)
        async with MockMessagesApi() as api, RefusingProxy() as proxy:
            env = hermetic_cli_env(tmp, api=api, proxy=proxy)
            with _environ(env):
                async with EmbeddedEngine(state_dir=tmp / "state") as engine:
                    progress.log(f"engine up on {engine.address}, state in {tmp}")
                    yield Rig(
                        tmp=tmp,
                        api=api,
                        proxy=proxy,
                        engine=engine,
                        client=await engine.client(),
                        progress=progress,
                        quick=quick,
                    )


@contextlib.contextmanager
def _environ(env: Mapping[str, str]) -> Iterator[None]:
    """Make `env` the whole process environment for the block.

    The SDK merges `ClaudeAgentOptions.env` over `os.environ`, so a variable
    only removed from the options would still reach the CLI; the worker
    subprocess inherits it too.
    """
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
