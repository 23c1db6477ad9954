"""Every command's `--help` has examples; shell completion offers session and interrupt IDs."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from dex_agents.cli._app import main
from support.cli_harness import DEX_AGENTS, Served, invoke

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def test_every_command_help_has_examples_of_itself() -> None:
    assert set(main.commands) >= {
        "approve", "approvals", "chat", "demo", "dev", "events", "reject",
        "sessions", "show", "worker",
    }  # fmt: skip
    for name in main.commands:
        result = await invoke(name, "--help")
        assert result.exit_code == 0, result.output
        examples = result.stdout[result.stdout.index("Examples:") :].splitlines()[1:]
        assert examples[0].strip().startswith(f"dex-agents {name}"), (name, examples)


def _complete(words: str, state: list[str]) -> list[tuple[str, str]]:
    """What bash completion offers for `words` (the last one being completed).

    `state` (options naming the store) goes right after the command's name.
    """
    command, _, rest = words.partition(" ")
    line = " ".join(["dex-agents", command, *state]) + (f" {rest}" if _ else "")
    result = subprocess.run(
        [DEX_AGENTS],
        env={
            **os.environ,
            "_DEX_AGENTS_COMPLETE": "bash_complete",
            "COMP_WORDS": line,
            "COMP_CWORD": str(len(line.split()) - (0 if line.endswith(" ") else 1)),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    offered = [item.split(",", 1) for item in result.stdout.splitlines() if item]
    return [(kind, value) for kind, value in offered]


async def test_completion_offers_session_and_interrupt_ids_from_the_store(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message='call create_refund {"orderId": "2"}'
    )
    (interrupt,) = (await served.sessions.wait_for_idle(sid)).pending_interrupts
    other = served.session_id()
    await served.sessions.start(other, initial_message="say hi")
    await served.sessions.wait_for_idle(other)
    store = ["--store", str(served.store.path)]

    sessions = await asyncio.to_thread(_complete, "approve ", store)
    assert {value for _, value in sessions} == {sid, other}
    assert await asyncio.to_thread(_complete, f"show {sid[:-1]}", store) == [
        ("plain", sid)
    ]
    interrupts = await asyncio.to_thread(_complete, f"approve {sid} ", store)
    assert interrupts == [("plain", interrupt.interrupt_id)]
    assert await asyncio.to_thread(_complete, f"reject {other} ", store) == []
    # Commands complete as before, and a store that is not there offers nothing.
    assert ("plain", "approvals") in await asyncio.to_thread(_complete, "appr", [])
    missing = ["--store", str(served.base / "absent.sqlite")]
    assert await asyncio.to_thread(_complete, "show ", missing) == []
    await served.sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=False)


async def test_completion_script_is_what_the_readme_says_to_source() -> None:
    result = await asyncio.to_thread(
        subprocess.run,
        [DEX_AGENTS],
        env={**os.environ, "_DEX_AGENTS_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "complete -o nosort -F _dex_agents_completion dex-agents" in result.stdout
