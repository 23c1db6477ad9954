"""Stopping a turn, and answering a spend limit reached, through the API and the pages.

Against the real app, server and worker (the suite's `rig`, and one over a
flow with a spend limit); the Stop button and the "new limit (USD)" field in
the real browser the browser tests use.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, expect
from temporalio.client import Client

from dex_agents.web._tokens import Role
from support.browser import signed_in_page
from support.session_harness import ledger_config
from support.web_rig import (
    ROLE_TOKENS,
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
SPENT = "spend limit reached: 0.0020 of 0.0015 USD spent"


def cancel_path(sid: str) -> str:
    return f"/api/sessions/{sid}/cancel"


# -- stopping a turn ------------------------------------------------------------


async def test_post_cancel_stops_a_running_turn_and_is_false_when_none_runs(
    rig: WebRig,
) -> None:
    sid = rig.session_id("cancel-api")
    await rig.sessions.start(sid, initial_message="stream 6 ;; pause api-held")
    await rig.reached("api-held")

    stopped = await rig.http.post(
        cancel_path(sid), json={"reason": "wrong way"}, headers=bearer("chat")
    )

    assert stopped.status_code == 200, stopped.text
    assert stopped.json() == {"cancelled": True}
    snapshot = await rig.sessions.wait_for_idle(sid)
    (turn,) = snapshot.turns
    assert (turn.status, turn.error, turn.final_text) == (
        "cancelled",
        "the turn was cancelled: wrong way",
        "t0 t1 t2 t3 ",
    )
    # The live stream ends the turn with `turn_cancelled`, an idle point.
    events = await idle_stream(rig.http, f"/api/sessions/{sid}/events")
    assert events[-1]["type"] == "turn_cancelled"
    assert {k: events[-1]["data"][k] for k in ("reason", "cancelled_by")} == {
        "reason": "wrong way",
        "cancelled_by": "chatter",
    }
    # AG-UI: the run finished, cancelled (a person's Stop is not an error).
    runs = await idle_stream(rig.http, f"/api/sessions/{sid}/events/ag-ui")
    assert runs[0]["type"] == "RUN_STARTED"
    assert runs[-1]["type"] == "RUN_FINISHED"
    assert runs[-1]["outcome"] == {"type": "cancelled"}
    assert runs[-1]["runId"] == "turn-1"
    assert runs[-1]["metadata"]["cancellation"] == {
        "reason": "wrong way",
        "cancelled_by": "chatter",
    }
    assert not [r for r in runs if r["type"] == "RUN_ERROR"]

    # Nothing runs now: 200, `cancelled: false`, with or without a body.
    for body in (None, {}):
        again = await rig.http.post(
            cancel_path(sid), json=body, headers=bearer("admin")
        )
        assert (again.status_code, again.json()) == (200, {"cancelled": False})
    # The session page shows the stopped turn, with its reason.
    page = await rig.http.get(f"/sessions/{sid}", headers=bearer("read"))
    assert '<article class="turn turn-cancelled" data-turn-id="turn-1">' in page.text
    assert '<p class="cancelled">the turn was cancelled: wrong way</p>' in page.text
    # The next message is answered as usual.
    after = await rig.sessions.send_and_wait(sid, "say hello")
    assert after.turns[-1].final_text == "said: hello (after 1 failure note(s))"


@pytest.mark.parametrize(
    ("role", "status"), [(None, 401), ("read", 403), ("approve", 403)]
)
async def test_cancel_needs_the_chat_role_and_a_refusal_changes_nothing(
    rig: WebRig, role: Role | None, status: int
) -> None:
    sid = rig.session_id("cancel-roles")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    refused = await rig.http.post(cancel_path(sid), headers=bearer(role))
    assert refused.status_code == status, refused.text
    assert set(refused.json()) == {"error"}
    bad = await rig.http.post(
        cancel_path(sid), json={"reason": 5}, headers=bearer("chat")
    )
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_request")
    unknown = await rig.http.post(
        cancel_path("cancel-no-such-session"), headers=bearer("chat")
    )
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (
        404,
        "session_not_found",
    )
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]
    # The chat role stops it: the waiting approval closes, and nothing runs.
    stopped = await rig.http.post(cancel_path(sid), headers=bearer("chat"))
    assert stopped.json() == {"cancelled": True}
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].status == "cancelled"
    assert snapshot.pending_interrupts == []
    assert rig.ledger.count("create_refund_started") == 0


async def test_cancel_with_no_worker_is_503_and_nothing_changes(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    sid = "cancel-no-worker-7b2e"
    async with workerless_app(client, tmp_path, flow_type, sid) as http:
        await http.post(
            "/api/sessions",
            json={"session_id": sid, "message": "say hi"},
            headers=bearer("chat"),
        )
        answer = await http.post(cancel_path(sid), headers=bearer("chat"))
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "no_worker"


async def test_the_plain_stop_form_stops_the_turn(rig: WebRig) -> None:
    sid = rig.session_id("cancel-form")
    await rig.sessions.start(sid, initial_message="stream 6 ;; pause form-held")
    await rig.reached("form-held")
    async with httpx.AsyncClient(base_url=rig.url) as http:
        form = await http.get("/login")
        await http.post(
            "/login",
            data={"token": ROLE_TOKENS["chat"], "csrf_token": csrf_of(form)},
        )
        page = await http.get(f"/sessions/{sid}")
        assert page.status_code == 200
        assert (
            f'<form id="stop-turn" method="post" action="/sessions/{sid}/cancel">'
            in (page.text)
        )  # shown (not `hidden`): a turn runs
        done = await http.post(
            f"/sessions/{sid}/cancel",
            data={"reason": "from the form", "csrf_token": csrf_of(page)},
            headers={"Origin": rig.url},
        )
        assert (done.status_code, done.headers["location"]) == (303, f"/sessions/{sid}")
        snapshot = await rig.sessions.wait_for_idle(sid)
        assert snapshot.turns[-1].error == "the turn was cancelled: from the form"
        idle = await http.get(f"/sessions/{sid}")
        assert f'action="/sessions/{sid}/cancel" hidden>' in idle.text


# -- a spend limit reached -------------------------------------------------------


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def budgeted(
    client: Client, tmp_path: Path, flow_type: str
) -> AsyncIterator[WebRig]:
    """The suite's rig, over a flow whose sessions may spend 0.0015 USD."""
    config = ledger_config(tmp_path, flow_type, spend_limit=0.0015)
    async with serve_ledger(
        client, config, worker_timeout=5.0, wait_timeout=5.0
    ) as served:
        yield served


