"""Token files, hashing and roles; `dex-agents serve` run as a command; `dev`'s anonymous loopback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from dex_agents import UserError
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import EmbeddedEngine
from dex_agents.web import create_app
from dex_agents.web._server import serving
from dex_agents.web._tokens import TokenSet, hash_token, load_tokens, token_entry
from support.cli_harness import closed_port
from support.web_rig import role_tokens

SERVE = [sys.executable, "-m", "dex_agents.web"]


def test_a_toml_and_a_json_token_file_verify_their_tokens(tmp_path: Path) -> None:
    toml = tmp_path / "tokens.toml"
    toml.write_text(token_entry("alice", ["approve"], "secret-a"))
    tokens = load_tokens(toml)
    alice = tokens.verify("secret-a")
    assert alice is not None
    assert (alice.name, sorted(alice.roles)) == ("alice", ["approve", "read"])
    assert tokens.verify("secret-b") is None
    assert "secret-a" not in toml.read_text()  # only the hash is kept

    entry = {"name": "bot", "roles": ["chat"], "hash": hash_token("secret-c", n=16)}
    from_env = load_tokens(
        env={"DEX_AGENTS_WEB_TOKENS": json.dumps({"tokens": [entry]})}
    )
    bot = from_env.verify("secret-c")
    assert bot is not None and sorted(bot.roles) == ["chat", "read"]
    admin = TokenSet.from_text(token_entry("root", ["admin"], "x"), source="t").verify(
        "x"
    )
    assert admin is not None and sorted(admin.roles) == [
        "admin",
        "approve",
        "chat",
        "read",
    ]
    assert len(load_tokens(env={})) == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not = [valid", "cannot parse the token file"),
        ("x = 1", "has no `tokens` list"),
        ('[[tokens]]\nroles = ["read"]\nhash = "scrypt$1"', "needs a `name`"),
        (
            '[[tokens]]\nname = "a"\nroles = ["boss"]\nhash = "scrypt$1"',
            "unknown roles ['boss']",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "plain-token"',
            "--new-token NAME",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$16384$8$1$c2FsdA$ZGln"\n'
            '[[tokens]]\nname = "a"\nroles = ["chat"]\nhash = "scrypt$16384$8$1$c2FsdA$ZGln"',
            "'a'] appear more than once",
        ),
        # Hashes that would fail only when a token is presented (every request a 500).
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$1"',
            "5 fields after `scrypt$`",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$16384x$8$1$c2FsdA$ZGln"',
            "whole numbers, got '16384x'",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$1000$8$1$c2FsdA$ZGln"',
            "n must be a power of 2",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$32768$8$1$c2FsdA$ZGln"',
            "more memory than scrypt may use",
        ),
        (
            '[[tokens]]\nname = "a"\nroles = ["read"]\nhash = "scrypt$16384$8$1$$ZGln"',
            "salt or digest is empty",
        ),
    ],
)
def test_a_bad_token_file_says_what_to_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    with pytest.raises(UserError) as raised:
        load_tokens(path)
    assert message in str(raised.value)


def test_a_missing_token_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--tokens-file"):
        load_tokens(tmp_path / "absent.toml")


def test_serve_new_token_prints_a_token_and_its_entry() -> None:
    done = subprocess.run(
        [*SERVE, "--new-token", "carol", "--role", "approve", "--role", "chat"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    token = done.stdout.splitlines()[1]
    entry = done.stdout.split("entry for the token file:\n\n", 1)[1]
    carol = TokenSet.from_text(entry, source="output").verify(token)
    assert carol is not None
    assert sorted(carol.roles) == ["approve", "chat", "read"]


def test_serve_refuses_anonymous_access_on_a_public_address() -> None:
    done = subprocess.run(
        [*SERVE, "--allow-anonymous-loopback", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "needs a loopback --host" in done.stderr


def test_serve_refuses_a_mistyped_cors_origin_in_one_line() -> None:
    # Refused before it connects: the engine's address would not be reached.
    done = subprocess.run(
        [
            *SERVE,
            "--address",
            f"127.0.0.1:{closed_port()}",
            "--allow-anonymous-loopback",
            "--cors-origin",
            "https://desk.example.com",
            "--cors-origin",
            "http://127.0.0.1:9100/",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith(
        "error: bad `--cors-origin http://127.0.0.1:9100/`: "
    ), done.stderr
    assert "no trailing slash" in done.stderr
    assert "pass 'http://127.0.0.1:9100'" in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr


async def test_serve_runs_the_app_until_interrupted(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    store_path = tmp_path / "runtime.sqlite"
    store = SQLiteRuntimeStore(store_path)
    await store.list_snapshots()  # create the file, as a worker would
    await store.close()
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(token_entry("ops", ["read"], "ops-secret"))
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        "--port",
        "0",
        "--tokens-file",
        str(tokens),
        "--address",
        engine.address,
        "--namespace",
        engine.namespace,
        "--store",
        str(store_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        async with asyncio.timeout(60):
            line = (await process.stdout.readline()).decode()
        found = re.search(r"dex-agents web on (http://\S+)/inbox", line)
        assert found, line
        url = found.group(1)
        assert "1 token(s)" in line
        async with httpx.AsyncClient(base_url=url) as http:
            whoami = await http.get(
                "/api/whoami", headers={"Authorization": "Bearer ops-secret"}
            )
            assert whoami.json() == {"name": "ops", "roles": ["read"]}
            assert (await http.get("/api/sessions")).status_code == 401
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            code = await process.wait()
        assert code == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_anonymous_loopback_for_dev(client: Client, tmp_path: Path) -> None:
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(
        client, [], store, tokens=role_tokens(), allow_anonymous_loopback=True
    )
    async with serving(app) as server, httpx.AsyncClient(base_url=server.url) as http:
        whoami = await http.get("/api/whoami")
        assert whoami.json()["name"] == "anonymous (loopback)"
        assert whoami.json()["roles"] == ["admin", "approve", "chat", "read"]
        # A token still counts for who it is.
        named = await http.get(
            "/api/whoami", headers={"Authorization": "Bearer tok-reader-secret"}
        )
        assert named.json()["name"] == "reader"
        # A proxy in front: the request is not from this machine's user.
        proxied = await http.get(
            "/api/whoami", headers={"X-Forwarded-For": "203.0.113.9"}
        )
        assert proxied.status_code == 401
        # A browser on another site gets no anonymous access at all.
        forged = await http.post(
            "/api/sessions/anon-x/end",
            json={},
            headers={"Origin": "https://evil.example"},
        )
        assert (forged.status_code, forged.json()["error"]["code"]) == (
            401,
            "unauthorized",
        )
        # A script on this machine (no Origin, no cookie) may.
        scripted = await http.post("/api/sessions/anon-x/end", json={})
        assert scripted.status_code == 404
    await store.close()


async def test_a_front_end_on_another_origin_reads_anonymously_and_writes_with_a_token(
    client: Client, tmp_path: Path
) -> None:
    # docs/web.md: on an anonymous loopback app, a CORS origin's page reads
    # without a token; to change anything it sends one.
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
        read = await http.get("/api/whoami", headers={"Origin": desk})
        assert read.json()["name"] == "anonymous (loopback)"
        assert read.headers["access-control-allow-origin"] == desk
        anonymous = await http.post(
            "/api/sessions/anon-y/end", json={}, headers={"Origin": desk}
        )
        assert anonymous.status_code == 403
        assert anonymous.json()["error"]["code"] == "csrf_failed"
        assert anonymous.headers["access-control-allow-origin"] == desk
        with_token = await http.post(
            "/api/sessions/anon-y/end",
            json={},
            headers={"Origin": desk, "Authorization": "Bearer tok-admin-secret"},
        )
        assert with_token.json()["error"]["code"] == "session_not_found"
    await store.close()
