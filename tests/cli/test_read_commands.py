"""`sessions`, `show`, `events`, `approve`, `reject` against the dev server, in-process."""

from __future__ import annotations

import getpass
import json
import re
import shlex
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from support import SUPPORT_DIR
from support.cli_harness import Served, assert_one_line_error, invoke
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")


async def _waiting_for_refund(served: Served, order: str = "7") -> tuple[str, str]:
    """A session waiting for approval of `create_refund`; its ID and the interrupt's."""
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message=f'call create_refund {{"orderId": "{order}"}}'
    )
    snap = await served.sessions.wait_for_idle(sid)
    (interrupt,) = snap.pending_interrupts
    return sid, interrupt.interrupt_id


async def test_sessions_lists_status_turns_and_pending_approvals(
    served: Served,
) -> None:
    done = served.session_id()
    await served.sessions.start(done, initial_message="say hi")
    await served.sessions.wait_for_idle(done)
    waiting, interrupt_id = await _waiting_for_refund(served)

    result = await served.run("sessions")
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line for line in result.stdout.splitlines()[1:]}
    assert set(rows) == {done, waiting}
    assert "idle" in rows[done]
    assert "waiting for approval" in rows[waiting]
    assert "1: create_refund" in rows[waiting]
    # Newest first.
    assert result.stdout.splitlines()[1].startswith(waiting)

    result = await served.run("sessions", "--json")
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    assert [s["session_id"] for s in listed] == [waiting, done]
    assert listed[0]["status"] == "waiting_for_approval"
    assert listed[0]["turns"] == 1
    (pending,) = listed[0]["pending_interrupts"]
    assert pending["interrupt_id"] == interrupt_id
    assert pending["arguments"] == {"orderId": "7"}
    assert listed[1]["pending_interrupts"] == []


async def test_sessions_without_a_store_is_empty(tmp_path: Path) -> None:
    result = await invoke("sessions", "--state-dir", str(tmp_path / "none"))
    assert result.exit_code == 0, result.output
    assert "no sessions yet" in result.stdout
    assert "another directory: `--state-dir DIR`" in result.stdout
    result = await invoke("sessions", "--json", "--state-dir", str(tmp_path / "none"))
    assert json.loads(result.stdout) == []
    assert not (tmp_path / "none").exists(), "a read must not create the state dir"


async def test_sessions_with_an_address_says_it_read_the_store(tmp_path: Path) -> None:
    """`--address` alone lists this directory's store: the empty listing says so."""
    result = await invoke(
        "sessions", "--address", "127.0.0.1:1", "--state-dir", str(tmp_path / "none")
    )
    assert result.exit_code == 0, result.output
    assert "not the Temporal server at 127.0.0.1:1" in result.stdout
    assert "pass the `--store` its workers use" in result.stdout


