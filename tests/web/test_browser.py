"""The approval inbox in a real browser: Debian's chromium, driven by Playwright.

The browser, its skip rule and the screenshots' directory come from
`support.browser`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, Page, expect

from support.browser import screenshot_dir, signed_in_page
from support.web_rig import WebRig

XSS = "<script>alert(1)</script>"

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
