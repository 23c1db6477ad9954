"""A CSRF token with non-ASCII characters is a refusal, not a 500 (checked before sign-in)."""

from __future__ import annotations

from pathlib import Path

import httpx
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.web_rig import ROLE_TOKENS, role_tokens


async def test_a_non_ascii_csrf_token_is_a_403_not_a_500(
    client: Client, tmp_path: Path
) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(client, [], store, tokens=role_tokens())
    async with serving(app) as server, httpx.AsyncClient(base_url=server.url) as http:
        # The login form, as the reviewer sent it: no token needed to get here.
        login = await http.post(
            "/login",
            content=b"token=x&csrf_token=%C3%A9",
            headers={
                "Cookie": "dex_csrf=a",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        assert login.status_code == 403, login.text[:500]
        assert "CSRF token" in login.text
        # The API with the cookie's token and a non-ASCII header.
        ended = await http.post(
            "/api/sessions/x/end",
            json={},
            headers=[
                (b"Cookie", f"dex_csrf=a; dex_token={ROLE_TOKENS['admin']}".encode()),
                (b"X-CSRF-Token", "é".encode()),
            ],
        )
        assert (ended.status_code, ended.json()["error"]["code"]) == (
            403,
            "csrf_failed",
        ), ended.text
    await store.close()
