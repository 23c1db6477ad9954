"""The support-agent rig shared by the durable Claude tests (a uniquely named module)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dex_agents.temporal import EmbeddedEngine
from dex_agents.testing import MockMessagesApi, WorkerProcess, WorkerProcessConfig
from dex_agents.testing._refusing_proxy import RefusingProxy

EXAMPLES = Path(__file__).parents[2] / "examples"


@dataclass(kw_only=True)
class ClaudeRig:
    api: MockMessagesApi
    proxy: RefusingProxy
    env: dict[str, str]
    tmp: Path
    example: ModuleType


def cli_processes_in(cwd: Path) -> list[int]:
    """PIDs of live processes whose working directory is `cwd` (the session's CLI)."""
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cwd").readlink() == cwd:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


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
