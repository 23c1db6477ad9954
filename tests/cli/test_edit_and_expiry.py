"""`approve --edit`, and how `show`, `events` and the chat show edits and expiries.

The commands run as a user runs them: `approve`, `show` and `events` in-process
against the run's dev server and an in-process worker; the chat as a real
process in a pseudo-terminal, against `dex-agents worker`.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine, SessionClient, create_worker
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import ledger_flow
from support.cli_harness import (
    Served,
    Term,
    assert_one_line_error,
    invoke,
    spawn_chat,
)
from support.session_harness import ledger_config

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

RUN = uuid.uuid4().hex[:6]


async def _waiting_for_refund(served: Served, order: str = "7") -> tuple[str, str]:
    """A session waiting for approval of `create_refund`; its ID and the interrupt's."""
    sid = served.session_id()
    await served.sessions.start(
        sid, initial_message=f'call create_refund {{"orderId": "{order}"}}'
    )
    (interrupt,) = (await served.sessions.wait_for_idle(sid)).pending_interrupts
    return sid, interrupt.interrupt_id


async def test_approve_with_an_edit_runs_the_edited_input_and_show_names_the_editor(
    served: Served,
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served)
    result = await served.run(
        "approve", sid, interrupt_id, "--edit", '{"orderId": "8"}', "--as", "carol"
    )
    assert result.exit_code == 0, result.output
    assert (
        f"approved {interrupt_id} of session {sid} with an edited input: it runs "
        'with {"orderId": "8"}'
    ) in result.stdout
    snap = await served.sessions.wait_for_idle(sid)
    answer = snap.turns[-1].final_text
    assert answer.startswith("done: create_refund=refunded order 8"), answer
    assert "A person edited this call's input before approving it" in answer
    # One refund, of the order the person chose; none of the model's.
    assert [e["order_id"] for e in served.ledger.entries("create_refund")] == ["8"]
    assert served.ledger.count("create_refund_started") == 1

    shown = await served.run("show", sid)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    (call,) = [i for i, line in enumerate(lines) if "⚙ create_refund" in line]
    assert lines[call].startswith(
        '⚙ create_refund {"orderId": "8"} → finished, approved with an edited input '
        "by carol: refunded order 8"
    ), lines[call]
    assert lines[call + 1] == (
        '  ✎ edited by carol before approval; the model asked for {"orderId": "7"}'
    )
    data = json.loads((await served.run("show", sid, "--json")).stdout)
    (record,) = data["turns"][-1]["tool_calls"]
    assert record["arguments"] == {"orderId": "8"}
    assert record["edit"]["original_arguments"] == {"orderId": "7"}
    assert record["edit"]["edited_by"] == "carol"

    printed = await served.run("events", sid)
    assert (
        f'{interrupt_id} approved with an edited input by carol: {{"orderId": "8"}} '
        '(the model asked for {"orderId": "7"})'
    ) in printed.stdout

    # The same edit again changes nothing, and that is what was asked: exit 0.
    same = await served.run("approve", sid, interrupt_id, "--edit", '{"orderId": "8"}')
    assert same.exit_code == 0, same.output
    assert (
        f'{interrupt_id} was already approved with an edit {{"orderId": "8"}}; '
        "nothing changed"
    ) in same.stdout
    # Another edit did not apply: it fails (exit 4), naming the edit that ran.
    again = await served.run("approve", sid, interrupt_id, "--edit", '{"orderId": "9"}')
    assert_one_line_error(
        again,
        f"{interrupt_id} of session {sid!r} was already approved with an earlier "
        'edit {"orderId": "8"}; this edit {"orderId": "9"} was not applied',
        exit_code=4,
    )
    assert served.ledger.count("create_refund") == 1


async def test_an_edit_after_an_approval_with_the_models_input_exits_4(
    served: Served,
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="41")
    approved = await served.run("approve", sid, interrupt_id)
    assert approved.exit_code == 0, approved.output
    await served.sessions.wait_for_idle(sid)

    late = await served.run("approve", sid, interrupt_id, "--edit", '{"orderId": "42"}')
    assert_one_line_error(
        late,
        f"{interrupt_id} of session {sid!r} was already approved with its original "
        """input (the model's); this edit {"orderId": "42"} was not applied, and """
        "nothing changed",
        f"`dex-agents show {sid} {shlex.join(served.target)}`",
        exit_code=4,
    )
    # A plain approval again is the same answer: nothing to report but that.
    again = await served.run("approve", sid, interrupt_id)
    assert again.exit_code == 0, again.output
    assert f"{interrupt_id} was already approved; nothing changed" in again.stdout
    assert [e["order_id"] for e in served.ledger.entries("create_refund")] == ["41"]


async def test_a_refused_edit_names_the_field_and_the_call_still_waits(
    served: Served, tmp_path: Path
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="21")
    refused = await served.run("approve", sid, interrupt_id, "--edit", '{"orderId": 8}')
    assert_one_line_error(
        refused, f"the edit was refused and {interrupt_id} still waits", "`orderId`"
    )
    snap = await served.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt_id]
    assert snap.pending_interrupts[0].arguments == {"orderId": "21"}
    assert served.ledger.count("create_refund_started") == 0

    # Fixed, from a file (`@FILE`): it applies.
    edit = tmp_path / "input.json"
    edit.write_text('{\n  "orderId": "22"\n}\n')
    fixed = await served.run("approve", sid, interrupt_id, "--edit", f"@{edit}")
    assert fixed.exit_code == 0, fixed.output
    assert "with an edited input" in fixed.stdout
    await served.sessions.wait_for_idle(sid)
    assert [e["order_id"] for e in served.ledger.entries("create_refund")] == ["22"]


