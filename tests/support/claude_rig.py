"""The README's support agent on the dev server, the real CLI, the scripted API."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import pytest_asyncio

from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing import MockMessagesApi, WorkerProcess
from dex_agents.testing._hermetic import hermetic_cli_env
from dex_agents.testing._refusing_proxy import RefusingProxy
from dex_agents.testing._worker_process import WorkerProcessConfig

EXAMPLES = Path(__file__).parents[2] / "examples"


@dataclass(kw_only=True)
class ClaudeRig:
    api: MockMessagesApi
    proxy: RefusingProxy
    env: dict[str, str]
    tmp: Path
    example: ModuleType


def worker_process(
    rig: ClaudeRig, engine: EmbeddedEngine, flow_ref: str, module_dir: Path
) -> WorkerProcess:
    """A killable worker subprocess serving `flow_ref` (found in `module_dir`)."""
    env = dict(rig.env)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(module_dir), os.environ.get("PYTHONPATH", "")]
    )
    return WorkerProcess(
        WorkerProcessConfig(
            address=engine.address,
            namespace=engine.namespace,
            store_path=str(rig.tmp / "runtime.sqlite"),
            flow_ref=flow_ref,
        ),
        rig.tmp,
        env=env,
    )


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def claude_rig(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli_path: Path,
    api: MockMessagesApi,
    proxy: RefusingProxy,
) -> AsyncIterator[ClaudeRig]:
    """The example agent's module, with its CLI pointed at the scripted Messages API."""
    env = hermetic_cli_env(tmp_path, api=api, proxy=proxy)
    env["DEX_AGENTS_EXAMPLE_DB"] = str(tmp_path / "support.sqlite")
    env["DEX_AGENTS_EXAMPLE_WORKDIR"] = str(tmp_path / "agents")
    for name in list(os.environ):
        if name not in env:
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    sys.modules.pop("support_agent", None)
    support_agent = importlib.import_module("support_agent")

    yield ClaudeRig(api=api, proxy=proxy, env=env, tmp=tmp_path, example=support_agent)
    assert api.unserved == [], api.unserved


@pytest.fixture
def example_worker(
    claude_rig: ClaudeRig, engine: EmbeddedEngine
) -> Iterator[WorkerProcess]:
    """A worker subprocess serving the example agent, on the rig's store; killable."""
    with worker_process(claude_rig, engine, "support_agent:flow", EXAMPLES) as process:
        yield process
