"""Honest cards: a Bash approval says at least once, and the turn that reran it says so.

The Claude agent with the fake CLI, in a worker subprocess that the test
SIGKILLs while the resumed segment (where the approved Bash ran) is still
going; `show` and `events` run as commands against the same server and store.
"""

from __future__ import annotations

import asyncio

import pytest
from click.testing import CliRunner, Result

from dex_agents.cli._app import main
from support.fake_suite_rig import SuiteEnv, worker_process

pytestmark = pytest.mark.timeout(240)


async def _run(suite: SuiteEnv, *args: str) -> Result:
    target = ["--state-dir", str(suite.engine.state_dir)]
    target += ["--store", str(suite.tmp_path / "runtime.sqlite")]
    return await asyncio.to_thread(CliRunner().invoke, main, [*args, *target])


async def test_the_bash_card_says_at_least_once_and_its_rerun_turn_is_marked(
    suite: SuiteEnv,
) -> None:
    async with worker_process(suite) as rig:
        assert rig.worker is not None
        sid = "honest-card-bash"
        await rig.sessions.start(
            sid,
            initial_message='dex-script: call Bash {"command": "echo ran >> '
            'bash.log"} ;; pause answer',
        )
        interrupt = await rig.interrupt(sid)
        assert interrupt.tool_name == "Bash" and interrupt.at_least_once

        card = await _run(suite, "show", sid)
        assert card.exit_code == 0, card.output
        (effect,) = [line for line in card.stdout.splitlines() if "effect" in line]
        assert "at least once" in effect
        assert "at most once" not in card.stdout

        await rig.approve(sid)
        await rig.reached("answer")
        assert rig.bash_log(sid) == ["ran"]
        rig.worker.kill()
        rig.open_gate("answer")
        rig.worker.start()
        snap = await rig.sessions.wait_for_idle(sid)
        # The card told the truth: the rerun segment ran the approved Bash again.
        assert rig.bash_log(sid) == ["ran", "ran"]
        assert snap.turns[-1].reruns == 1

        shown = await _run(suite, "show", sid)
        assert shown.exit_code == 0, shown.output
        (header,) = [line for line in shown.stdout.splitlines() if "turn-1" in line]
        assert "↻ rerun once" in header

        listed = await _run(suite, "events", sid)
        assert listed.exit_code == 0, listed.output
        assert "turn-1/run_model/2 runs again (attempt 2)" in listed.stdout
