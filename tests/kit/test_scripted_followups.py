"""The scripted model answers an unscripted follow-up with text, and never quotes the CLI.

A "thanks!" after a scripted tool turn used to replay that turn's tool calls
(and ask for another refund), and the summary of a tool turn quoted the
`<system-reminder>` the Claude Code CLI appends to tool results. These run the
real bundled CLI against `scripted_model()`, on the run's dev server, with the
example agent that `dex-agents demo` uses (its model setting is the one that
makes the CLI add a reminder to every tool result).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from click.testing import CliRunner
from pydantic import JsonValue
from temporalio.client import Client

from dex_agents._scripted._script import (
    PlannedReply,
    ScriptError,
    TextReply,
    ToolCallSpec,
    ToolUseReply,
    plan_reply,
)
from dex_agents._scripted._scripted_model import UNSCRIPTED_REPLY
from dex_agents.cli._app import main
from dex_agents.examples import support_agent
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import scripted_model
from dex_agents.testing._hermetic import bundled_cli_path
from dex_agents.testing._refusing_proxy import RefusingProxy

REMINDER = "<system-reminder>\n<total_tokens>14999950 tokens left</total_tokens>\n</system-reminder>"
CONTINUE = "Continue from where you left off."


def user(*blocks: JsonValue) -> JsonValue:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: JsonValue) -> JsonValue:
    return {"role": "assistant", "content": list(blocks)}


def text(value: str) -> JsonValue:
    return {"type": "text", "text": value}


def use(use_id: str, name: str) -> JsonValue:
    return {"type": "tool_use", "id": use_id, "name": name, "input": {"orderId": "7"}}


def result(use_id: str, *texts: str) -> JsonValue:
    return {
        "type": "tool_result",
        "tool_use_id": use_id,
        "content": [text(t) for t in texts],
    }


# What CLI 2.1.327 sends (shapes recorded from the real CLI): a reminder block
# before the prompt, one appended to each tool result, and the resume prompt.
TOOL_TURN: list[JsonValue] = [
    user(text(f"{REMINDER}\n"), text('dex-script: call refund {"orderId": "7"}')),
    assistant(use("t1", "mcp__tools__refund")),
    user(result("t1", "refunded order 7\n", REMINDER), text(CONTINUE)),
    assistant(text("done: refunded order 7")),
]


def test_a_tool_turn_is_summarized_without_the_cli_reminders() -> None:
    planned = plan_reply(TOOL_TURN[:3])
    assert planned == PlannedReply(reply=TextReply(text="done: refunded order 7"))


def test_an_unscripted_follow_up_is_not_scripted_by_an_earlier_turn() -> None:
    for follow_up in (
        user(text("thanks!")),
        user(text(f"{REMINDER}\n"), text("thanks!")),
    ):
        with pytest.raises(ScriptError, match="'thanks!' holds no 'dex-script:'"):
            plan_reply([*TOOL_TURN, follow_up])


def test_the_prompt_is_the_last_one_even_after_an_unscripted_turn() -> None:
    messages = [
        *TOOL_TURN,
        user(text("thanks!")),
        assistant(text("(scripted model) ...")),
        user(text('dex-script: call refund {"orderId": "8"}')),
    ]
    assert plan_reply(messages, tool_names=["mcp__tools__refund"]) == PlannedReply(
        reply=ToolUseReply(
            calls=(ToolCallSpec(name="mcp__tools__refund", input={"orderId": "8"}),)
        )
    )


def test_scripted_model_sets_and_restores_the_cli_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a-real-looking-key")
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    before = dict(os.environ)
    with scripted_model() as model:
        assert model.active and model.api is not None
        assert os.environ["ANTHROPIC_BASE_URL"] == model.api.base_url
        assert os.environ["ANTHROPIC_API_KEY"] != "a-real-looking-key"
        config = Path(os.environ["CLAUDE_CONFIG_DIR"])
        assert config.is_dir()
    assert dict(os.environ) == before
    assert not config.exists()
    assert not model.active
    # A key given: the program talks to Claude, nothing is changed.
    with scripted_model(only_without_api_key=True) as model:
        assert not model.active and model.api is None
        assert dict(os.environ) == before


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[RefusingProxy]:
    """The example agent's files in tmp_path, no key, a proxy that refuses."""
    if bundled_cli_path() is None:
        if os.environ.get("DEX_AGENTS_REAL_CLI_REQUIRED") == "1":
            pytest.fail("the bundled Claude Code CLI is missing")
        pytest.skip("the bundled Claude Code CLI is missing")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_DB", str(tmp_path / "support.sqlite"))
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_WORKDIR", str(tmp_path / "agents"))
    async with RefusingProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        yield proxy
        assert proxy.attempts == [], proxy.attempts


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]  # pyright: ignore[reportUnknownVariableType]
    return []