async def paused(rig: WebRig, sid: str) -> str:
    """Start `sid` and spend until it waits for a new limit; the interrupt's ID."""
    await rig.sessions.start(sid, initial_message="say one")
    await rig.sessions.send_and_wait(sid, "say two")  # 0.002 USD spent
    snapshot = await rig.sessions.send_and_wait(sid, "say three")
    assert snapshot.status == "budget_reached"
    (interrupt,) = snapshot.pending_interrupts
    return interrupt.interrupt_id


async def test_approve_with_new_spend_limit_through_the_api(budgeted: WebRig) -> None:
    rig = budgeted
    sid = "web-budget-api-4c8d"
    interrupt_id = await paused(rig, sid)
    await rig.listed_approval(sid)
    (listed,) = [
        a
        for a in (await rig.http.get("/api/approvals", headers=bearer("read"))).json()[
            "approvals"
        ]
        if a["session_id"] == sid
    ]
    assert (listed["kind"], listed["tool_name"], listed["arguments"]) == (
        "budget",
        "spend_limit",
        {"spent_usd": 0.002, "spend_limit_usd": 0.0015},
    )
    page = await rig.http.get(
        "/api/sessions?status=budget_reached", headers=bearer("read")
    )
    assert [s["session_id"] for s in page.json()["sessions"]] == [sid]
    # AG-UI: the run waits on an interrupt that asks for a number.
    (created,) = [
        e for e in await rig.sessions.events(sid) if e.type == "interrupt_created"
    ]
    assert created.data["kind"] == "budget"
    runs = await idle_stream(
        rig.http, f"/api/sessions/{sid}/events/ag-ui", after=created.cursor - 1
    )
    (asked,) = runs
    (interrupt,) = asked["outcome"]["interrupts"]
    assert (interrupt["id"], interrupt["reason"]) == (interrupt_id, "spend_limit")
    assert interrupt["responseSchema"]["required"] == ["new_spend_limit"]
    assert interrupt["message"].startswith(SPENT)

    # Missing, too low, not a positive number: refused, and nothing changes.
    for body, status in (
        (None, 400),
        ({}, 400),
        ({"new_spend_limit": 0.001}, 400),
        ({"new_spend_limit": "lots"}, 422),
        ({"new_spend_limit": -1}, 422),
        ({"new_spend_limit": 0}, 422),
        ({"new_spend_limit": 0.01, "edited_input": {"x": 1}}, 400),
    ):
        refused = await rig.http.post(
            approve_path(sid, interrupt_id), json=body, headers=bearer("approve")
        )
        assert refused.status_code == status, (body, refused.text)
        assert refused.json()["error"]["code"] == "invalid_request", refused.text
        if status == 400:
            assert "new_spend_limit" in refused.json()["error"]["message"]
    snapshot = await rig.sessions.snapshot(sid)
    assert snapshot.status == "budget_reached"

    snapshot = await rig.approved_over_api(sid, interrupt_id, {"new_spend_limit": 0.01})
    assert (snapshot.turns[-1].status, snapshot.turns[-1].final_text) == (
        "completed",
        "said: three",
    )
    (resolved,) = [
        e.data for e in await rig.sessions.events(sid) if e.type == "interrupt_resolved"
    ]
    assert (resolved["new_spend_limit"], resolved["resolved_by"]) == (0.01, "approver")


