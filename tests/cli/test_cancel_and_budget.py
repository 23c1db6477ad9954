"""`dex-agents cancel`, the chat's Ctrl-C, and a spend limit answered from the CLI and the chat.

The commands run as a user runs them: `cancel`, `approve`, `show`, `events`,
`sessions` and `approvals` in-process against the run's dev server and an
in-process worker; the chat as a real process in a pseudo-terminal, against
`dex-agents worker`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import (
    DEX_AGENTS,
    Served,
    Term,
    assert_one_line_error,
    invoke,
    ledger_worker,
    spawn_chat,
)
from support.session_harness import ledger_config

RUN = uuid.uuid4().hex[:6]

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.usefixtures("no_dex_agents_settings"),
]


async def _reached(gates: Path, gate: str, timeout: float = 30.0) -> None:
    """Wait until the scripted model (or a tool) stands at `gate`."""
    async with asyncio.timeout(timeout):
        while not (gates / f"{gate}.reached").exists():
            await asyncio.sleep(0.02)


def _wait_file(path: Path, timeout: float = 30.0) -> None:
    """The same wait, blocking (run it on a thread)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


# -- dex-agents cancel ----------------------------------------------------------


async def test_cancel_stops_a_long_turn_and_show_says_cancelled(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(sid, initial_message="stream 6 ;; pause held")
    await _reached(served.base / "gates", "held")

    result = await served.run("cancel", sid, "--reason", "wrong way", "--as", "ana")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"■ cancelled turn-1 of session {sid} (reason: wrong way)"
    assert lines[1] == "  it had streamed: t0 t1 t2 t3"
    snap = await served.sessions.snapshot(sid)
    assert snap.status == "idle"
    assert (snap.turns[-1].status, snap.turns[-1].error) == (
        "cancelled",
        "the turn was cancelled: wrong way",
    )

    shown = await served.run("show", sid)
    assert shown.exit_code == 0, shown.output
    assert re.search(r"^turn-1\s+cancelled", shown.stdout, re.M), shown.stdout
    assert "agent › t0 t1 t2 t3" in shown.stdout
    assert "■ the turn was cancelled: wrong way" in shown.stdout
    printed = await served.run("events", sid)
    (line,) = [row for row in printed.stdout.splitlines() if "turn_cancelled" in row]
    assert line.endswith("■ cancelled by ana: wrong way"), line

    # The next message is answered as usual; then there is nothing to cancel.
    after = await served.sessions.send_and_wait(sid, "say hello")
    assert after.turns[-1].status == "completed"
    nothing = await served.run("cancel", sid)
    assert nothing.exit_code == 0, nothing.output
    assert nothing.stdout.strip() == f"nothing to cancel: session {sid} runs no turn"
    assert nothing.stderr == ""


async def test_cancel_closes_a_waiting_approval_and_nothing_runs(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message='call create_refund {"orderId": "7"}'
    )
    (interrupt,) = (await served.sessions.wait_for_idle(sid)).pending_interrupts

    result = await served.run("cancel", sid)

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [f"■ cancelled turn-1 of session {sid}"]
    shown = await served.run("show", sid)
    (call,) = [row for row in shown.stdout.splitlines() if "⚙ create_refund" in row]
    assert call == (
        '⚙ create_refund {"orderId": "7"} → cancelled: the turn was cancelled'
    )
    assert "approve:" not in shown.stdout  # nothing waits any more
    printed = await served.run("events", sid)
    assert f"{interrupt.interrupt_id} closed: the turn was cancelled" in (
        printed.stdout
    )
    assert served.ledger.count("create_refund_started") == 0


async def test_cancel_errors_say_what_to_do(
    served: Served,
    engine: EmbeddedEngine,
    client: Client,
    tmp_path: Path,
    flow_type: str,
) -> None:
    unknown = await served.run("cancel", "cancel-no-such-session")
    assert_one_line_error(unknown, "unknown session 'cancel-no-such-session'")

    ended = served.session_id()
    await served.sessions.start(ended, initial_message="say hi")
    await served.sessions.wait_for_idle(ended)
    await served.sessions.end(ended)
    refused = await served.run("cancel", ended)
    assert_one_line_error(refused, f"session {ended!r} has ended", "show")

    bad = await served.run("cancel", ended, "--timeout", "0")
    assert bad.exit_code == 2, bad.output

    # A worker that just stopped (Temporal still lists it): nothing takes the
    # cancel, and nothing was cancelled.
    other_flow = ledger_flow(ledger_config(tmp_path / "other", f"{flow_type}Gone"))
    store = await SQLiteRuntimeStore.open(tmp_path / "other.sqlite")
    sessions = SessionClient(client, other_flow, store)
    sid = f"cancel-gone-worker-{RUN}"
    async with create_worker(client, [other_flow], store=store):
        await sessions.start(sid, initial_message="say hi")
        await sessions.wait_for_idle(sid)
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    gone = await invoke("cancel", sid, "--timeout", "1", *target)
    assert_one_line_error(
        gone,
        f"no worker is serving flow '{flow_type}Gone'",
        "nothing answered within 1 s; nothing was cancelled",
    )
    await client.get_workflow_handle(sid).terminate()
    await store.close()


async def test_cancel_help_has_examples_and_completes_session_ids(
    served: Served,
) -> None:
    helped = await invoke("cancel", "--help")
    assert helped.exit_code == 0, helped.output
    for text in (
        "Usage: main cancel [OPTIONS] SESSION",
        "--reason",
        "--as NAME",
        "--timeout",
        'dex-agents cancel session-1 --reason "wrong order" --as ana',
    ):
        assert text in helped.stdout, text
    assert "--spend-limit USD" in (await invoke("approve", "--help")).stdout

    sid = served.session_id()
    await served.sessions.start(sid, initial_message="say hi")
    await served.sessions.wait_for_idle(sid)
    line = f"dex-agents cancel --store {served.store.path} "
    result = await asyncio.to_thread(
        subprocess.run,
        [DEX_AGENTS],
        env={
            **os.environ,
            "_DEX_AGENTS_COMPLETE": "bash_complete",
            "COMP_WORDS": line,
            "COMP_CWORD": str(len(line.split())),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert f"plain,{sid}" in result.stdout.splitlines()


# -- a spend limit reached -------------------------------------------------------


@dataclass
class Budgeted:
    """A ledger flow with a spend limit of 0.0015 USD, its worker in this process."""

    sessions: SessionClient
    target: list[str]

    async def paused(self, sid: str) -> str:
        """Start `sid` and spend until it waits for a new limit; the interrupt's ID."""
        await self.sessions.start(sid, initial_message="say one")
        await self.sessions.send_and_wait(sid, "say two")  # 0.002 USD spent
        snap = await self.sessions.send_and_wait(sid, "say three")
        assert snap.status == "budget_reached"
        (interrupt,) = snap.pending_interrupts
        assert interrupt.kind == "budget"
        return interrupt.interrupt_id


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def budgeted(
    engine: EmbeddedEngine, client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[Budgeted]:
    flow = ledger_flow(replace(ledger_config(tmp_path, flow_type), spend_limit=0.0015))
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    async with create_worker(client, [flow], store=store):
        yield Budgeted(
            sessions=SessionClient(client, flow, store),
            target=["--state-dir", str(engine.state_dir), "--store", str(store.path)],
        )
    await store.close()


SPENT = "spend limit reached: 0.0020 of 0.0015 USD spent"


async def test_approve_with_a_spend_limit_continues_a_budget_paused_session(
    budgeted: Budgeted,
) -> None:
    sid = f"cli-budget-{RUN}"
    iid = await budgeted.paused(sid)
    target = budgeted.target

    listed = await invoke("sessions", *target)
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(sid)]
    assert "budget reached" in row and f"1: {SPENT}" in row, row
    assert json.loads((await invoke("sessions", "--json", *target)).stdout)[0][
        "status"
    ] == ("budget_reached")
    waiting = await invoke("approvals", *target)
    (row,) = [line for line in waiting.stdout.splitlines() if line.startswith(sid)]
    assert f"{iid} spend_limit budget" in " ".join(row.split()), row
    assert f"{SPENT} — approve with --spend-limit USD" in row
    assert f"approve {sid} {iid} --spend-limit USD" in waiting.stdout
    (listed_json,) = json.loads((await invoke("approvals", "--json", *target)).stdout)
    assert (listed_json["kind"], listed_json["arguments"]) == (
        "budget",
        {"spent_usd": 0.002, "spend_limit_usd": 0.0015},
    )
    shown = await invoke("show", sid, *target)
    assert "budget reached" in shown.stdout
    assert f"⏸ spend limit reached {iid}" in shown.stdout
    assert f"{SPENT} — approve with --spend-limit USD" in shown.stdout
    assert f"approve: dex-agents approve {sid} {iid} --spend-limit USD" in shown.stdout
    assert f"decline: dex-agents reject {sid} {iid}" in shown.stdout

    # Without a limit, too low, or not a number of USD: a usage error, nothing changes.
    missing = await invoke("approve", sid, iid, *target)
    assert_one_line_error(
        missing,
        f"{iid} of session {sid!r} asks for a new spend limit ({SPENT})",
        "`--spend-limit USD` above the 0.0020 USD spent",
        f"approve {sid} {iid} --spend-limit 0.004",
        exit_code=2,
    )
    low = await invoke("approve", sid, iid, "--spend-limit", "0.001", *target)
    assert_one_line_error(
        low, "bad `--spend-limit 0.001`", "above the 0.0020 USD", exit_code=2
    )
    for value in ("inf", "0", "-1"):
        wrong = await invoke("approve", sid, iid, "--spend-limit", value, *target)
        assert_one_line_error(wrong, "bad `--spend-limit", exit_code=2)
    edited = await invoke("approve", sid, iid, "--edit", "{}", *target)
    assert_one_line_error(edited, "no input to edit", exit_code=2)
    assert (await budgeted.sessions.snapshot(sid)).status == "budget_reached"

    ok = await invoke(
        "approve", sid, iid, "--spend-limit", "0.01", "--as", "ana", *target
    )
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.splitlines()[0] == (
        f"✓ approved {iid} of session {sid}: the spend limit is now 0.0100 USD, and "
        "the turn goes on"
    )
    snap = await budgeted.sessions.wait_for_idle(sid)
    assert (snap.turns[-1].status, snap.turns[-1].final_text) == (
        "completed",
        "said: three",
    )
    printed = await invoke("events", sid, *target)
    assert f"{iid} {SPENT}" in printed.stdout
    assert f"{iid} approved by ana: new spend limit 0.0100 USD" in printed.stdout


async def test_a_spend_limit_answer_that_changes_nothing_says_so_and_exits_4(
    budgeted: Budgeted,
) -> None:
    sid = f"cli-budget-again-{RUN}"
    iid = await budgeted.paused(sid)
    target = budgeted.target
    ok = await invoke("approve", sid, iid, "--spend-limit", "0.01", *target)
    assert ok.exit_code == 0, ok.output
    await budgeted.sessions.wait_for_idle(sid)

    # The same limit again is the same answer: exit 0, saying nothing changed.
    same = await invoke("approve", sid, iid, "--spend-limit", "0.01", *target)
    assert same.exit_code == 0, same.output
    assert (
        f"{iid} was already approved with a new spend limit of 0.0100 USD; nothing "
        "changed"
    ) in same.stdout
    # Another limit, higher or not above the one set: it did not apply (exit 4).
    for value in ("0.02", "0.001"):
        other = await invoke("approve", sid, iid, "--spend-limit", value, *target)
        assert_one_line_error(
            other,
            f"{iid} of session {sid!r} was already approved with a new spend limit "
            f"of 0.0100 USD; this `--spend-limit {value}` was not applied, and "
            "nothing changed",
            f"`dex-agents show {sid} {shlex.join(target)}`",
            exit_code=4,
        )
    snap = await budgeted.sessions.snapshot(sid)
    assert snap.turns[-1].status == "completed"

    declined_sid = f"cli-budget-declined-again-{RUN}"
    declined = await budgeted.paused(declined_sid)
    no = await invoke("reject", declined_sid, declined, "-m", "enough", *target)
    assert no.exit_code == 0, no.output
    await budgeted.sessions.wait_for_idle(declined_sid)
    late = await invoke(
        "approve", declined_sid, declined, "--spend-limit", "0.01", *target
    )
    assert_one_line_error(
        late,
        f"{declined} of session {declined_sid!r} was already declined (no new spend "
        "limit: 'enough'); this approve changed nothing",
        exit_code=4,
    )


async def test_reject_declines_a_new_limit_and_spend_limit_is_refused_for_a_tool_call(
    budgeted: Budgeted,
) -> None:
    sid = f"cli-budget-declined-{RUN}"
    iid = await budgeted.paused(sid)
    declined = await invoke("reject", sid, iid, "-m", "enough", *budgeted.target)
    assert declined.exit_code == 0, declined.output
    assert declined.stdout.splitlines()[0] == (
        f"✗ declined {iid} of session {sid}: no new spend limit, so the turn fails "
        "(spend limit reached)"
    )
    snap = await budgeted.sessions.wait_for_idle(sid)
    assert snap.turns[-1].status == "failed"
    assert "spend limit reached" in (snap.turns[-1].error or "")

    refund = f"cli-budget-refund-{RUN}"
    await budgeted.sessions.start(
        refund, initial_message='call create_refund {"orderId": "7"}'
    )
    (call,) = (await budgeted.sessions.wait_for_idle(refund)).pending_interrupts
    refused = await invoke(
        "approve",
        refund,
        call.interrupt_id,
        "--spend-limit",
        "5",
        *budgeted.target,
    )
    assert_one_line_error(
        refused,
        "`--spend-limit` answers a spend-limit interrupt only",
        f"asks to approve the tool call create_refund: `dex-agents approve {refund} "
        f"{call.interrupt_id} {shlex.join(budgeted.target)}` (without `--spend-limit`)",
        exit_code=2,
    )
    both = await invoke(
        "approve",
        refund,
        call.interrupt_id,
        "--spend-limit",
        "5",
        "--edit",
        "{}",
        *budgeted.target,
    )
    assert_one_line_error(both, "exclude each other", exit_code=2)
    snap = await budgeted.sessions.snapshot(refund)
    assert [i.interrupt_id for i in snap.pending_interrupts] == [call.interrupt_id]
    await budgeted.sessions.resolve_interrupt(refund, call.interrupt_id, approved=False)


# -- the chat -------------------------------------------------------------------


async def test_ctrl_c_in_the_chat_stops_the_turn_and_the_next_message_is_answered(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    sid = f"chat-stop-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, sid, "--agent", "agents:flow")
    chat.expect("you › ")
    chat.sendline("stream 6 ;; pause held")
    chat.expect(re.escape("agent › t0 t1 t2 t3"))
    await asyncio.to_thread(_wait_file, tmp_path / "gates" / "held.reached")

    chat.sendintr()
    chat.expect(re.escape("■ stopping the turn… (Ctrl-C again leaves the chat)"))
    user = re.escape(chat.expect(r"■ stopped turn-1 by (\S+)").group(1))
    chat.expect("you › ")
    chat.sendline("say hello")
    chat.expect(re.escape("agent › said: hello (after 1 failure note(s))"))
    chat.expect("you › ")
    # Ctrl-C at the prompt leaves, as before.
    chat.sendintr()
    chat.expect("bye; come back with")
    assert chat.wait_exit() == 0
    assert user

    shown = await invoke(
        "show",
        sid,
        "--state-dir",
        str(engine.state_dir),
        "--store",
        str(tmp_path / "runtime.sqlite"),
    )
    assert re.search(r"^turn-1\s+cancelled", shown.stdout, re.M), shown.stdout
    assert re.search(r"^turn-2\s+completed", shown.stdout, re.M), shown.stdout


async def test_a_second_ctrl_c_leaves_while_the_turn_stops(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    sid = f"chat-stop-leave-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, sid, "--agent", "agents:flow")
    chat.expect("you › ")
    # The refund's Step holds at a gate: a cancel waits for it to finish.
    chat.sendline('call create_refund {"orderId": "4", "gate": "write"}')
    chat.expect(re.escape("approve or reject? [a/r]"))
    chat.sendline("a")
    await asyncio.to_thread(_wait_file, tmp_path / "gates" / "write.reached")
    chat.sendintr()
    chat.expect(re.escape("■ stopping the turn…"))
    chat.sendintr()
    chat.expect("left while the turn stops; it ends cancelled in the worker")
    assert chat.wait_exit() == 0

    (tmp_path / "gates" / "write").write_text("")
    back = spawn_chat(engine, tmp_path, flow_type, sid)
    # Come back: the turn has stopped, or stops while the chat replays it.
    back.expect(r"■ the turn was cancelled|■ stopped turn-1")
    back.expect("you › ")
    back.sendline("/quit")
    assert back.wait_exit() == 0
    ledger = Ledger(tmp_path / "ledger.jsonl")
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["4"]


async def test_a_cancel_from_another_terminal_closes_the_chat_card(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    sid = f"chat-card-cancelled-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, sid, "--agent", "agents:flow")
    chat.expect("you › ")
    chat.sendline('call create_refund {"orderId": "5"}')
    chat.expect(re.escape("approve or reject? [a/r]"))
    stopped = await invoke(
        "cancel",
        sid,
        "--as",
        "ana",
        "--state-dir",
        str(engine.state_dir),
        "--store",
        str(tmp_path / "runtime.sqlite"),
    )
    assert stopped.exit_code == 0, stopped.output
    assert f"■ cancelled turn-1 of session {sid}" in stopped.stdout
    chat.expect("the turn was stopped elsewhere")
    chat.expect("■ stopped turn-1 by ana")
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    assert Ledger(tmp_path / "ledger.jsonl").count("create_refund_started") == 0


@pytest.fixture
def budget_worker(
    engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> Iterator[Term]:
    """`dex-agents worker` serving the ledger flow with a 0.0015 USD spend limit."""
    with ledger_worker(engine, tmp_path, flow_type, "budget_agents:flow") as child:
        yield child


async def test_the_chat_asks_for_a_new_spend_limit_and_asks_again_on_bad_input(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    budget_worker: Term,
) -> None:
    sid = f"chat-budget-{RUN}"
    chat = spawn_chat(engine, tmp_path, flow_type, sid, "--agent", "budget_agents:flow")
    chat.expect("you › ")
    for word in ("one", "two"):
        chat.sendline(f"say {word}")
        chat.expect(f"agent › said: {word}")
        chat.expect("you › ")
    chat.sendline("say three")
    chat.expect(r"⏸ spend limit reached intr_\w+")
    chat.expect(re.escape(SPENT))
    prompt = re.escape("new spend limit in USD (above 0.0020), or r to decline › ")
    chat.expect(prompt)
    chat.sendline("lots")
    chat.expect(re.escape("type a number of USD above 0.0020"))
    chat.sendline("0.001")
    chat.expect(re.escape("0.001 USD is not above the 0.0020 USD spent"))
    chat.sendline("0.01")
    chat.expect(re.escape("✓ raised the spend limit to 0.0100 USD"))
    chat.expect("agent › said: three")
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
