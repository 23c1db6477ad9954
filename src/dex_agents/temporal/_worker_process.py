"""A session worker in its own process: `dex-agents demo` runs one, tests SIGKILL one mid-Step.

Run as `python -m dex_agents.temporal._worker_process CONFIG.json READY [PARENT]`;
the config names the engine address, namespace, runtime store and the flow (a
`module:attr` reference, as `--agent` takes). `dex_agents.testing.WorkerProcess`
adds the scripted ledger flows of the test kit on top.

The worker never outlives the process that started it (`PARENT`, default its
parent at start): once that one is gone, however it ended (SIGKILL included), the
worker stops as on SIGTERM, gracefully, so it cannot go on taking the turns of
the next run. SIGTERM and SIGINT (a terminal's Ctrl-C reaches the worker too)
stop it gracefully. A watchdog polls `os.getppid()` rather than relying on Linux's
`PR_SET_PDEATHSIG`, which fires when the *thread* that started the worker ends
(the demo starts it from a thread pool's thread), and exists on Linux only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import KW_ONLY, asdict, dataclass, field
from pathlib import Path
from typing import Self


@dataclass(frozen=True, kw_only=True)
class WorkerEndpoint:
    """Where a worker connects: the engine and the runtime store."""

    address: str
    namespace: str
    store_path: str
    """The runtime store: a SQLite file, or a `postgresql://` URL."""


@dataclass(frozen=True, kw_only=True)
class WorkerProcessConfig(WorkerEndpoint):
    """Where the worker connects and what it serves."""

    flow_ref: str
    """`module:attr` (or `path/file.py:attr`) naming an `AgentSessionFlow` to serve."""
    task_queue: str | None = None
    """The queue to poll; None: the flow's own. The demo's own queue keeps a
    `dex-agents dev` serving the same agent on the same server from taking its
    turns (and running its tools with another ledger)."""


@dataclass(eq=False, repr=False)
class WorkerProcess:
    """Starts, kills and restarts a worker subprocess; a context manager that never leaks it."""

    __test__ = False

    config: WorkerProcessConfig
    workdir: Path
    _: KW_ONLY
    env: dict[str, str] | None = None
    """The worker's environment; None: this process's."""
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)
    starts: int = field(default=0, init=False)
    """Workers started so far: each start has its own ready file and log."""

    def start(self) -> None:
        """Start a new worker process; returns once it polls its task queue."""
        self.starts += 1
        path = self.workdir / "worker-config.json"
        path.write_text(json.dumps(asdict(self.config)))
        ready = self.workdir / f"worker-ready-{self.starts}"
        log = (self.workdir / f"worker-{self.starts}.log").open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dex_agents.temporal._worker_process",
                str(path),
                str(ready),
                str(os.getpid()),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env,
        )
        for _ in range(600):
            if ready.exists():
                return
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"worker exited with {self.process.returncode}; see {log.name}"
                )
            time.sleep(0.05)
        raise TimeoutError("the worker did not start within 30 s")

    def kill(self) -> None:
        """SIGKILL the worker: no cleanup, no graceful shutdown."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def restart(self) -> None:
        """Kill the worker and start a new one."""
        self.kill()
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


_PARENT_POLL = 0.25
"""How often the worker checks that the process that started it is alive (seconds)."""


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    """Set `stop` once the worker's parent is no longer `parent` (it died).

    An orphan is adopted by init (or a subreaper), so its parent PID changes.
    """
    while os.getppid() == parent:
        await asyncio.sleep(_PARENT_POLL)
    print(
        f"the process that started this worker (pid {parent}) is gone; stopping",
        flush=True,
    )
    stop.set()


async def _serve(config: WorkerProcessConfig, ready: Path, parent: int) -> None:
    from temporalio.client import Client

    from ..stores._open import open_runtime_store
    from ._converter import data_converter as pydantic_data_converter
    from ._flow_ref import load_flow
    from ._worker import create_worker

    stop = asyncio.Event()
    # SIGINT too: a terminal's Ctrl-C reaches every process of its group, this
    # worker beside the demo that started it; stop as on SIGTERM, not with a
    # KeyboardInterrupt traceback in the log.
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    watchdog = asyncio.create_task(_watch_parent(parent, stop))
    try:
        flow = load_flow(config.flow_ref)
        client = await Client.connect(
            config.address,
            namespace=config.namespace,
            data_converter=pydantic_data_converter,
        )
        store = await open_runtime_store(config.store_path)
        try:
            worker = create_worker(
                client, [flow], store=store, task_queue=config.task_queue
            )
            async with worker:
                ready.write_text(str(os.getpid()))
                await stop.wait()
        finally:
            await store.close()
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)


def main() -> None:
    """Entry point of the worker subprocess."""
    # The parent as the starter saw itself: a starter that died before this
    # line ran has already left the worker to init, and is caught all the same.
    parent = int(sys.argv[3]) if len(sys.argv) > 3 else os.getppid()
    raw = json.loads(Path(sys.argv[1]).read_text())
    asyncio.run(_serve(WorkerProcessConfig(**raw), Path(sys.argv[2]), parent))


if __name__ == "__main__":
    main()
