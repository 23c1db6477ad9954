"""The inbox pages without a script: sign-in, forms with their CSRF token, escaping."""

from __future__ import annotations

import httpx

from support.web_rig import WebRig, bearer, csrf_of, sign_in

XSS = "<script>alert(1)</script>"


async def test_sign_in_then_approve_with_a_plain_form(rig: WebRig) -> None:
    sid = rig.session_id("pages-form")
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "6"}')
    interrupt_id = await rig.pending(sid)
    await rig.listed_approval(sid)
    async with httpx.AsyncClient(base_url=rig.url) as http:
        assert (await http.get("/inbox")).headers["location"] == "/login?next=/inbox"
        wrong = await http.post(
            "/login",
            data={"token": "wrong", "csrf_token": csrf_of(await http.get("/login"))},
        )
        assert wrong.status_code == 401 and 'id="login-failed"' in wrong.text
        await sign_in(rig, http)
        inbox = await http.get("/inbox")
        assert inbox.status_code == 200
        assert "script-src 'self'" in inbox.headers["content-security-policy"]
        assert f'data-interrupt-id="{interrupt_id}"' in inbox.text
        action = f"/sessions/{sid}/approvals/{interrupt_id}/approve"

        missing = await http.post(action, data={"next": "inbox"})
        assert missing.status_code == 403 and "csrf_failed" in missing.text
        foreign = await http.post(
            action,
            data={"next": "inbox", "csrf_token": csrf_of(inbox)},
            headers={"Origin": "https://evil.example"},
        )
        assert foreign.status_code == 403 and "csrf_failed" in foreign.text
        assert [
            i.interrupt_id
            for i in (await rig.sessions.snapshot(sid)).pending_interrupts
        ] == [interrupt_id]

        done = await http.post(
            action,
            data={"next": "session", "csrf_token": csrf_of(inbox)},
            headers={"Origin": rig.url},
        )
        assert (done.status_code, done.headers["location"]) == (303, f"/sessions/{sid}")
        await rig.sessions.wait_for_idle(sid)
        page = await http.get(f"/sessions/{sid}")
        assert "approved by approver" in page.text
        assert "done: create_refund=refunded order 6" in page.text

        out = await http.post("/logout", data={"csrf_token": csrf_of(page)})
        assert out.status_code == 303
        assert (await http.get("/inbox")).status_code == 303


async def test_values_render_as_text_never_markup(rig: WebRig) -> None:
    sid = rig.session_id("pages-xss")
    await rig.sessions.start(sid, initial_message=f"say {XSS}")
    await rig.sessions.wait_for_idle(sid)
    await rig.sessions.send_user_message(
        sid, 'call create_refund {"orderId": "' + XSS + '"}'
    )
    await rig.pending(sid)
    await rig.listed_approval(sid)
    for path in ("/inbox", f"/sessions/{sid}", "/sessions"):
        page = await rig.http.get(path, headers=bearer("read"))
        assert page.status_code == 200
        assert XSS not in page.text, path
    session = await rig.http.get(f"/sessions/{sid}", headers=bearer("read"))
    assert "said: &lt;script&gt;alert(1)&lt;/script&gt;" in session.text
    inbox = await rig.http.get("/inbox", headers=bearer("read"))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in inbox.text
    assert "needs the approve role" in inbox.text  # a read token sees no buttons


async def test_a_page_for_an_unknown_session_is_a_page(rig: WebRig) -> None:
    page = await rig.http.get("/sessions/pages-no-such-session", headers=bearer("read"))
    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert "session_not_found" in page.text


async def test_anonymous_loopback_only_when_built_for_dev(rig: WebRig) -> None:
    # The rig's app is not built for dev: no token, no access, even from 127.0.0.1.
    assert (await rig.http.get("/api/sessions")).status_code == 401
