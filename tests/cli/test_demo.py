"""`dex-agents demo` completes offline and exits 0 (what `make demo` runs)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.cli._agent_ref import load_flow
from dex_agents.cli._demo import EXAMPLE_FLOW, _refund_rows  # pyright: ignore[reportPrivateUsage]
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient
from dex_agents.temporal._converter import data_converter as pydantic_data_converter
from support.cli_harness import offline_env, spawn

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


ROOT = Path(__file__).parents[2]


def _demo(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dex_agents.cli", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


@pytest.mark.timeout(300)
async def test_demo_runs_offline_and_shows_one_refund(tmp_path: Path) -> None:
    out = await asyncio.to_thread(_demo, offline_env(tmp_path / "state"))
    assert out.splitlines()[0].startswith(
        "No ANTHROPIC_API_KEY: using the project's scripted"
    )
    assert "approval needed: create_refund (non_idempotent_write)" in out
    assert "killed (SIGKILL) while the refund waits" in out
    assert "refunds in the ledger: 0" in out
    # The ledger's row on one line, though longer than 80 columns.
    assert re.search(
        r"^refunds in the ledger: 1 \[\('7', 'demo-[^']+'\)\]$", out, re.M
    ), out
    assert "the refund ran exactly once" in out
    # It ends its session (no worker polls the demo's queue after it), and says
    # how to see it again.
    shown = re.search(r"^see it again: \S+ show (demo-\S+) --state-dir ", out, re.M)
    assert shown, out
    store = await SQLiteRuntimeStore.open(tmp_path / "state" / "runtime.sqlite")
    snapshot = await store.get_snapshot(shown.group(1))
    await store.close()
    assert snapshot is not None and snapshot["status"] == "ended", snapshot


@pytest.mark.timeout(300)
def test_demo_runs_beside_a_dev_serving_the_same_agent(tmp_path: Path) -> None:
    # The README's Quickstart leaves `dex-agents dev` serving the example agent in
    # another terminal; a demo run on the same state directory (the same server)
    # must keep its turns, and its refund, to its own worker.
    state = tmp_path / "state"
    dev = spawn(
        ["dev", "--agent", EXAMPLE_FLOW, "--state-dir", str(state)],
        offline_env(state),
        tmp_path,
    )
    try:
        dev.expect("ready", timeout=60)
        out = _demo(offline_env(state))
        assert "the refund ran exactly once" in out
    finally:
        assert dev.stop() == 0, dev.text
    # The dev worker's own ledger (the example's, in the state directory) saw none.
    assert _refund_rows(state / "support.sqlite") == []


@pytest.mark.timeout(300)
async def test_dev_gives_the_agent_code_its_state_directory(tmp_path: Path) -> None:
    # `dev --state-dir S` (no DEX_AGENTS_STATE_DIR): the shipped example keeps its
    # ledger in S, as the Configuration table says, not in ./.dex-agents.
    state = tmp_path / "state"
    env = offline_env(state)
    del env["DEX_AGENTS_STATE_DIR"]
    dev = spawn(
        ["dev", "--agent", EXAMPLE_FLOW, "--state-dir", str(state)], env, tmp_path
    )
    try:
        dev.expect("ready", timeout=60)
        record = json.loads((state / "engine.json").read_text())
        client = await Client.connect(
            record["address"], data_converter=pydantic_data_converter
        )
        store = await SQLiteRuntimeStore.open(state / "runtime.sqlite")
        sessions = SessionClient(client, load_flow(EXAMPLE_FLOW), store)
        await sessions.start(
            "s-1",
            initial_message='Refund 7. dex-script: call create_refund {"orderId": "7"}',
        )
        (interrupt,) = (await sessions.wait_for_idle("s-1")).pending_interrupts
        await sessions.resolve_interrupt("s-1", interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle("s-1")
        await store.close()
    finally:
        assert dev.stop() == 0, dev.text
    assert len(_refund_rows(state / "support.sqlite")) == 1
    assert not (tmp_path / ".dex-agents").exists()