async def test_new_spend_limit_for_a_tool_call_is_refused(budgeted: WebRig) -> None:
    rig = budgeted
    sid = rig.session_id("web-budget-tool")
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    refused = await rig.http.post(
        approve_path(sid, interrupt_id),
        json={"new_spend_limit": 5},
        headers=bearer("approve"),
    )
    assert refused.status_code == 400, refused.text
    assert "not a budget" in refused.json()["error"]["message"]
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]
    assert rig.ledger.count("create_refund_started") == 0


async def test_the_plain_budget_form_in_the_inbox(budgeted: WebRig) -> None:
    rig = budgeted
    sid = rig.session_id("web-budget-form")
    interrupt_id = await paused(rig, sid)
    await rig.listed_approval(sid)
    async with httpx.AsyncClient(base_url=rig.url) as http:
        await sign_in(rig, http)
        inbox = await http.get("/inbox")
        assert f'data-interrupt-id="{interrupt_id}"' in inbox.text
        assert f'<p class="budget">{SPENT}</p>' in inbox.text
        assert 'name="new_spend_limit"' in inbox.text
        assert 'aria-label="new limit (USD)"' in inbox.text
        assert "Edit &amp; approve" not in inbox.text  # a budget has no input to edit
        action = f"/sessions/{sid}/approvals/{interrupt_id}/approve"
        form = {"next": "session", "csrf_token": csrf_of(inbox)}
        origin = {"Origin": rig.url}
        bad = await http.post(
            action, data={**form, "new_spend_limit": "lots"}, headers=origin
        )
        assert bad.status_code == 400 and "is not a positive number of USD" in bad.text
        low = await http.post(
            action, data={**form, "new_spend_limit": "0.001"}, headers=origin
        )
        assert low.status_code == 400 and "new_spend_limit" in low.text
        done = await http.post(
            action, data={**form, "new_spend_limit": "0.01"}, headers=origin
        )
        assert (done.status_code, done.headers["location"]) == (303, f"/sessions/{sid}")
        snapshot = await rig.sessions.wait_for_idle(sid)
        assert snapshot.turns[-1].final_text == "said: three"
        sessions = await http.get("/sessions")
        assert '<option value="budget_reached">' in sessions.text


# -- in the browser ---------------------------------------------------------------


async def signed_in_as(browser: Browser, rig: WebRig, role: Role) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 760})
    await page.goto(f"{rig.url}/login")
    await page.fill('input[name="token"]', ROLE_TOKENS[role])
    await page.click('form.login button[type="submit"]')
    await page.wait_for_url(f"{rig.url}/inbox")
    return page