async def test_an_edit_that_is_no_json_object_is_a_usage_error(
    served: Served, tmp_path: Path
) -> None:
    sid, interrupt_id = await _waiting_for_refund(served, order="31")
    cases = {
        "not json": "is not JSON",
        '["orderId", "8"]': "must be a JSON object ({...}), not an array",
        '{"orderId": NaN}': "NaN is not a JSON number",
        f"@{tmp_path / 'absent.json'}": "cannot read",
    }
    for value, fragment in cases.items():
        result = await served.run("approve", sid, interrupt_id, "--edit", value)
        assert_one_line_error(result, "bad `--edit", fragment, exit_code=2)
    # `reject` never runs the call: an edit with it is refused, saying what to use.
    rejected = await served.run("reject", sid, interrupt_id, "--edit", "{}")
    assert_one_line_error(
        rejected,
        "`reject` takes no `--edit`",
        f"approve {sid} {interrupt_id} --edit JSON",
        exit_code=2,
    )
    snap = await served.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snap.pending_interrupts] == [interrupt_id]
    assert served.ledger.count("create_refund_started") == 0

    # `show` says how to approve with an edit, starting from the call's input.
    shown = await served.run("show", sid)
    assert (
        f"edit:    dex-agents approve {sid} {interrupt_id} --edit "
        """'{"orderId": "31"}'"""
    ) in shown.stdout
    helped = await invoke("approve", "--help")
    assert "--edit JSON|@FILE" in helped.stdout
    assert "Approve with this input instead of the model's" in helped.stdout
    assert "--edit" not in (await invoke("reject", "--help")).stdout


async def test_show_and_events_say_an_approval_expired_never_rejected(
    client: Client, engine: EmbeddedEngine, tmp_path: Path, flow_type: str
) -> None:
    config = replace(ledger_config(tmp_path, flow_type), interrupt_deadline_seconds=1)
    flow = ledger_flow(config)
    store = await SQLiteRuntimeStore.open(tmp_path / "runtime.sqlite")
    sid = f"expiry-{RUN}"
    target = ["--state-dir", str(engine.state_dir), "--store", str(store.path)]
    async with create_worker(client, [flow], store=store):
        sessions = SessionClient(client, flow, store)
        await sessions.start(sid, initial_message='call create_refund {"orderId": "5"}')
        (interrupt,) = (await sessions.wait_for_idle(sid)).pending_interrupts
        async with asyncio.timeout(30):  # the deadline answers it, then the turn ends
            while (snap := await sessions.wait_for_idle(sid)).pending_interrupts:
                await asyncio.sleep(0.1)
        (record,) = snap.turns[-1].tool_calls
        assert record.status == "expired"

        shown = await invoke("show", sid, *target)
        assert shown.exit_code == 0, shown.output
        (line,) = [row for row in shown.stdout.splitlines() if "⚙ create_refund" in row]
        assert line == (
            '⚙ create_refund {"orderId": "5"} → expired: no approval before the deadline'
        )
        printed = await invoke("events", sid, *target)
        assert (
            f"{interrupt.interrupt_id} expired: no approval before the deadline"
        ) in printed.stdout
        assert "rejected" not in shown.stdout + printed.stdout

        # A late answer says it expired: an approval fails, a rejection changes nothing.
        late = await invoke("approve", sid, interrupt.interrupt_id, *target)
        assert_one_line_error(
            late, "was already expired: no approval before the deadline", exit_code=4
        )
        again = await invoke("reject", sid, interrupt.interrupt_id, *target)
        assert again.exit_code == 0, again.output
        assert "already expired: no approval before the deadline" in again.stdout
    await store.close()
    assert Ledger(config.ledger_path).count("create_refund_started") == 0


async def test_the_chat_edits_an_approval_and_a_refused_edit_is_kept_to_fix(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    chat = spawn_chat(
        engine, tmp_path, flow_type, f"chat-edit-{RUN}", "--agent", "agents:flow"
    )
    chat.expect("you › ")
    chat.sendline('call create_refund {"orderId": "7"}')
    chat.expect(re.escape("approve or reject? [a/r] (e: edit the input, then approve)"))
    chat.sendline("e")
    # The input is on the line, to edit in place: clear it (Ctrl-U) and type another.
    chat.expect_exact('edited input › {"orderId": "7"}')
    chat.sendcontrol("u")
    chat.sendline('{"orderId": 8}')
    chat.expect(re.escape("✗ the edit was refused and the call still waits"))
    chat.expect(re.escape("field `orderId`"))
    # Asked again, with the refused text to fix: nothing typed is lost.
    chat.expect_exact('edited input › {"orderId": 8}')
    chat.sendcontrol("u")
    chat.sendline('{"orderId": "8"}')
    chat.expect(
        re.escape('with an edited input: {"orderId": "8"} (the model asked for ')
    )
    chat.expect(re.escape("refunded order 8"))
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
    ledger = Ledger(tmp_path / "ledger.jsonl")
    assert [e["order_id"] for e in ledger.entries("create_refund")] == ["8"]
