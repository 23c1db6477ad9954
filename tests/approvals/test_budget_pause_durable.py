"""The spend limit through the real bundled CLI: each segment's budget is what is left."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import AgentSessionOptions
from dex_agents.claude import ClaudeAgentDefinition, create_claude_agent_session_flow
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._hermetic import bundled_cli_path
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(180)

CALL_COST = 0.00009
"""What one scripted model call costs as CLI 2.1.327 prices it (sonnet 4.5)."""


def _recording_cli(base: Path) -> tuple[Path, Path]:
    """A wrapper that logs each run's argv, then `exec`s the bundled CLI."""
    log, script = base / "argv.jsonl", base / "claude-recorder"
    record = "import json, sys; open(sys.argv[1], 'a').write(json.dumps(sys.argv[2:]) + '\\n')"
    script.write_text(
        "#!/bin/sh\n"
        f"{shlex.quote(sys.executable)} -I -c {shlex.quote(record)} "
        f'{shlex.quote(str(log))} "$@"\n'
        f'exec {shlex.quote(str(bundled_cli_path()))} "$@"\n'
    )
    script.chmod(0o755)
    return script, log


def _budgets(log: Path) -> list[float]:
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    return [float(argv[argv.index("--max-budget-usd") + 1]) for argv in runs]


async def test_a_session_that_crosses_its_limit_waits_and_a_new_limit_continues_it(
    claude_rig: ClaudeRig, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    script, log = _recording_cli(claude_rig.tmp)
    monkeypatch.setenv("DEX_AGENTS_CLAUDE_CLI", str(script))
    example = claude_rig.example
    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=example.options, custom_tools=[example.lookup_order]
        ),
        "BudgetAgent",
        AgentSessionOptions(spend_limit=0.00015),
    )
    store = SQLiteRuntimeStore(claude_rig.tmp / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "real-cli-budget"
    async with create_worker(client, [flow], store=store):
        await sessions.start(sid, initial_message="dex-script: say one")
        snap = await sessions.wait_for_idle(sid)
        assert snap.turns[0].final_text == "said: one"
        assert snap.usage.cost_usd == pytest.approx(CALL_COST)

        # The second segment may spend 0.00006 USD: its model call costs more,
        # so the CLI stops after it and the session asks for a new limit.
        snap = await sessions.send_and_wait(sid, "dex-script: say two")
        assert snap.status == "budget_reached", snap.turns[-1].error
        (interrupt,) = snap.pending_interrupts
        assert interrupt.kind == "budget"
        assert interrupt.arguments["spent_usd"] == pytest.approx(2 * CALL_COST)

        assert await sessions.resolve_interrupt(
            sid, interrupt.interrupt_id, approved=True, new_spend_limit=0.001
        )
        snap = await sessions.wait_for_idle(sid)

        assert snap.turns[-1].status == "completed", snap.turns[-1].error
        assert snap.turns[-1].final_text == "said: two"
        assert snap.usage.cost_usd == pytest.approx(3 * CALL_COST)
    # Each segment's argv carried what was left of the limit at its start.
    assert _budgets(log) == pytest.approx(
        [0.00015, 0.00015 - CALL_COST, 0.001 - 2 * CALL_COST]
    )
    await store.close()