@pytest.mark.timeout(300)
async def test_the_stop_button_stops_a_running_turn_in_the_browser(
    browser: Browser,
    rig: WebRig,
) -> None:
    page = await signed_in_as(browser, rig, "admin")
    sid = "browser-stop-8d1c"
    await rig.sessions.start(sid, initial_message="stream 6 ;; pause browser-held")
    await page.goto(f"{rig.url}/sessions/{sid}")
    live = page.locator('article[data-turn-id="turn-1"]')
    await expect(live.locator(".answer")).to_contain_text("t0 t1 t2 t3", timeout=30_000)
    await rig.reached("browser-held")
    stop = page.locator("#stop-turn")
    await expect(stop).to_be_visible()
    await stop.locator('input[name="reason"]').fill("not now")
    await stop.get_by_role("button", name="Stop").click()

    await expect(live.locator("h2 .status")).to_have_text("cancelled", timeout=30_000)
    await expect(live.locator("p.cancelled")).to_have_text("stopped by root: not now")
    await expect(page.locator("#session-status")).to_have_text("idle")
    await expect(stop).to_be_hidden()
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].error == "the turn was cancelled: not now"

    # The next message, sent from the page, is answered as usual.
    await page.locator('#send-message textarea[name="text"]').fill("say hello")
    await page.locator("#send-message button").click()
    await expect(page.locator('article[data-turn-id="turn-2"] .answer')).to_have_text(
        "said: hello (after 1 failure note(s))", timeout=30_000
    )
    await expect(stop).to_be_hidden()


@pytest.mark.timeout(300)
async def test_raise_the_spend_limit_from_the_session_page_and_the_inbox(
    browser: Browser,
    budgeted: WebRig,
) -> None:
    rig = budgeted
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-budget-session-2f7a"
    await paused(rig, sid)
    await page.goto(f"{rig.url}/sessions/{sid}")
    await expect(page.locator("#session-status")).to_have_text("budget_reached")
    card = page.locator('article[data-turn-id="turn-3"] .approval-card.budget')
    await expect(card).to_be_visible(timeout=30_000)
    await expect(card.locator("p.budget")).to_have_text(SPENT)
    assert await card.get_by_text("Edit & approve").count() == 0
    limit = card.get_by_label("new limit (USD)")
    raise_it = card.get_by_role("button", name="Raise the limit")
    await raise_it.click()  # empty: caught in the page, nothing sent
    await expect(card.locator("p.edit-error")).to_contain_text("Type a number of USD")
    await limit.fill("0.001")  # not above what was spent: the session refuses it
    await raise_it.click()
    await expect(card.locator("p.edit-error")).to_contain_text("Refused:")
    assert (await rig.sessions.snapshot(sid)).status == "budget_reached"
    await limit.fill("0.01")
    await raise_it.click()
    await expect(card.locator(".decided-by")).to_have_text(
        "limit raised to 0.0100 USD by approver"
    )
    await expect(page.locator('article[data-turn-id="turn-3"] .answer')).to_have_text(
        "said: three", timeout=30_000
    )
    await expect(page.locator("#session-status")).to_have_text("idle")

    # From the inbox row: the same number field, no "Edit & approve".
    other = "browser-budget-inbox-2f7a"
    await paused(rig, other)
    await page.goto(f"{rig.url}/inbox")
    row = page.locator(f'tr.approval[data-session-id="{other}"]')
    await expect(row).to_be_visible(timeout=30_000)
    await expect(row.locator("td.tool")).to_have_text("spend limit")
    await expect(row.locator("p.budget")).to_have_text(SPENT)
    assert await row.get_by_text("Edit & approve").count() == 0
    await row.get_by_label("new limit (USD)").fill("0.02")
    await row.get_by_role("button", name="Raise the limit").click()
    await expect(row.locator(".decided-by")).to_have_text(
        "limit raised to 0.0200 USD by approver"
    )
    snapshot = await rig.sessions.wait_for_idle(other)
    assert snapshot.turns[-1].final_text == "said: three"
    assert dialogs == []
