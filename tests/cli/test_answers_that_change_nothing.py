"""A spend-limit answer that no worker takes, when another limit is recorded first.

With no worker running, the first recorded answer of an interrupt is the one
that applies when a worker starts: a second approval with another limit is
not recorded, so `approve` says so and exits 4 instead of claiming it applies.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.temporal import EmbeddedEngine, create_worker
from support.cli_harness import assert_one_line_error, invoke
from support.session_harness import budget_paused_without_worker

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_a_second_spend_limit_with_no_worker_is_refused_and_the_first_applies(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> None:
    paused = await budget_paused_without_worker(
        client, tmp_path, flow_type, "limit-later"
    )
    flow, store, sessions, sid, iid = (
        paused.flow,
        paused.store,
        paused.sessions,
        paused.sid,
        paused.interrupt_id,
    )
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]

    first = await invoke(
        "approve", sid, iid, "--spend-limit", "0.01", "--timeout", "1", *target
    )
    assert first.exit_code == 3, first.output
    # The same limit again is recorded already; another one would not apply.
    same = await invoke(
        "approve", sid, iid, "--spend-limit", "0.01", "--timeout", "1", *target
    )
    assert same.exit_code == 3, same.output
    other = await invoke(
        "approve", sid, iid, "--spend-limit", "0.05", "--timeout", "1", *target
    )
    assert_one_line_error(
        other,
        f"{iid} (session {sid!r}) already has an approval with a new spend limit "
        "of 0.0100 USD recorded, which applies first when a worker starts; this "
        "`--spend-limit 0.05` was not recorded, and nothing changed",
        "`dex-agents worker --agent module:flow --state-dir",
        exit_code=4,
    )

    async with create_worker(client, [flow], store=store):
        snap = await sessions.wait_for_idle(sid, timeout=30)
        assert (snap.turns[-1].status, snap.turns[-1].final_text) == (
            "completed",
            "said: three",
        )
        later = await invoke("approve", sid, iid, "--spend-limit", "0.05", *target)
        assert_one_line_error(
            later,
            f"{iid} of session {sid!r} was already approved with a new spend limit "
            "of 0.0100 USD; this `--spend-limit 0.05` was not applied",
            exit_code=4,
        )
    await store.close()
