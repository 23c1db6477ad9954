"""The approval inbox in a real browser: Debian's chromium, driven by Playwright.

The browser, its skip rule and the screenshots' directory come from
`support.browser`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, Page, expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.testing._ledger_flow import ledger_flow
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.browser import screenshot_dir, signed_in_page
from support.session_harness import ledger_config
from support.web_rig import ROLE_TOKENS, WebRig, role_tokens

XSS = "<script>alert(1)</script>"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "web.md"

# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(300)


async def test_inbox_shows_approvals_live_and_approves_in_place(
    browser: Browser, rig: WebRig, tmp_path: Path
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    await expect(page.locator("#no-approvals")).to_be_visible()

    # A session asks for approval while the inbox is open: it appears without a reload.
    hostile = "browser-hostile-1a"
    await rig.sessions.start(
        hostile,
        initial_message='call create_refund {"orderId": "7", "note": "' + XSS + '"}',
    )
    await rig.sessions.start(
        "browser-second-1a", initial_message='call check_stock {"sku": "kettle-2"}'
    )
    row = page.locator(f'tr.approval[data-session-id="{hostile}"]')
    await expect(row).to_be_visible(timeout=30_000)
    await expect(
        page.locator('tr.approval[data-session-id="browser-second-1a"]')
    ).to_be_visible(timeout=30_000)
    # The tool's input is shown as text, exactly, and nothing in it ran.
    await expect(row.locator("pre.input")).to_contain_text(f'"note": "{XSS}"')
    assert await page.locator("#approvals script").count() == 0
    assert await row.locator("td.tool").text_content() == "create_refund"
    await expect(page.locator("#approval-count")).to_have_text("2")
    await page.screenshot(path=str(screenshot_dir(tmp_path) / "inbox.png"))
    # A row's every control fits a 1280-pixel window, its edit form open or not:
    # nothing to scroll sideways for.
    await _fits_the_window(page, row)
    await row.locator("details.edit summary").click()
    await expect(row.locator("form.edit-form textarea")).to_be_visible()
    await _fits_the_window(page, row)
    await row.locator("details.edit summary").click()

    await row.locator("button.approve").click()
    await expect(row.locator(".decided-by")).to_have_text("approved by approver")
    snapshot = await rig.sessions.wait_for_idle(hostile)
    assert snapshot.turns[-1].final_text == "done: create_refund=refunded order 7"
    assert rig.ledger.count("create_refund") == 1
    # The rest of the inbox: the other row is still there, the decided one stays in place.
    await expect(page.locator("#approval-count")).to_have_text("1")
    assert dialogs == []


async def _fits_the_window(page: Page, row: Locator) -> None:
    width = await page.evaluate("window.innerWidth")
    assert await page.evaluate("document.documentElement.scrollWidth") <= width
    for control in ("button.approve", "input[name=message]", "button.reject"):
        box = await row.locator(control).first.bounding_box()
        assert box is not None, control
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, (control, box)


async def test_a_reject_with_a_message_from_the_inbox_reaches_the_model(
    browser: Browser, rig: WebRig
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-reject-2b"
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "5"}')
    row = page.locator(f'tr.approval[data-session-id="{sid}"]')
    await expect(row).to_be_visible(timeout=30_000)
    await row.locator('input[name="message"]').fill("order 5 is under review")
    await row.locator("button.reject").click()
    await expect(row.locator(".decided-by")).to_have_text("rejected by approver")
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text == (
        "done: create_refund=The user rejected this call: order 5 is under review"
    )
    assert rig.ledger.count("create_refund_started") == 0
    assert dialogs == []


async def test_session_page_approves_in_place_and_streams_the_answer(
    browser: Browser, rig: WebRig, tmp_path: Path
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-session-3c"
    await rig.sessions.start(sid, initial_message="say hello there")
    await rig.sessions.wait_for_idle(sid)
    # The next turn's answer waits at a gate after the approval, so the page is
    # seen before it arrives, and then without a reload.
    await rig.sessions.send_user_message(
        sid, 'call create_refund {"orderId": "8"} ;; pause answer'
    )
    await rig.pending(sid)
    await page.goto(f"{rig.url}/sessions/{sid}")
    live = page.locator('article[data-turn-id="turn-2"]')
    card = live.locator(".approval-card")
    await expect(card).to_be_visible(timeout=30_000)
    await expect(card.locator("pre.input")).to_contain_text('"orderId": "8"')
    await expect(page.locator('article[data-turn-id="turn-1"] .answer')).to_have_text(
        "said: hello there"
    )

    await card.locator("button.approve").click()
    await expect(card.locator(".decided-by")).to_have_text("approved by approver")
    await rig.reached("answer")
    await expect(page.locator("#session-status")).to_have_text("running")
    assert await live.locator(".answer").text_content() == ""
    rig.open_gate("answer")
    await expect(live.locator(".answer")).to_have_text(
        "done: create_refund=refunded order 8", timeout=30_000
    )
    await expect(page.locator("#session-status")).to_have_text("idle")
    await expect(live.locator("li.call .status")).to_have_text("finished")
    await page.screenshot(
        path=str(screenshot_dir(tmp_path) / "session.png"), full_page=True
    )
    assert dialogs == []


async def test_a_form_post_from_another_site_is_refused(
    browser: Browser, rig: WebRig
) -> None:
    # A page elsewhere posts the approve form with the signed-in browser's cookie.
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-csrf-4d"
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "4"}')
    interrupt_id = await rig.pending(sid)
    action = f"{rig.url}/sessions/{sid}/approvals/{interrupt_id}/approve"
    forged = (
        f'<form id="f" method="post" action="{action}"><input name="next" value="inbox">'
        '<input name="csrf_token" value="guessed"></form>'
    )
    # The signed-in browser, on a page of another origin (a data: URL is opaque):
    # SameSite keeps the cookie home, and the origin and token checks would refuse it.
    await page.goto("data:text/html," + forged)
    async with page.expect_navigation():
        await page.evaluate("document.getElementById('f').submit()")
    refused = await page.locator("h1 code").text_content()
    assert refused in ("unauthorized", "csrf_failed")
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]


_POST_JSON = """async ([path, token]) => {
  const headers = {"Content-Type": "application/json"};
  if (token !== null) headers["X-CSRF-Token"] = token;
  const response = await fetch(path, {method: "POST", credentials: "same-origin", headers, body: "{}"});
  return [response.status, await response.json()];
}"""
"""A script's POST with the browser's cookies, and `X-CSRF-Token` unless null."""


async def test_a_script_of_the_app_s_origin_does_what_the_csrf_refusal_says(
    browser: Browser, rig: WebRig
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-script-5e"
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "9"}')
    interrupt_id = await rig.pending(sid)
    path = f"/api/sessions/{sid}/approvals/{interrupt_id}/approve"
    # A script on a page of the app posts with the cookie alone: refused, and told how.
    status, body = await page.evaluate(_POST_JSON, [path, None])
    assert (status, body["error"]["code"]) == (403, "csrf_failed")
    assert "`dex_csrf` cookie's value" in body["error"]["message"]
    assert "`X-CSRF-Token`" in body["error"]["message"]
    # What the refusal says: the cookie's value, read by the script, in the header.
    token = await page.evaluate(
        "document.cookie.split('; ').find((c) => c.startsWith('dex_csrf='))"
    )
    assert token, await page.evaluate("document.cookie")
    status, body = await page.evaluate(_POST_JSON, [path, token.split("=", 1)[1]])
    assert (status, body["by"]) == (200, "approver"), body
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text == "done: create_refund=refunded order 9"
    # The token's own cookie stays out of scripts' reach.
    assert "dex_token" not in await page.evaluate("document.cookie")
    assert dialogs == []


async def test_the_session_page_header_follows_the_live_turns(
    browser: Browser, rig: WebRig
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-header-6f"
    await rig.sessions.start(sid, initial_message="say one")
    await rig.sessions.wait_for_idle(sid)
    await page.goto(f"{rig.url}/sessions/{sid}")
    status, count = page.locator("#session-status"), page.locator("#turn-count")
    await expect(status).to_have_text("idle")
    await expect(count).to_have_text("1 turn")

    # A second turn, held at a gate before it answers: the header says so live.
    await rig.sessions.send_user_message(sid, "say two ;; pause two")
    await rig.reached("two")
    await expect(status).to_have_text("running")
    await expect(count).to_have_text("2 turns")
    rig.open_gate("two")
    await expect(page.locator('article[data-turn-id="turn-2"] .answer')).to_have_text(
        "said: two", timeout=30_000
    )
    await expect(status).to_have_text("idle")
    await expect(count).to_have_text("2 turns")
    # As a fresh page of the session says it.
    await page.reload()
    await expect(count).to_have_text("2 turns")
    assert dialogs == []


def _docs_follow() -> str:
    """The `follow` function of docs/web.md, as a reader copies it."""
    blocks = re.findall(r"```js\n(.*?)```", DOCS.read_text(), re.DOTALL)
    (block,) = [b for b in blocks if "async function follow(" in b]
    return block


_FOLLOW = """([base, id, token, last, into]) => {
  window[into] = [];
  follow(base, id, token, (e) => window[into].push(e), last)
    .catch((err) => window[into].push({type: "follow_failed", message: err.message}));
}"""
"""Follow a session with the docs' `follow`, collecting its events in `window[into]`."""


