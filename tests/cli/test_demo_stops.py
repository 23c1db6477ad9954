"""`dex-agents demo` stopped midway leaves nothing behind and says so in one line.

Ctrl-C printed `Aborted!` and then `Task exception was never retrieved` (the
turn's wait, left to fail once the server was gone); SIGTERM or SIGKILL left its
worker process running for minutes, taking the turns of the next run. Now a
signal stops every process the demo started, and a worker whose parent is gone
stops by itself.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.cli_harness import DEX_AGENTS, Term, offline_env, spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

_WORKER_MODULE = b"dex_agents.temporal._worker_process"
_NOISE = ("Traceback", "exception was never retrieved", "Aborted!", "was destroyed")


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name; None if no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rpartition(")")[2].split()


def _worker_children(parent: int) -> list[int]:
    """PIDs of live `_worker_process` processes whose parent is `parent`."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if fields and int(fields[1]) == parent and _WORKER_MODULE in command:
            found.append(int(entry.name))
    return found


def _gone(pid: int) -> bool:
    """The process has exited (a zombie that nobody reaped yet counts as exited)."""
    fields = _stat(pid)
    return fields is None or fields[0] in ("Z", "X")


def _poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.1)


def _stop_left_server(state: Path) -> None:
    """SIGKILL the Temporal server a killed demo may have left (not under test here)."""
    record = state / "engine.json"
    if record.exists():
        pid = int(json.loads(record.read_text())["pid"])
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def _pid(demo: Term) -> int:
    assert demo.child.pid is not None
    return demo.child.pid


def _start_demo(tmp_path: Path) -> tuple[Term, int]:
    """`dex-agents demo` in a terminal, once its worker runs; and the worker's PID."""
    demo = spawn(["demo"], offline_env(tmp_path / "state"), tmp_path)
    printed = int(demo.expect(r"worker: pid (\d+), agent ").group(1))
    assert _worker_children(_pid(demo)) == [printed]
    return demo, printed


@pytest.mark.timeout(180)
def test_ctrl_c_during_a_turn_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    demo, worker = _start_demo(tmp_path)
    try:
        demo.expect("you:.*Order 7 arrived broken")
        demo.expect("lookup_order", timeout=60)  # the turn runs: its tool started
        demo.sendintr()
        assert demo.wait_exit(timeout=60) == 130, demo.text
    finally:
        if not _gone(worker):
            os.kill(worker, signal.SIGKILL)
    text = demo.text
    for noise in _NOISE:
        assert noise not in text, text
    # After the terminal's `^C`, one line: what stopped and how to play it again.
    assert "^C" in text, text
    (line,) = [ln for ln in text.rpartition("^C")[2].splitlines() if ln.strip()]
    assert re.fullmatch(
        r"stopped \(Ctrl-C\) before the demo finished; `\S+ demo` plays it again "
        r"from the start",
        line,
    ), line
    assert _gone(worker)  # stopped by the demo before it exited
    assert not (tmp_path / "state" / "engine.json").exists()  # and its server
    # The terminal's Ctrl-C reached the worker too (one process group): it
    # stopped as on SIGTERM, and its log holds no KeyboardInterrupt traceback.
    log = (tmp_path / "state" / "worker-1.log").read_text()
    assert "Traceback" not in log and "KeyboardInterrupt" not in log, log


@pytest.mark.timeout(180)
def test_sigterm_stops_the_worker_then_exits_143(tmp_path: Path) -> None:
    demo, worker = _start_demo(tmp_path)
    try:
        demo.expect("you:")
        os.kill(_pid(demo), signal.SIGTERM)
        assert demo.wait_exit(timeout=60) == 143, demo.text
    finally:
        if not _gone(worker):
            os.kill(worker, signal.SIGKILL)
    for noise in _NOISE:
        assert noise not in demo.text, demo.text
    assert "stopped (SIGTERM) before the demo finished" in demo.text
    assert _gone(worker)
    assert not (tmp_path / "state" / "engine.json").exists()


@pytest.mark.timeout(180)
def test_a_worker_stops_once_the_demo_that_started_it_is_killed(
    tmp_path: Path,
) -> None:
    # Without a terminal (CI, `nohup`, a service): no SIGHUP reaches the worker
    # when the demo dies, so only the worker itself can notice.
    out = tmp_path / "demo.out"
    with out.open("wb") as sink:
        demo = subprocess.Popen(
            [DEX_AGENTS, "demo"],
            cwd=tmp_path,
            env=offline_env(tmp_path / "state"),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    worker = 0
    try:
        _poll(
            lambda: "you:" in out.read_text(errors="replace"),
            90,
            "the demo did not start its first turn",
        )
        (worker,) = _worker_children(demo.pid)
        # SIGKILL: the demo can stop nothing; the worker notices it is orphaned.
        demo.kill()
        demo.wait(timeout=30)
        _poll(lambda: _gone(worker), 60, f"the orphaned worker {worker} did not stop")
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        if worker and not _gone(worker):
            os.kill(worker, signal.SIGKILL)
        _stop_left_server(tmp_path / "state")
    log = (tmp_path / "state" / "worker-1.log").read_text()
    assert f"the process that started this worker (pid {demo.pid}) is gone" in log