async def test_show_prints_turns_and_the_exact_pending_input(served: Served) -> None:
    sid, interrupt_id = await _waiting_for_refund(served)
    result = await served.run("show", sid)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "waiting for approval" in out
    assert 'you › call create_refund {"orderId": "7"}' in out
    assert f"approval needed {interrupt_id}" in out
    assert "non-idempotent write" in out
    assert 'input   {"orderId": "7"}' in out
    assert f"dex-agents approve {sid} {interrupt_id}" in out

    result = await served.run("show", sid, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["session_id"] == sid
    assert data["status"] == "waiting_for_approval"
    assert data["pending_interrupts"][0]["interrupt_id"] == interrupt_id
    assert data["turns"][0]["prompts"] == ['call create_refund {"orderId": "7"}']


async def test_show_completed_session_includes_messages_in_json(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(sid, initial_message="say hello")
    await served.sessions.wait_for_idle(sid)
    result = await served.run("show", sid)
    assert "agent › said: hello" in result.stdout
    data = json.loads((await served.run("show", sid, "--json")).stdout)
    assert [(m["role"], m["text"]) for m in data["messages"]] == [
        ("user", "say hello"),
        ("assistant", "said: hello"),
    ]


async def test_approve_runs_the_tool_once(served: Served) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="9")
    result = await served.run("approve", sid, interrupt_id)
    assert result.exit_code == 0, result.output
    assert f"approved {interrupt_id}" in result.stdout
    snap = await served.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == "done: create_refund=refunded order 9"
    assert [e["order_id"] for e in served.ledger.entries("create_refund")] == ["9"]

    # A repeat changes nothing and says so, without failing.
    again = await served.run("approve", sid, interrupt_id)
    assert again.exit_code == 0, again.output
    assert f"{interrupt_id} was already approved; nothing changed" in again.stdout
    # A late rejection says which way it went, and fails (exit code 4).
    late = await served.run("reject", sid, interrupt_id, "-m", "too late")
    assert_one_line_error(
        late, f"{interrupt_id} of session {sid!r} was already approved", exit_code=4
    )
    assert served.ledger.count("create_refund") == 1


async def test_reject_sends_the_message_and_the_tool_never_runs(
    served: Served,
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served)
    result = await served.run("reject", sid, interrupt_id, "--message", "not today")
    assert result.exit_code == 0, result.output
    assert f"rejected {interrupt_id}" in result.stdout
    snap = await served.sessions.wait_for_idle(sid)
    assert snap.turns[0].final_text == (
        "done: create_refund=The user rejected this call: not today"
    )
    assert served.ledger.count("create_refund_started") == 0
    # An approval after it says how it went, and fails (exit code 4).
    late = await served.run("approve", sid, interrupt_id)
    assert_one_line_error(
        late, "was already rejected ('not today'); this approve changed", exit_code=4
    )
    again = await served.run("reject", sid, interrupt_id)
    assert again.exit_code == 0, again.output
    assert "already rejected ('not today'); nothing changed" in again.stdout
    assert served.ledger.count("create_refund_started") == 0


async def test_approve_as_records_who_approved_in_events_and_show(
    served: Served,
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="11")
    result = await served.run("approve", sid, interrupt_id, "--as", "bob")
    assert result.exit_code == 0, result.output
    await served.sessions.wait_for_idle(sid)

    listed = await served.run("events", sid, "--json")
    records = [json.loads(line) for line in listed.stdout.splitlines()]
    (resolved,) = [r for r in records if r["type"] == "interrupt_resolved"]
    assert resolved["data"]["interrupt_id"] == interrupt_id
    assert resolved["data"]["resolved_by"] == "bob"
    printed = await served.run("events", sid)
    assert f"{interrupt_id} approved by bob" in printed.stdout
    shown = await served.run("show", sid)
    assert "finished, approved by bob" in shown.stdout
    data = json.loads((await served.run("show", sid, "--json")).stdout)
    (call,) = data["turns"][-1]["tool_calls"]
    assert call["resolved_by"] == "bob"


async def test_reject_without_as_records_the_os_user(served: Served) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="12")
    result = await served.run("reject", sid, interrupt_id, "-m", "not this one")
    assert result.exit_code == 0, result.output
    snap = await served.sessions.wait_for_idle(sid)
    (call,) = snap.turns[-1].tool_calls
    assert (call.status, call.resolved_by) == ("rejected", getpass.getuser())


async def test_events_print_the_log_and_json_lines(served: Served) -> None:
    sid, interrupt_id = await _waiting_for_refund(served)
    await served.sessions.resolve_interrupt(sid, interrupt_id, approved=True)
    await served.sessions.wait_for_idle(sid)

    result = await served.run("events", sid)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # cursor, the event's local time, turn, type
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d", line.split()[1]) for line in lines)
    types = [line.split()[3] for line in lines]
    assert types == [
        "turn_started",
        "interrupt_created",
        "interrupt_resolved",
        "tool_call_started",
        "tool_call_finished",
        "text_delta",
        "turn_completed",
    ]
    assert (
        f'{interrupt_id} create_refund (non_idempotent_write) {{"orderId": "7"}}'
        in (result.stdout)
    )

    result = await served.run("events", sid, "--json", "--after", "2")
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["cursor"] for r in records] == [3, 4, 5, 6, 7]
    assert records[-1]["type"] == "turn_completed"
    assert records[1]["data"]["arguments"] == {"orderId": "7"}


async def test_unknown_interrupt_is_one_line_naming_the_pending_ones(
    served: Served,
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served)
    result = await served.run("approve", sid, "intr_nope")
    assert_one_line_error(result, "'intr_nope'", f"pending: {interrupt_id}")
    result = await served.run("reject", sid, "intr_nope", "-m", "no")
    assert_one_line_error(result, "has no interrupt 'intr_nope'")
    assert served.ledger.count("create_refund_started") == 0


