"""The web app after an answer no worker took: listed, answered, pending a worker.

With no worker running, an approve or reject over the API answers `recorded:
true`: the answer waits in the session's history and applies when a worker
starts. Until then the approval is still pending, but `GET /api/approvals`,
the snapshot and the pages say how it was answered (`recorded`), and the
pages offer no approve or reject for it, so nobody answers it again.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, expect
from temporalio.client import Client
from temporalio.service import RPCError

from dex_agents import NoWorkerError
from dex_agents.temporal import create_worker
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.browser import screenshot_dir, signed_in_page
from support.session_harness import (
    ApprovalWithoutWorker,
    approval_without_worker,
    budget_paused_without_worker,
)
from support.web_rig import WebRig, approve_path, bearer, role_tokens

# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(300)

APPLIES = "(recorded; applies when a worker starts)"
APPROVED_BY_APPROVER = {
    "approved": True,
    "rejection_message": None,
    "new_spend_limit": None,
    "resolved_by": "approver",
}


@contextlib.asynccontextmanager
async def workerless_rig(
    client: Client, waiting: ApprovalWithoutWorker, tmp_path: Path
) -> AsyncIterator[WebRig]:
    """The app over `waiting`'s flow and store, no worker running (`worker_timeout` 1 s).

    The session is terminated at the end, so no later worker of its flow type
    picks it up.
    """
    app = create_app(
        client, [waiting.flow], waiting.store, tokens=role_tokens(), worker_timeout=1.0
    )
    try:
        async with (
            serving(app) as server,
            httpx.AsyncClient(base_url=server.url, timeout=30) as http,
        ):
            yield WebRig(
                url=server.url,
                http=http,
                flow=waiting.flow,
                sessions=waiting.sessions,
                store=waiting.store,
                ledger=waiting.ledger,
                gate_dir=tmp_path / "gates",
            )
    finally:
        with contextlib.suppress(RPCError):
            await client.get_workflow_handle(waiting.sid).terminate()
        await waiting.store.close()


async def recorded_approval(rig: WebRig, sid: str, interrupt_id: str) -> None:
    """Approve over the API as the approver with no worker: recorded, not applied."""
    approved = await rig.http.post(
        approve_path(sid, interrupt_id), headers=bearer("approve")
    )
    assert approved.status_code == 200, approved.text
    assert approved.json() == {
        "interrupt_id": interrupt_id,
        "approved": True,
        "by": "approver",
        "resolved": False,
        "recorded": True,
    }


async def listed(rig: WebRig) -> dict[str, dict[str, Any]]:
    """`GET /api/approvals`' items, by session ID."""
    page = await rig.http.get("/api/approvals", headers=bearer("read"))
    assert page.status_code == 200, page.text
    return {a["session_id"]: a for a in page.json()["approvals"]}


