"""Failures of the machine, not of the command: each is one line of advice, not a bug report.

A reader that leaves early (`| head`) and a state directory that cannot be
written used to end in "unexpected ...; please report it".
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dex_agents.session._events import EventRecord
from dex_agents.stores import SQLiteRuntimeStore
from support.cli_harness import DEX_AGENTS

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def _store_with_events(path: Path, session_id: str, count: int) -> None:
    store = await SQLiteRuntimeStore.open(path)
    await store.append_events(
        [
            EventRecord(
                session_id=session_id,
                turn_id="turn-1",
                step_execution_id="turn-1/run_model/1",
                attempt=1,
                seq=i,
                type="text_delta",
                data={"text": f"word {i} " * 10},
            )
            for i in range(count)
        ]
    )
    await store.close()


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "view"])
async def test_a_reader_that_leaves_early_ends_the_command_quietly(
    tmp_path: Path, as_json: bool
) -> None:
    store = tmp_path / "runtime.sqlite"
    await _store_with_events(store, "piped-session", 5000)  # far more than a pipe holds
    json_flag = "--json" if as_json else ""
    # `events | head -n 1`, as a shell runs it; the command's stderr and status kept.
    script = (
        f'"$0" events piped-session {json_flag} --store "$1" --state-dir "$2" '
        '2>"$3" | head -n 1; echo "${PIPESTATUS[0]}" >"$4"'
    )
    err, code = tmp_path / "stderr", tmp_path / "status"
    args = [DEX_AGENTS, str(store), str(tmp_path / "state"), str(err), str(code)]
    shown = await asyncio.to_thread(
        subprocess.run,
        ["bash", "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.stdout.count("\n") == 1 and "word 0" in shown.stdout, shown.stdout
    stderr = err.read_text()
    assert "please report it" not in stderr and "Traceback" not in stderr, stderr
    assert stderr == "", stderr
    assert code.read_text().strip() == "1"


def _read_only(directory: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run `dex-agents ARGS` where `directory` cannot be written.

    As root, permissions do not stop a write, so the directory is mounted
    read-only in a mount namespace of the command's own (gone when it exits).
    """
    command = [DEX_AGENTS, *args]
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=60)
        finally:
            directory.chmod(0o755)
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without `unshare` to mount a read-only directory")
    probe = subprocess.run(
        [unshare, "--mount", "sh", "-c", f"mount --bind -o ro {directory} {directory}"],
        capture_output=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a read-only directory here: {probe.stderr!r}")
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return subprocess.run(
        [unshare, "--mount", "sh", "-c", script, str(directory), *command],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_a_state_directory_that_cannot_be_written_says_so(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    await (await SQLiteRuntimeStore.open(state / "runtime.sqlite")).close()

    cases = {
        # SQLite cannot open its journal next to the store.
        (
            "sessions",
            "--state-dir",
            str(state),
        ): f"cannot write '{state}/runtime.sqlite'",
        (
            "events",
            "s",
            "--state-dir",
            str(state),
        ): f"cannot write '{state}/runtime.sqlite'",
        # `dev` cannot create a directory, nor its lock file: the command's words,
        # not the library's (`--state-dir`, not `state_dir=`).
        ("dev", "--state-dir", str(state / "sub")): "pass another `--state-dir`",
        ("dev", "--state-dir", str(state)): f"cannot write '{state}/",
    }
    for args, fragment in cases.items():
        result = await asyncio.to_thread(_read_only, state, list(args))
        assert result.returncode == 1, (args, result.stderr)
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("error: "), line
        assert fragment in line, (args, line)
        assert "please report it" not in line and "state_dir=" not in line, line


async def test_advice_names_the_command_as_it_was_typed(tmp_path: Path) -> None:
    bin_dir = str(Path(DEX_AGENTS).parent)
    typed = os.path.relpath(
        DEX_AGENTS, tmp_path
    )  # e.g. ../../work/.venv/bin/dex-agents
    args = ["show", "s", "--state-dir", str(tmp_path / "none")]
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p != bin_dir
    )
    off_path = subprocess.run(
        [typed, *args],
        cwd=tmp_path,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert off_path.returncode == 1, off_path.stderr
    assert f"start one with `{typed} dev --agent module:flow " in off_path.stderr
    on_path = subprocess.run(
        ["dex-agents", *args],
        cwd=tmp_path,
        env={**os.environ, "PATH": os.pathsep.join([bin_dir, path])},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert on_path.returncode == 1, on_path.stderr
    assert "start one with `dex-agents dev --agent module:flow " in on_path.stderr


_WITHOUT = """
import sys
from importlib.abc import MetaPathFinder

MISSING = sys.argv.pop(1).split(",")

class Missing(MetaPathFinder):
    # An extra that is not installed: its modules cannot be imported.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in MISSING:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
from dex_agents.cli._app import main
main()
"""


def _without(
    modules: str, args: list[str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """`dex-agents ARGS` as installed without the packages `modules` (comma-separated)."""
    python = Path(DEX_AGENTS).parent / "python"
    return subprocess.run(
        [str(python), "-c", _WITHOUT, modules, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_postgres_store_without_the_extra_says_what_to_install(
    tmp_path: Path,
) -> None:
    """It said "unexpected ImportError ... please report it"."""
    done = _without(
        "psycopg,psycopg_pool",
        ["sessions", "--store", "postgresql://agents@127.0.0.1:1/agents"],
        tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == (
        "error: the PostgreSQL runtime store needs psycopg: "
        'pip install "dex-agents[postgres]"\n'
    )


def test_serve_without_the_web_extra_is_listed_and_says_what_to_install(
    tmp_path: Path,
) -> None:
    """It was "No such command 'serve'"."""
    listed = _without("fastapi", ["--help"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "serve" in listed.stdout
    done = _without("fastapi", ["serve", "--tokens-file", "t.toml"], tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == (
        'error: `dex_agents.web` needs the `web` extra: pip install "dex-agents[web]"\n'
    )