async def _cli(*args: str) -> str:
    done = await asyncio.to_thread(CliRunner().invoke, main, list(args))
    assert done.exit_code == 0, done.output
    return done.stdout


@pytest.mark.timeout(180)
async def test_thanks_after_a_refund_is_answered_with_text_through_the_real_cli(
    offline: RefusingProxy,
    engine: EmbeddedEngine,
    client: Client,
    tmp_path: Path,
) -> None:
    flow = support_agent.flow
    store_path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    sid = "scripted-followup-thanks"
    async with scripted_model() as model, create_worker(client, [flow], store=store):
        assert model.api is not None
        sessions = SessionClient(client, flow, store)
        await sessions.start(
            sid,
            initial_message='Is it broken? dex-script: call lookup_order {"orderId": "7"}',
        )
        await sessions.wait_for_idle(sid)
        await sessions.send_user_message(
            sid, 'Refund it. dex-script: call create_refund {"orderId": "7"}'
        )
        snapshot = await sessions.wait_for_idle(sid)
        (interrupt,) = snapshot.pending_interrupts
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=True)
        await sessions.wait_for_idle(sid)
        requests_before = len(model.api.requests)

        await sessions.send_user_message(sid, "thanks!")
        snapshot = await sessions.wait_for_idle(sid)
        assert snapshot.pending_interrupts == []
        assert snapshot.turns[-1].status == "completed"
        assert snapshot.turns[-1].final_text == UNSCRIPTED_REPLY
        # One model call, and it called no tool.
        assert len(model.api.requests) == requests_before + 1
        assert support_agent.refunds() == [
            ("7", f"{sid}/turn-2/{interrupt.tool_call_id}")
        ]
        # The CLI did send reminders, inside tool results too.
        sent = json.dumps([r.body for r in model.api.requests])
        assert "<system-reminder>" in sent

        finals = [t.final_text for t in snapshot.turns]
        assert finals[:3] == [
            "done: order 7: a blue kettle, delivered 2026-11-20, customer reports "
            "it arrived broken",
            "done: refunded order 7",
            UNSCRIPTED_REPLY,
        ]
        agent_texts = [m.text for m in snapshot.messages if m.role != "user"]
        events = await sessions.events(sid)
        target = ["--state-dir", str(engine.state_dir), "--store", str(store_path)]
        shown = await _cli("show", sid, *target)
        shown_json = json.loads(await _cli("show", sid, "--json", *target))
        listed = await _cli("events", sid, *target)
        listed_json = await _cli("events", sid, "--json", *target)
    await store.close()

    assert agent_texts and events
    for name, texts in [
        ("final_text", finals),
        ("messages", agent_texts),
        ("events", _strings([e.data for e in events])),
        ("show", [shown]),
        ("show --json turns", _strings(shown_json["turns"])),
        (
            "show --json agent messages",
            [m["text"] for m in shown_json["messages"] if m["role"] != "user"],
        ),
        ("events", [listed, listed_json]),
    ]:
        quoted = [t for t in texts if "<system-reminder>" in t]
        assert quoted == [], f"{name} quotes the CLI: {quoted}"
    assert "order 7: a blue kettle" in shown and UNSCRIPTED_REPLY[:40] in shown


def test_the_command_is_found_before_the_blocks_the_cli_adds_to_a_prompt() -> None:
    image: JsonValue = {"type": "image", "source": {"type": "base64", "data": "x"}}
    messages = [
        user(
            text("What is it? dex-script: say a pixel"),
            image,
            text("[Image: source: /tmp/claude-0/images/1.png]"),
        ),
        {"role": "system", "content": "# Environment"},
    ]
    assert plan_reply(messages).reply == TextReply(text="said: a pixel")


def test_the_example_keeps_its_data_in_the_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dex_agents.examples import support_agent

    monkeypatch.delenv("DEX_AGENTS_EXAMPLE_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DEX_AGENTS_STATE_DIR", raising=False)
    assert support_agent.ledger_path() == Path(".dex-agents/support.sqlite")
    monkeypatch.setenv("DEX_AGENTS_STATE_DIR", str(tmp_path / "state"))
    assert support_agent.ledger_path() == tmp_path / "state" / "support.sqlite"
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_DB", str(tmp_path / "own.sqlite"))
    assert support_agent.ledger_path() == tmp_path / "own.sqlite"
