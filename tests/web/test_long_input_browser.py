"""The session page never offers to approve an input it does not show.

An input over 8 KiB travels by reference (`arguments_ref`), so the live
approval card must read it before Approve or Edit & approve can be used.
In the system chromium, against the real app, server and worker.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from playwright.async_api import Browser, Route, expect

from support.browser import signed_in_page
from support.web_rig import WebRig

pytestmark = pytest.mark.timeout(300)

LONG_ID = "9" * 9000  # over 8 KiB: the event carries a reference, not the input


async def test_approve_waits_until_the_long_input_is_shown(
    browser: Browser, rig: WebRig, tmp_path: Path
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = "browser-long-input"
    await rig.sessions.start(sid, initial_message="say hello there")
    await rig.sessions.wait_for_idle(sid)

    # Hold the page's read of the session, so the card is seen before the input.
    release = asyncio.Event()
    held: list[str] = []

    async def hold(route: Route) -> None:
        held.append(route.request.url)
        await release.wait()
        await route.continue_()

    await page.route("**/api/sessions/*?turns=0", hold)
    await page.goto(f"{rig.url}/sessions/{sid}")
    await expect(page.locator("#session-status")).to_have_text("idle")
    await rig.sessions.send_user_message(
        sid, f'call create_refund {{"orderId": "{LONG_ID}"}}'
    )
    card = page.locator('article[data-turn-id="turn-2"] .approval-card')
    await expect(card).to_be_visible(timeout=30_000)
    approve = card.locator("button.approve")
    edited = card.locator("button.approve-edited")
    await expect(approve).to_be_disabled()
    await expect(edited).to_be_disabled()
    async with asyncio.timeout(30):
        while not held:  # the card asked for the input
            await asyncio.sleep(0.05)
    await expect(card.locator("button.reject")).to_be_enabled()
    assert LONG_ID not in (await card.locator("pre.input").text_content() or "")

    release.set()
    await expect(card.locator("pre.input")).to_contain_text(LONG_ID, timeout=30_000)
    await expect(approve).to_be_enabled()
    await expect(edited).to_be_enabled()
    await approve.click()
    await expect(card.locator(".decided-by")).to_have_text("approved by approver")
    await rig.sessions.wait_for_idle(sid)
    assert [e["order_id"] for e in rig.ledger.entries("create_refund")] == [LONG_ID]
    assert dialogs == []
