"""The role matrix: each role (and no token) against each endpoint, allowed or 401/403."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from dex_agents.web._tokens import Role
from support.web_rig import WebRig, bearer

MISSING = "roles-no-such-session"
"""Session-scoped calls name a session that does not exist: an allowed call is
answered (404) without changing anything."""


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    allowed: frozenset[Role]
    body: Any = None
    form: dict[str, str] | None = None
    page: bool = False


READ: frozenset[Role] = frozenset({"read", "chat", "approve", "admin"})
CHAT: frozenset[Role] = frozenset({"chat", "admin"})
APPROVE: frozenset[Role] = frozenset({"approve", "admin"})
ADMIN: frozenset[Role] = frozenset({"admin"})

ENDPOINTS = [
    Endpoint("GET", "/api/whoami", READ),
    Endpoint("GET", "/api/sessions", READ),
    Endpoint("POST", "/api/sessions", CHAT, body={"message": "say hi"}),
    Endpoint("GET", f"/api/sessions/{MISSING}", READ),
    Endpoint(
        "POST", f"/api/sessions/{MISSING}/messages", CHAT, body={"text": "say hi"}
    ),
    Endpoint("GET", f"/api/sessions/{MISSING}/history", READ),
    Endpoint("POST", f"/api/sessions/{MISSING}/end", ADMIN, body={}),
    Endpoint("POST", f"/api/sessions/{MISSING}/cancel", CHAT, body={}),
    Endpoint("GET", "/api/approvals", READ),
    Endpoint("POST", f"/api/sessions/{MISSING}/approvals/i-1/approve", APPROVE),
    Endpoint(
        "POST",
        f"/api/sessions/{MISSING}/approvals/i-1/reject",
        APPROVE,
        body={"message": "no"},
    ),
    Endpoint("GET", f"/api/sessions/{MISSING}/events", READ),
    Endpoint("GET", f"/api/sessions/{MISSING}/events/ag-ui", READ),
    Endpoint("GET", "/inbox", READ, page=True),
    Endpoint("GET", "/sessions", READ, page=True),
    Endpoint("GET", f"/sessions/{MISSING}", READ, page=True),
    Endpoint(
        "POST",
        f"/sessions/{MISSING}/approvals/i-1/approve",
        APPROVE,
        form={},
        page=True,
    ),
    Endpoint(
        "POST",
        f"/sessions/{MISSING}/approvals/i-1/reject",
        APPROVE,
        form={"message": "no"},
        page=True,
    ),
    Endpoint(
        "POST",
        f"/sessions/{MISSING}/messages",
        CHAT,
        form={"text": "say hi"},
        page=True,
    ),
    Endpoint("POST", f"/sessions/{MISSING}/cancel", CHAT, form={}, page=True),
]
ROLES: list[Role | None] = [None, "read", "chat", "approve", "admin"]


def _expected(endpoint: Endpoint, role: Role | None) -> str:
    if role is None:
        return "login" if endpoint.page and endpoint.method == "GET" else "401"
    return "allowed" if role in endpoint.allowed else "403"


def _outcome(endpoint: Endpoint, status: int, location: str) -> str:
    if status == 303 and "/login" in location:
        return "login"
    if status in (401, 403):
        return str(status)
    return "allowed"


async def test_role_matrix(rig: WebRig) -> None:
    got: dict[tuple[str, str, str], str] = {}
    want: dict[tuple[str, str, str], str] = {}
    for endpoint in ENDPOINTS:
        for role in ROLES:
            key = (endpoint.method, endpoint.path, str(role))
            response = await rig.http.request(
                endpoint.method,
                endpoint.path,
                headers=bearer(role),
                json=endpoint.body,
                data=endpoint.form,
            )
            assert response.status_code < 500, (key, response.text)
            got[key] = _outcome(
                endpoint, response.status_code, response.headers.get("location", "")
            )
            want[key] = _expected(endpoint, role)
            if got[key] == "allowed" and endpoint.path != "/api/sessions":
                # Reached the handler: the session does not exist, nothing was done.
                assert response.status_code in (200, 404), (key, response.text)
    assert got == want


@pytest.mark.parametrize("role", ["read", "chat"])
async def test_a_role_without_approve_cannot_decide_a_real_approval(
    rig: WebRig, role: Role
) -> None:
    sid = rig.session_id("roles-real")
    await rig.sessions.start(sid, initial_message='call create_refund {"orderId": "1"}')
    interrupt_id = await rig.pending(sid)
    refused = await rig.http.post(
        f"/api/sessions/{sid}/approvals/{interrupt_id}/approve", headers=bearer(role)
    )
    assert refused.status_code == 403
    assert "needs the 'approve' role" in refused.json()["error"]["message"]
    snapshot = await rig.sessions.snapshot(sid)
    assert [i.interrupt_id for i in snapshot.pending_interrupts] == [interrupt_id]
    assert rig.ledger.count("create_refund_started") == 0
