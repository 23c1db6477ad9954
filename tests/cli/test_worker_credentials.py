"""`dex-agents worker` says at start when it has no model credentials, and starts anyway.

The same check as `doctor`'s: with no ANTHROPIC_API_KEY (nor a token, a cloud
provider or a stored login), the banner has one warning line naming what is
missing and how to set it. The worker still serves its agent: the ledger flow
of the tests calls no model, and a turn of it answers.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import agent_env, spawn
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

_WARNING = (
    "warning: model credentials: none in the environment (no ANTHROPIC_API_KEY); "
    "a Claude agent's turns fail without them (an agent that calls no model needs "
    "none) — fix: export ANTHROPIC_API_KEY=<your key> where the worker runs"
)


@pytest.mark.parametrize("with_key", [False, True], ids=["no-key", "key"])
async def test_worker_warns_once_without_model_credentials_and_serves_anyway(
    engine: EmbeddedEngine,
    client: Client,
    tmp_path: Path,
    flow_type: str,
    with_key: bool,
) -> None:
    env = agent_env(tmp_path, flow_type)
    if not with_key:
        del env["ANTHROPIC_API_KEY"]  # the tests' dummy key
    store_path = tmp_path / "runtime.sqlite"
    worker = spawn(
        [
            "worker",
            "--agent",
            "agents:flow",
            "--state-dir",
            str(engine.state_dir),
            "--store",
            str(store_path),
        ],
        env,
        tmp_path,
    )
    try:
        worker.expect("ready", timeout=90)
        banner = worker.text.split("ready", 1)[0]
        warnings = [line for line in banner.splitlines() if "warning" in line]
        if with_key:
            assert warnings == [], banner
            assert "model credentials" not in banner
        else:
            (line,) = warnings
            assert line.startswith(_WARNING), line
        # It serves its agent either way: this one calls no model.
        store = await SQLiteRuntimeStore.open(store_path)
        sessions = SessionClient(
            client, ledger_flow(ledger_config(tmp_path, flow_type)), store
        )
        sid = f"credentials-{uuid.uuid4().hex[:8]}"
        await sessions.start(sid, initial_message="say hello")
        snap = await sessions.wait_for_idle(sid, timeout=60)
        assert snap.turns[-1].final_text == "said: hello"
        await store.close()
    finally:
        code = worker.stop()
    assert code == 0, worker.text[-3000:]


async def test_a_worker_on_a_namespace_that_does_not_exist_says_so_in_one_line(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> None:
    """It printed its banner and "ready", then Temporal's validation traceback."""
    env = agent_env(tmp_path, flow_type)
    args = ["worker", "--agent", "agents:flow", "--address", engine.address]
    worker = spawn(
        [*args, "--namespace", "prod", "--store", str(tmp_path / "rt.sqlite")],
        env,
        tmp_path,
    )
    assert worker.wait_exit(timeout=90) == 1, worker.text
    assert "ready" not in worker.text and "Traceback" not in worker.text, worker.text
    (line,) = [ln for ln in worker.text.splitlines() if ln.startswith("error:")]
    assert line == (
        f"error: namespace 'prod' does not exist on {engine.address}; pass "
        "`--namespace` (DEX_AGENTS_TEMPORAL_NAMESPACE) one that does, or create it: "
        f"`temporal operator namespace create --namespace prod --address {engine.address}`"
    )


@pytest.mark.parametrize("store_given", [False, True], ids=["default", "given"])
async def test_a_cluster_worker_on_the_default_store_warns_that_clients_must_share_it(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str, store_given: bool
) -> None:
    """A worker without `--store` wrote turns where no client of the cluster looked."""
    env = agent_env(tmp_path, flow_type)
    store = ["--store", str(tmp_path / "rt.sqlite")] if store_given else []
    worker = spawn(
        ["worker", "--agent", "agents:flow", "--address", engine.address, *store],
        env,
        tmp_path,
    )
    try:
        worker.expect("ready", timeout=90)
        banner = worker.text.split("ready", 1)[0]
    finally:
        assert worker.stop() == 0, worker.text[-3000:]
    warnings = [ln for ln in banner.splitlines() if "runtime store" in ln]
    if store_given:
        assert warnings == [], banner
    else:
        (line,) = warnings
        default = tmp_path / ".dex-agents" / "runtime.sqlite"
        assert line.startswith(
            f"warning: runtime store: no `--store` given, so this machine's {default}; "
            "every worker and client of these sessions must use the same store"
        ), line
