"""The session page says when the model API is being retried, and stops saying it once it answers.

A runner's `model_retry` events (Claude Code's retry notices: the API could not
be reached, or answered 429/5xx/529) show on the open page as one line in the
turn, the latest retry, and the line goes when the model answers: a turn that
waits on a retrying API does not look like a turn that hangs.
"""

from __future__ import annotations

from playwright.async_api import Browser, expect

from support.browser import signed_in_page
from support.web_rig import WebRig


async def test_the_session_page_shows_the_latest_model_retry_until_the_answer(
    browser: Browser, rig: WebRig
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = rig.session_id("page-model-retry")
    await rig.sessions.start(sid)
    await page.goto(f"{rig.url}/sessions/{sid}")
    await expect(page.locator("#session-status")).to_have_text("idle")

    await rig.sessions.send_user_message(sid, "api_retry 2 ;; pause retry-gate")
    await rig.reached("retry-gate")
    note = page.locator('article[data-turn-id="turn-1"] p.model-retry')
    await expect(note).to_have_text(
        "↻ the model API could not be reached; asking again in 1.2 s (retry 2 of 10)",
        timeout=30_000,
    )
    await expect(note).to_have_count(1)  # the latest retry, not one line each

    rig.open_gate("retry-gate")
    answer = page.locator('article[data-turn-id="turn-1"] .answer')
    await expect(answer).to_have_text("answered after 2 retries", timeout=30_000)
    await expect(note).to_have_count(0)
    assert dialogs == []