async def test_a_front_end_on_another_origin_follows_events_as_the_docs_say(
    browser: Browser, client: Client, tmp_path: Path, flow_type: str
) -> None:
    # A page of another origin (a CORS origin of the app), served on this
    # machine as a dev server would: no cookie, so no EventSource; the docs'
    # `fetch` with the token, resumed with Last-Event-ID.
    async def desk_page(request: Request) -> HTMLResponse:
        return HTMLResponse(f"<!doctype html><script>{_docs_follow()}</script>")

    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    sid = "browser-desk-7g"
    async with (
        serving(Starlette(routes=[Route("/", desk_page)])) as desk,
        create_worker(client, [flow], store=store),
        serving(
            create_app(
                client, [flow], store, tokens=role_tokens(), cors_origins=[desk.url]
            )
        ) as server,
    ):
        await sessions.start(sid, initial_message="say one")
        await sessions.wait_for_idle(sid)
        page = await browser.new_page()
        await page.goto(f"{desk.url}/")
        assert desk.url != server.url
        token = ROLE_TOKENS["read"]
        await page.evaluate(_FOLLOW, [server.url, sid, token, None, "all"])
        done = "([into, n]) => window[into].filter((e) => e.type === 'turn_completed').length >= n"
        await page.wait_for_function(done, arg=["all", 1])
        first = await page.evaluate("window.all")
        assert [e["turn_id"] for e in first if e["type"] == "turn_completed"] == [
            "turn-1"
        ], first
        last = next(e["cursor"] for e in first if e["type"] == "turn_completed")

        # Another follower resumes after turn 1's last event: it gets turn 2, and
        # exactly the events the first follower gets after that cursor.
        await page.evaluate(_FOLLOW, [server.url, sid, token, str(last), "resumed"])
        await sessions.send_user_message(sid, "say two")
        await page.wait_for_function(done, arg=["resumed", 1])
        await page.wait_for_function(done, arg=["all", 2])
        every, resumed = await page.evaluate("[window.all, window.resumed]")
        assert {e["turn_id"] for e in resumed} == {"turn-2"}, resumed
        assert [e["cursor"] for e in resumed] == [
            e["cursor"] for e in every if e["cursor"] > last
        ][: len(resumed)]
        assert resumed[-1]["type"] == "turn_completed"
        await page.close()
    await store.close()