async def test_unknown_session_is_one_line_for_every_command(served: Served) -> None:
    for args in (
        ["show", "nope"],
        ["show", "nope", "--json"],
        ["events", "nope"],
        ["approve", "nope", "intr_x"],
        ["reject", "nope", "intr_x"],
    ):
        result = await served.run(*args)
        assert_one_line_error(result, "unknown session 'nope'", "dex-agents sessions")


async def test_no_server_is_one_line_saying_how_to_start_one(tmp_path: Path) -> None:
    empty = ["--state-dir", str(tmp_path / "state")]
    for args in (["approve", "s", "intr_x"], ["show", "s"], ["chat", "s"]):
        result = await invoke(*args, *empty)
        assert_one_line_error(result, "no Temporal server is running", "dex-agents dev")
    # `show` of a session the store lacks also says where else it may be.
    result = await invoke("show", "s", *empty)
    assert_one_line_error(result, "of another directory: pass its `--state-dir`")
    result = await invoke("approve", "s", "intr_x", "--address", "127.0.0.1:1")
    assert_one_line_error(result, "cannot connect", "127.0.0.1:1")


async def test_no_worker_is_one_line_saying_how_to_start_one(
    engine: EmbeddedEngine, client: Client, tmp_path: Path
) -> None:
    # A session whose flow no worker has ever served.
    flow_type = f"Orphan{uuid.uuid4().hex[:8]}"
    sid = f"orphan-{uuid.uuid4().hex[:8]}"
    await client.start_workflow(flow_type, id=sid, task_queue=flow_type)
    target = ["--state-dir", str(engine.state_dir), "--store", str(tmp_path / "rt")]
    for args in (["show", sid], ["chat", sid]):
        result = await invoke(*args, *target)
        assert_one_line_error(
            result, f"no worker is serving flow '{flow_type}'", "dex-agents worker"
        )
    # An answer is recorded for when a worker starts (exit code 3); with no store
    # to check the interrupt against, it says so.
    result = await invoke("approve", sid, "intr_x", *target)
    assert result.exit_code == 3, result.output
    assert f"recorded: the approval of intr_x (session {sid})" in result.stdout
    assert "if the session has interrupt intr_x" in result.stdout
    assert f"No worker serves flow '{flow_type}'" in result.stdout
    await client.get_workflow_handle(sid).terminate()
    result = await invoke("approve", sid, "intr_x", *target)
    assert_one_line_error(result, "has ended", "TERMINATED")


async def test_a_bad_agent_reference_is_a_usage_error(tmp_path: Path) -> None:
    agents = SUPPORT_DIR / "agents.py"
    cases = {
        "no_colon": "write `module:attr`",
        "no_such_module_xyz:flow": "no module named 'no_such_module_xyz'",
        f"{agents}:missing": "has no attribute 'missing'",
        f"{agents}:not_a_flow": "is of type 'int', not an `AgentSessionFlow`",
        f"{tmp_path}/absent.py:flow": "does not exist",
    }
    for ref, fragment in cases.items():
        result = await invoke("worker", "--agent", ref)
        assert_one_line_error(result, fragment, exit_code=2)


