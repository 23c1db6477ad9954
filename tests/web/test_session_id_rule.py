"""One rule for session IDs: the web takes every ID the library takes, and refuses the rest alike.

A session started with the library (or `dex-agents chat "a;b/ç"`) is listed,
read, followed and answered over the API with its ID percent-encoded in the
path, `/` too; an ID the library refuses is refused with the library's words.
The example agent turns any session ID into a directory inside its own.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.async_api import Browser, expect

from dex_agents._errors import InvalidArgumentError
from dex_agents.claude import ClaudeAgentOptionsContext
from dex_agents.examples.support_agent import options, session_dir
from dex_agents.temporal._arguments import MAX_ID_BYTES, check_session_id
from support.browser import signed_in_page
from support.web_rig import WebRig, bearer, idle_stream

REFUND = 'call create_refund {"orderId": "7"}'


def _odd_ids() -> list[str]:
    """IDs the old web rule refused: `;` and `/`, non-ASCII, and over 200 characters."""
    tail = uuid.uuid4().hex[:8]
    return [f"a;b/ç-{tail}", f"日本語 ü-{tail}-" + "x" * 300]


@pytest.mark.parametrize("sid", _odd_ids(), ids=["punctuation-slash", "unicode-long"])
async def test_an_id_the_library_takes_is_listed_read_and_approved_over_the_api(
    rig: WebRig, sid: str
) -> None:
    assert check_session_id(sid) == sid  # the library takes it
    await rig.sessions.start(sid, initial_message=REFUND)
    interrupt_id = await rig.pending(sid)
    await rig.listed_approval(sid)
    path = f"/api/sessions/{quote(sid, safe='')}"

    view = await rig.http.get(path, headers=bearer("read"))
    assert view.status_code == 200, view.text
    assert view.json()["snapshot"]["session_id"] == sid
    listed = await rig.http.get("/api/sessions?limit=500", headers=bearer("read"))
    assert sid in [s["session_id"] for s in listed.json()["sessions"]]
    events = await idle_stream(rig.http, f"{path}/events")
    assert "interrupt_created" in [e["type"] for e in events]

    approved = await rig.http.post(
        f"{path}/approvals/{interrupt_id}/approve", headers=bearer("approve")
    )
    assert approved.status_code == 200, approved.text
    assert approved.json()["by"] == "approver"
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.pending_interrupts == []
    assert snapshot.turns[-1].final_text == "done: create_refund=refunded order 7"
    assert rig.ledger.count("create_refund") == 1


async def test_an_id_the_library_refuses_is_refused_with_its_words(
    rig: WebRig,
) -> None:
    too_long = "é" * (MAX_ID_BYTES // 2 + 1)  # 1002 bytes in UTF-8
    with pytest.raises(InvalidArgumentError) as refused:
        check_session_id(too_long)
    reason = str(refused.value)
    assert "over the limit of 1000 bytes" in reason

    read = await rig.http.get(
        f"/api/sessions/{quote(too_long, safe='')}", headers=bearer("read")
    )
    started = await rig.http.post(
        "/api/sessions",
        json={"session_id": too_long, "message": "say hi"},
        headers=bearer("chat"),
    )
    for answer, where in ((read, "path.session_id"), (started, "body.session_id")):
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["code"] == "invalid_request"
        assert f"{where}: {reason}, got 'éé" in error["message"], error["message"]
    listed = await rig.http.get("/api/sessions?limit=500", headers=bearer("read"))
    assert too_long not in [s["session_id"] for s in listed.json()["sessions"]]


async def test_the_inbox_approves_a_session_whose_id_has_a_slash_and_markup(
    browser: Browser, rig: WebRig
) -> None:
    dialogs: list[str] = []
    page = await signed_in_page(browser, rig, dialogs)
    sid = f'a;b/ç <i>"x"</i>-{uuid.uuid4().hex[:8]}'
    await rig.sessions.start(sid, initial_message=REFUND)
    row = page.locator("tr.approval").filter(has_text=sid)
    await expect(row).to_have_count(1, timeout=30_000)
    # The ID is text: shown as it is, and its markup made no element.
    await expect(row.locator("td").first).to_have_text(sid)
    assert await page.locator("#approvals i").count() == 0
    assert await row.get_attribute("data-session-id") == sid

    await row.locator("button.approve").click()
    await expect(row.locator(".decided-by")).to_have_text("approved by approver")
    snapshot = await rig.sessions.wait_for_idle(sid)
    assert snapshot.turns[-1].final_text == "done: create_refund=refunded order 7"
    # The inbox's link to the session's page, `/` in the ID and all.
    await row.locator("a").first.click()
    await expect(page.locator("h1")).to_contain_text(sid, timeout=30_000)
    assert dialogs == []


@pytest.mark.parametrize(
    "sid",
    ["../../etc", "x" * 300, "日本語/セッション", "..", "/etc/passwd", "a;b/ç"],
)
def test_the_example_agent_works_in_a_directory_of_its_own_inside_its_agents_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sid: str
) -> None:
    agents = tmp_path / "agents"
    monkeypatch.setenv("DEX_AGENTS_EXAMPLE_WORKDIR", str(agents))
    cwds = {
        options(
            ClaudeAgentOptionsContext(flow_id=sid, turn_id=f"turn-{n}", attempt=n)
        ).cwd
        for n in (1, 2)
    }
    (cwd,) = cwds  # the same directory for every segment of the session
    assert isinstance(cwd, str)
    assert Path(cwd).parent == agents.resolve() and Path(cwd).is_dir()
    assert session_dir(sid + "?", agents) != Path(cwd)  # and no other session's


def test_the_example_agent_keeps_a_plain_id_as_its_directory(tmp_path: Path) -> None:
    assert session_dir("session-1", tmp_path) == tmp_path / "session-1"
    assert session_dir("../../etc", tmp_path).name.startswith("etc+")
