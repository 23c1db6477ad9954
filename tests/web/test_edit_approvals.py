"""Approving with an edited input, and expired approvals, through the API and the pages.

Against the real app, server and worker (the suite's `rig`); the page's
"Edit & approve" in the real browser the browser tests use.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, expect
from temporalio.client import Client

from support.browser import screenshot_dir, signed_in_page
from support.session_harness import ledger_config
from support.web_rig import (
    WebRig,
    approve_path,
    bearer,
    csrf_of,
    idle_stream,
    serve_ledger,
    sign_in,
    workerless_app,
)

REFUND = 'call create_refund {"orderId": "7"}'


async def test_approve_with_an_edited_input_runs_it_and_records_both(
    rig: WebRig,
) -> None:
    sid = rig.session_id("edit-api")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    snapshot = await rig.approved_over_api(
        sid, interrupt_id, {"edited_input": {"orderId": "8"}}
    )
    assert snapshot.turns[-1].final_text.startswith(
        "done: create_refund=refunded order 8"
    )
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["8"]

    view = (await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))).json()
    (call,) = view["snapshot"]["turns"][-1]["tool_calls"]
    assert call["arguments"] == {"orderId": "8"}
    assert call["edit"]["original_arguments"] == {"orderId": "7"}
    assert call["edit"]["edited_by"] == "approver"
    # The stream stops at the approval request (an idle point): read on from it.
    asked = await idle_stream(rig.http, f"/api/sessions/{sid}/events")
    assert asked[-1]["type"] == "interrupt_created"
    (resolved,) = [
        e["data"]
        for e in await idle_stream(
            rig.http, f"/api/sessions/{sid}/events", after=asked[-1]["cursor"]
        )
        if e["type"] == "interrupt_resolved"
    ]
    resolved.pop("timestamp", None)
    assert resolved == {
        "interrupt_id": interrupt_id,
        "approved": True,
        "rejection_message": None,
        "resolved_by": "approver",
        "edited_arguments": {"orderId": "8"},
        "original_arguments": {"orderId": "7"},
        "edited_by": "approver",
    }


async def test_a_refused_edit_is_422_naming_the_field_and_the_call_still_waits(
    rig: WebRig,
) -> None:
    sid = rig.session_id("edit-refused")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    refused = await rig.http.post(
        approve_path(sid, interrupt_id),
        json={"edited_input": {"orderId": 8}},
        headers=bearer("approve"),
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_edit", "orderId")
    assert "`orderId`" in error["message"]
    # Not an object at all: the request model refuses it, naming where.
    for bad in ([{"orderId": "8"}], "orderId=8", 8):
        shaped = await rig.http.post(
            approve_path(sid, interrupt_id),
            json={"edited_input": bad},
            headers=bearer("approve"),
        )
        assert shaped.status_code == 422, shaped.text
        assert shaped.json()["error"]["code"] == "invalid_request"
        assert "edited_input" in shaped.json()["error"]["message"]
        assert "field" not in shaped.json()["error"]
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]
    assert rig.ledger.count("create_refund_started") == 0

    # Fixed, the same approval applies.
    fixed = await rig.http.post(
        approve_path(sid, interrupt_id),
        json={"edited_input": {"orderId": "9"}},
        headers=bearer("approve"),
    )
    assert fixed.status_code == 200, fixed.text
    await rig.sessions.wait_for_idle(sid)
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["9"]


async def test_an_edit_with_no_worker_is_503_and_never_recorded(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    sid = "edit-no-worker-3c1d"
    async with workerless_app(client, tmp_path, flow_type, sid) as http:
        await http.post(
            "/api/sessions",
            json={"session_id": sid, "message": REFUND},
            headers=bearer("chat"),
        )
        answer = await http.post(
            approve_path(sid, "intr_0123456789abcdef"),
            json={"edited_input": {"orderId": "8"}},
            headers=bearer("approve"),
        )
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "no_worker"
        assert "nothing was recorded" in answer.json()["error"]["message"]


async def test_the_plain_edit_form_approves_and_the_page_shows_both_inputs(
    rig: WebRig,
) -> None:
    sid = rig.session_id("edit-form")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    await rig.listed_approval(sid)
    async with httpx.AsyncClient(base_url=rig.url) as http:
        await sign_in(rig, http)
        inbox = await http.get("/inbox")
        assert "<summary>Edit &amp; approve</summary>" in inbox.text
        # The textarea starts as the call's input.
        assert re.search(
            r'<textarea name="edited_input"[^>]*>\{\n  &#34;orderId&#34;: &#34;7&#34;\n\}'
            r"</textarea>",
            inbox.text,
        ), inbox.text
        action = f"/sessions/{sid}/approvals/{interrupt_id}/approve"
        form = {"next": "session", "csrf_token": csrf_of(inbox)}
        origin = {"Origin": rig.url}
        bad = await http.post(
            action, data={**form, "edited_input": "{orderId: 8}"}, headers=origin
        )
        assert bad.status_code == 422 and "invalid_edit" in bad.text
        assert "it is not JSON" in bad.text
        refused = await http.post(
            action, data={**form, "edited_input": '{"orderId": ""}'}, headers=origin
        )
        assert refused.status_code == 422 and "`orderId`" in refused.text
        assert rig.ledger.count("create_refund_started") == 0

        done = await http.post(
            action, data={**form, "edited_input": '{"orderId": "10"}'}, headers=origin
        )
        assert (done.status_code, done.headers["location"]) == (303, f"/sessions/{sid}")
        await rig.sessions.wait_for_idle(sid)
        page = await http.get(f"/sessions/{sid}")
        assert "approved with an edited input by approver" in page.text
        assert 'Edited by <span class="edited-by">approver</span>' in page.text
        assert '<pre class="input edited">{\n  &#34;orderId&#34;: &#34;10&#34;\n}' in (
            page.text
        )
        assert '<pre class="input original">{\n  &#34;orderId&#34;: &#34;7&#34;\n}' in (
            page.text
        )
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["10"]


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def expiring(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[WebRig]:
    """The suite's rig, over a flow whose approvals expire after one second."""
    config = ledger_config(tmp_path, flow_type, interrupt_deadline_seconds=1)
    async with serve_ledger(client, config) as served:
        yield served