async def test_approvals_lists_every_pending_approval_of_every_session(
    served: Served,
) -> None:
    first, first_id = await _waiting_for_refund(served, order="11")
    second = served.session_id()
    await served.sessions.start(
        second, initial_message='call check_stock {"sku": "x1"}'
    )
    (stock,) = (await served.sessions.wait_for_idle(second)).pending_interrupts
    idle = served.session_id()
    await served.sessions.start(idle, initial_message="say hi")
    await served.sessions.wait_for_idle(idle)

    result = await served.run("approvals")
    assert result.exit_code == 0, result.output
    header, *rows, hint = result.stdout.splitlines()
    assert header.split() == [
        "SESSION", "INTERRUPT", "TOOL", "EFFECT", "INPUT", "DEADLINE", "WAITING"
    ]  # fmt: skip
    # The longest-waiting first; the idle session has none.
    assert [r.split()[:4] for r in rows] == [
        [first, first_id, "create_refund", "non"],
        [second, stock.interrupt_id, "check_stock", "read"],
    ]
    assert '{"orderId": "11"}' in rows[0] and "non idempotent write" in rows[0]
    assert re.search(r"\s-\s+\d+s$", rows[1].rstrip()), rows[1]  # no deadline
    assert (
        hint == f"answer one: dex-agents approve {first} {first_id} "
        f"{shlex.join(served.target)} (or reject ... -m 'why')"
    )

    listed = json.loads((await served.run("approvals", "--json")).stdout)
    assert [(a["session_id"], a["interrupt_id"]) for a in listed] == [
        (first, first_id),
        (second, stock.interrupt_id),
    ]
    assert listed[0]["flow_type"] == served.flow_type
    assert listed[0]["tool_name"] == "create_refund"
    assert listed[0]["effect"] == "non_idempotent_write"
    assert listed[0]["arguments"] == {"orderId": "11"}
    assert listed[0]["deadline"] is None and listed[0]["created_at"]
    assert "resolved" not in listed[0]

    # Answered, it leaves the list.
    await served.sessions.resolve_interrupt(first, first_id, approved=True)
    await served.sessions.resolve_interrupt(second, stock.interrupt_id, approved=False)
    await served.sessions.wait_for_idle(first)
    await served.sessions.wait_for_idle(second)
    result = await served.run("approvals")
    assert result.exit_code == 0, result.output
    assert "no approvals waiting in" in result.stdout
    assert json.loads((await served.run("approvals", "--json")).stdout) == []


async def test_show_lists_read_calls_and_only_the_messages_still_queued(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message='call lookup_order {"orderId": "4"}'
    )
    await served.sessions.wait_for_idle(sid)
    # A turn that runs until its gate opens, and a message queued behind it.
    await served.sessions.send_user_message(sid, "say busy ;; pause show-gate")
    gate = served.base / "gates" / "show-gate"
    await served.sessions.send_user_message(sid, "say next")

    result = await served.run("show", sid)
    assert result.exit_code == 0, result.output
    out = result.stdout
    # The read ran inside the segment: it is shown with its result.
    assert '⚙ lookup_order {"orderId": "4"} → finished: order 4: arrived broken' in out
    assert "you › say busy ;; pause show-gate" in out
    queued = out[out.index("queued messages") :]
    assert queued.splitlines()[1:] == ["  you › say next"]
    gate.write_text("")
    # Idle only once the queued message's turn answered too.
    assert (await served.sessions.wait_for_idle(sid)).status == "idle"
    assert "queued messages" not in (await served.run("show", sid)).stdout


async def test_show_says_a_failed_turn_s_messages_go_again_with_the_next(
    served: Served,
) -> None:
    sid = served.session_id()
    await served.sessions.start(sid, initial_message="fail")
    snapshot = await served.sessions.wait_for_idle(sid)
    assert (snapshot.status, snapshot.turns[-1].status) == ("idle", "failed")

    out = (await served.run("show", sid)).stdout
    assert "queued messages" not in out
    carried = out[out.index("messages of the failed turn") :]
    assert carried.splitlines()[:2] == [
        "messages of the failed turn, sent again with your next message",
        "  you › fail",
    ]
    # They went with the next message: nothing is left to show.
    await served.sessions.send_and_wait(sid, "say again")
    assert "messages of the failed turn" not in (await served.run("show", sid)).stdout


async def test_deadlines_show_in_local_time_with_how_long_is_left(
    client: Client, engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> None:
    config = replace(
        ledger_config(tmp_path, flow_type), interrupt_deadline_seconds=7200
    )
    flow = ledger_flow(config)
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    sid = f"deadline-{uuid.uuid4().hex[:8]}"
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    async with create_worker(client, [flow], store=store):
        sessions = SessionClient(client, flow, store)
        await sessions.start(sid, initial_message='call create_refund {"orderId": "8"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        assert interrupt.deadline is not None and "." in interrupt.deadline
        local = re.escape(
            datetime.fromisoformat(interrupt.deadline)
            .astimezone()
            .strftime("%Y-%m-%d %H:%M:%S %Z")
        )
        left = r"\(in (1 h 59 min|2 h)\)"
        shown = await invoke("show", sid, *target)
        assert re.search(rf"deadline +{local} {left}", shown.stdout), shown.stdout
        listed = await invoke("approvals", *target)
        assert re.search(rf"{local} {left}", listed.stdout), listed.stdout
        await sessions.resolve_interrupt(sid, interrupt.interrupt_id, approved=False)
    await store.close()
