"""Anonymous loopback access (`dev`) is for this machine's user, not for any site in its browser.

Any page open in the browser can send requests to 127.0.0.1; with `*` as a
CORS origin it could read the answers too. So `*` is refused with anonymous
access, and a request with a foreign `Origin` gets no anonymous access.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from dex_agents import InvalidArgumentError
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.web import create_app
from dex_agents.web._server import serving
from support.cli_harness import closed_port
from support.web_rig import role_tokens

SERVE = [sys.executable, "-m", "dex_agents.web"]


async def test_create_app_refuses_any_origin_with_anonymous_loopback(
    client: Client, tmp_path: Path
) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    try:
        with pytest.raises(InvalidArgumentError) as refused:
            create_app(
                client,
                [],
                store,
                tokens=role_tokens(),
                allow_anonymous_loopback=True,
                cors_origins=["*"],
            )
        message = str(refused.value)
        assert "cors_origins=['*']" in message
        assert "allow_anonymous_loopback" in message
        assert "list the front end's own origins" in message
        # Each alone is still fine.
        create_app(client, [], store, tokens=role_tokens(), cors_origins=["*"])
        create_app(
            client, [], store, tokens=role_tokens(), allow_anonymous_loopback=True
        )
    finally:
        await store.close()


def test_serve_refuses_any_origin_with_anonymous_loopback_in_one_line() -> None:
    # Refused before it connects: the engine's address would not be reached.
    done = subprocess.run(
        [
            *SERVE,
            "--address",
            f"127.0.0.1:{closed_port()}",
            "--allow-anonymous-loopback",
            "--cors-origin",
            "*",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "--cors-origin '*' with --allow-anonymous-loopback" in done.stderr
    assert "--tokens-file" in done.stderr


async def test_anonymous_access_only_from_no_origin_the_own_or_a_listed_one(
    client: Client, tmp_path: Path
) -> None:
    desk = "http://localhost:5173"
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(
        client,
        [],
        store,
        tokens=role_tokens(),
        allow_anonymous_loopback=True,
        cors_origins=[desk],
    )
    async with serving(app) as server, httpx.AsyncClient(base_url=server.url) as http:
        for origin in (None, server.url, desk):
            headers = {"Origin": origin} if origin else {}
            whoami = await http.get("/api/whoami", headers=headers)
            assert whoami.json()["name"] == "anonymous (loopback)", origin
        for origin in ("https://evil.example", "null", "http://localhost:5174"):
            for path in ("/api/whoami", "/api/sessions", "/api/approvals"):
                read = await http.get(path, headers={"Origin": origin})
                assert read.status_code == 401, (origin, path, read.text)
                error = read.json()["error"]
                assert error["code"] == "unauthorized"
                assert repr(origin) in error["message"]
                assert "CORS origins" in error["message"]
        # A token still works from any origin.
        named = await http.get(
            "/api/whoami",
            headers={
                "Origin": "https://evil.example",
                "Authorization": "Bearer tok-reader-secret",
            },
        )
        assert named.json()["name"] == "reader"
    await store.close()