async def test_an_expired_approval_shows_as_expired_not_rejected(
    expiring: WebRig,
) -> None:
    rig = expiring
    sid = "web-expiry-9a4e"
    await rig.sessions.start(sid, initial_message=REFUND)
    async with asyncio.timeout(30):  # the deadline answers it, then the turn ends
        while (snapshot := await rig.sessions.wait_for_idle(sid)).pending_interrupts:
            await asyncio.sleep(0.1)
    (call,) = snapshot.turns[-1].tool_calls
    assert call.status == "expired"
    page = await rig.http.get(f"/sessions/{sid}", headers=bearer("read"))
    assert page.status_code == 200
    assert '<span class="status status-expired">expired</span>' in page.text
    assert "expired: no approval before the deadline" in page.text
    assert "rejected" not in page.text
    assert rig.ledger.count("create_refund_started") == 0


@pytest.mark.timeout(300)
async def test_edit_and_approve_in_the_browser_runs_the_edited_input(
    browser: Browser,
    rig: WebRig,
    tmp_path: Path,
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-edit-5e2f"
    await rig.sessions.start(sid, initial_message=REFUND)
    await rig.pending(sid)
    await page.goto(f"{rig.url}/sessions/{sid}")
    live = page.locator('article[data-turn-id="turn-1"]')
    card = live.locator(".approval-card")
    await expect(card).to_be_visible(timeout=30_000)

    await card.get_by_text("Edit & approve").click()
    editor = card.locator('textarea[name="edited_input"]')
    await expect(editor).to_have_value('{\n  "orderId": "7"\n}')
    submit = card.get_by_role("button", name="Approve with this input")
    # Not JSON: caught in the page, nothing sent.
    await editor.fill('{"orderId": "8",}')
    await submit.click()
    await expect(card.locator("p.edit-error")).to_contain_text("Not JSON")
    # JSON the tool refuses: the server names the field; the text stays to fix.
    await editor.fill('{"orderId": 8}')
    await submit.click()
    await expect(card.locator("p.edit-error")).to_contain_text("(field orderId)")
    await expect(editor).to_have_value('{"orderId": 8}')
    await page.screenshot(path=str(screenshot_dir(tmp_path) / "session-edit.png"))
    snapshot = await rig.sessions.snapshot(sid)
    assert len(snapshot.pending_interrupts) == 1
    assert rig.ledger.count("create_refund_started") == 0

    await editor.fill('{"orderId": "8"}')
    await submit.click()
    await expect(card.locator(".decided-by")).to_have_text(
        "approved with an edited input by approver"
    )
    await expect(live.locator(".answer")).to_contain_text(
        "done: create_refund=refunded order 8", timeout=30_000
    )
    await expect(page.locator("#session-status")).to_have_text("idle")
    call = live.locator("li.call.edited")
    await expect(call.locator(".status")).to_have_text("finished")
    await expect(call.locator(".edited-by")).to_have_text("approver")
    await expect(call.locator("pre.input.edited")).to_contain_text('"orderId": "8"')
    await expect(call.locator("pre.input.original")).to_contain_text('"orderId": "7"')
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["8"]
    await page.screenshot(
        path=str(screenshot_dir(tmp_path) / "session-edited.png"), full_page=True
    )

    # Read again, the finished turn shows the same.
    await page.reload()
    done = page.locator('article[data-turn-id="turn-1"] li.call.edited')
    await expect(done.locator(".decided-by")).to_have_text(
        "approved with an edited input by approver"
    )
    await expect(done.locator("pre.input.original")).to_contain_text('"orderId": "7"')
    assert dialogs == []


@pytest.mark.timeout(300)
async def test_edit_and_approve_from_the_inbox_row(
    browser: Browser,
    rig: WebRig,
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-inbox-edit-6f3a"
    await rig.sessions.start(sid, initial_message=REFUND)
    row = page.locator(f'tr.approval[data-session-id="{sid}"]')
    await expect(row).to_be_visible(timeout=30_000)
    await row.get_by_text("Edit & approve").click()
    editor = row.locator('textarea[name="edited_input"]')
    await expect(editor).to_have_value('{\n  "orderId": "7"\n}')
    await editor.fill('["orderId"]')
    await row.get_by_role("button", name="Approve with this input").click()
    await expect(row.locator("p.edit-error")).to_contain_text("must be a JSON object")
    await editor.fill('{"orderId": "12"}')
    await row.get_by_role("button", name="Approve with this input").click()
    await expect(row.locator(".decided-by")).to_have_text(
        "approved with an edited input by approver"
    )
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text.startswith(
        "done: create_refund=refunded order 12"
    )
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == ["12"]
    assert dialogs == []
