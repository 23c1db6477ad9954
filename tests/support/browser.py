"""A real browser for the web tests: Debian's chromium, driven by Playwright.

The `browser` fixture skips a test when no chromium is installed, unless
`DEX_AGENTS_BROWSER_REQUIRED=1` (CI sets it and installs `chromium`), which
makes a missing browser a failure. `DEX_AGENTS_SCREENSHOTS=docs/images` writes
the screenshots the docs show; otherwise they go to the test's temporary
directory (`screenshot_dir`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Dialog, Page, async_playwright, expect

from support.web_rig import ROLE_TOKENS, WebRig

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_path() -> str | None:
    return os.environ.get("DEX_AGENTS_CHROMIUM") or shutil.which("chromium")


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def browser() -> AsyncIterator[Browser]:
    path = chromium_path()
    if path is None:
        if os.environ.get("DEX_AGENTS_BROWSER_REQUIRED"):
            pytest.fail(
                "DEX_AGENTS_BROWSER_REQUIRED is set but no chromium is installed"
            )
        pytest.skip(
            "no chromium (apt-get install chromium); set DEX_AGENTS_BROWSER_REQUIRED=1 to fail instead"
        )
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=path, args=CHROMIUM_FLAGS
        )
        try:
            yield launched
        finally:
            await launched.close()


def screenshot_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("DEX_AGENTS_SCREENSHOTS")
    directory = Path(chosen) if chosen else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return directory


async def signed_in_page(browser: Browser, rig: WebRig, dialogs: list[str]) -> Page:
    page = await browser.new_page(viewport={"width": 1280, "height": 760})

    async def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    await page.goto(f"{rig.url}/inbox")
    assert "/login" in page.url  # signed out: the inbox sends the browser to the form
    await page.fill('input[name="token"]', ROLE_TOKENS["approve"])
    await page.click('form.login button[type="submit"]')
    await page.wait_for_url(f"{rig.url}/inbox")
    await expect(page.locator(".who strong")).to_have_text("approver")
    return page