async def test_a_recorded_approval_is_listed_answered_until_a_worker_applies_it(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    waiting = await approval_without_worker(
        client, tmp_path, flow_type, "web-recorded", order_id="5"
    )
    sid, iid = waiting.sid, waiting.interrupt_id
    async with workerless_rig(client, waiting, tmp_path) as rig:
        # A session the store lists but Temporal does not know: its history
        # cannot be read, so it has no recorded answer, and the list still answers.
        ghost = f"{sid}-ghost"
        projected = await waiting.store.get_snapshot(sid)
        assert projected is not None
        await waiting.store.put_snapshot(ghost, {**projected, "session_id": ghost})
        before = await listed(rig)
        assert before[sid]["recorded"] is None
        assert before[ghost]["recorded"] is None

        await recorded_approval(rig, sid, iid)

        # Still pending (it has not applied), with its answer and who gave it.
        after = await listed(rig)
        assert after[sid]["interrupt_id"] == iid
        assert after[sid]["recorded"] == APPROVED_BY_APPROVER
        assert after[ghost]["recorded"] is None
        view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
        assert view.status_code == 200, view.text
        snapshot = view.json()["snapshot"]
        assert snapshot["status"] == "waiting_for_approval"
        (pending,) = snapshot["pending_interrupts"]
        assert (pending["interrupt_id"], pending["recorded"]) == (
            iid,
            APPROVED_BY_APPROVER,
        )
        assert waiting.ledger.count("create_refund_started") == 0
        # A rejection after it is not recorded: the approval applies first.
        rejected = await rig.http.post(
            approve_path(sid, iid).removesuffix("approve") + "reject",
            json={"message": "no"},
            headers=bearer("approve"),
        )
        assert rejected.status_code == 409, rejected.text
        error = rejected.json()["error"]
        assert error["code"] == "already_resolved"
        assert (
            "an approval is already recorded for it and applies first when a "
            "worker starts, so this one was not recorded"
        ) in error["message"]
        assert error["message"].endswith("; nothing changed")
        assert (await listed(rig))[sid]["recorded"] == APPROVED_BY_APPROVER

        async with create_worker(client, [waiting.flow], store=waiting.store):
            done = await waiting.sessions.wait_for_idle(sid, timeout=30)
            assert done.turns[-1].final_text == "done: create_refund=refunded order 5"
            assert sid not in await listed(rig)
            view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
            assert view.json()["snapshot"]["pending_interrupts"] == []
        assert waiting.ledger.count("create_refund_started") == 1
        assert [e["order_id"] for e in waiting.ledger.entries("create_refund")] == ["5"]


async def test_the_inbox_and_the_session_page_show_a_recorded_answer_instead_of_the_buttons(
    browser: Browser, client: Client, tmp_path: Path, flow_type: str
) -> None:
    waiting = await approval_without_worker(
        client, tmp_path, flow_type, "rec", order_id="6"
    )
    sid, iid = waiting.sid, waiting.interrupt_id
    answer = f"approved by approver {APPLIES}"
    async with workerless_rig(client, waiting, tmp_path) as rig:
        dialogs: list[str] = []
        page = await signed_in_page(browser, rig, dialogs)
        row = page.locator(f'tr.approval[data-session-id="{sid}"]')
        await expect(row.locator("button.approve")).to_be_visible(timeout=30_000)

        # Answered over the API by someone else: the open inbox shows the answer
        # in place of the row's forms without a reload.
        await recorded_approval(rig, sid, iid)
        await expect(row.locator(".decided-by")).to_have_text(answer, timeout=30_000)
        await expect(row.locator("button.approve")).to_have_count(0)
        await expect(row.locator("button.reject")).to_have_count(0)

        # A fresh inbox renders it so; it is still pending (listed and counted).
        await page.reload()
        await expect(row.locator(".decided-by")).to_have_text(answer)
        await expect(row.locator("form.decision")).to_have_count(0)
        await expect(page.locator("#approval-count")).to_have_text("1")
        await page.screenshot(path=str(screenshot_dir(tmp_path) / "inbox-recorded.png"))
        # The answer fits a 1280-pixel window: nothing to scroll sideways for.
        scroll = page.locator(".table-scroll")
        assert await scroll.evaluate("e => e.scrollWidth <= e.clientWidth")
        box = await row.locator(".decided-by").bounding_box()
        assert box is not None
        assert box["x"] + box["width"] <= await page.evaluate("window.innerWidth")

        # The session page's approval card shows the answer, not the forms.
        await page.goto(f"{rig.url}/sessions/{sid}")
        card = page.locator(f'.approval-card[data-interrupt-id="{iid}"]')
        await expect(card.locator(".decided-by")).to_have_text(answer, timeout=30_000)
        await expect(card.locator("form.decision")).to_have_count(0)
        await page.screenshot(
            path=str(screenshot_dir(tmp_path) / "session-recorded.png"), full_page=True
        )

        # A worker starts: the answer applies, once, and the card says so live.
        async with create_worker(client, [waiting.flow], store=waiting.store):
            await waiting.sessions.wait_for_idle(sid, timeout=30)
            await expect(card.locator(".decided-by")).to_have_text(
                "approved by approver", timeout=30_000
            )
            await page.goto(f"{rig.url}/inbox")
            await expect(page.locator("#no-approvals")).to_be_visible()
            await expect(row).to_have_count(0)
        assert waiting.ledger.count("create_refund_started") == 1
        assert dialogs == []


async def test_a_session_view_shows_an_answer_recorded_elsewhere_at_once(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    # Lists reuse what they found for a while (an inbox polls every second);
    # the session's own view asks again each time.
    waiting = await approval_without_worker(
        client, tmp_path, flow_type, "web-recorded-elsewhere", order_id="6"
    )
    sid, iid = waiting.sid, waiting.interrupt_id
    async with workerless_rig(client, waiting, tmp_path) as rig:
        assert (await listed(rig))[sid]["recorded"] is None
        with pytest.raises(NoWorkerError) as recorded:
            await waiting.sessions.resolve_interrupt(
                sid, iid, approved=False, rejection_message="wrong order",
                resolved_by="cli-user", timeout=1,
            )  # fmt: skip
        assert recorded.value.recorded
        view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
        (pending,) = view.json()["snapshot"]["pending_interrupts"]
        assert pending["recorded"] == {
            "approved": False,
            "rejection_message": "wrong order",
            "new_spend_limit": None,
            "resolved_by": "cli-user",
        }


async def test_a_second_spend_limit_over_the_api_with_no_worker_is_a_conflict(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    # The first recorded answer of an interrupt is the one that applies: an
    # approval with another limit would change nothing, so it is refused (409)
    # instead of answering `recorded: true`.
    paused = await budget_paused_without_worker(
        client, tmp_path, flow_type, "web-limit-twice"
    )
    sid, iid = paused.sid, paused.interrupt_id
    async with workerless_rig(client, paused, tmp_path) as rig:
        path = approve_path(sid, iid)
        first = await rig.http.post(
            path, json={"new_spend_limit": 0.01}, headers=bearer("approve")
        )
        assert first.status_code == 200, first.text
        assert first.json()["recorded"] is True
        same = await rig.http.post(
            path, json={"new_spend_limit": 0.01}, headers=bearer("approve")
        )
        assert same.status_code == 200, same.text
        assert same.json()["recorded"] is True
        other = await rig.http.post(
            path, json={"new_spend_limit": 0.05}, headers=bearer("approve")
        )
        assert other.status_code == 409, other.text
        error = other.json()["error"]
        assert error["code"] == "already_resolved"
        assert (
            "an approval with a new spend limit of 0.0100 USD is already recorded "
            "for it and applies first when a worker starts, so this one was not "
            "recorded"
        ) in error["message"]
        view = await rig.http.get(f"/api/sessions/{sid}", headers=bearer("read"))
        (pending,) = view.json()["snapshot"]["pending_interrupts"]
        assert pending["recorded"]["new_spend_limit"] == 0.01

        async with create_worker(client, [paused.flow], store=paused.store):
            done = await paused.sessions.wait_for_idle(sid, timeout=30)
        assert (done.turns[-1].status, done.turns[-1].final_text) == (
            "completed",
            "said: three",
        )
        (resolved,) = [
            e.data
            for e in await paused.sessions.events(sid)
            if e.type == "interrupt_resolved"
        ]
        assert resolved["new_spend_limit"] == 0.01
