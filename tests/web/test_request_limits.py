"""Bounds on what a caller can make the app read: bodies, login forms, quoted values.

Bodies are read before the token is checked, so each bound holds for anyone
who can reach the port. Against the real app behind uvicorn.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from temporalio.client import Client

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.web import create_app
from dex_agents.web._errors import LOGIN_BODY_BYTES, MAX_BODY_BYTES, _shown
from dex_agents.web._server import serving
from support.web_rig import ROLE_TOKENS, csrf_of, role_tokens

MIB = 1024 * 1024


@contextlib.asynccontextmanager
async def served(client: Client, tmp_path: Path) -> AsyncIterator[str]:
    """The app (no flows, role tokens) behind a real server: its URL."""
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(client, [], store, tokens=role_tokens())
    try:
        async with serving(app) as server:
            yield server.url
    finally:
        await store.close()


async def raw_post(
    url: str, path: str, headers: dict[str, str], chunks: AsyncIterator[bytes]
) -> tuple[int, dict[str, object], int]:
    """POST `chunks` over a bare socket; the answer's status, JSON body, and bytes sent.

    Sends until the server answers or stops reading, as a hostile client
    would (httpx would wait to send the whole body first).
    """
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    head = f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    writer.write(head.encode())
    sent = 0

    async def send() -> None:
        nonlocal sent
        with contextlib.suppress(ConnectionError):
            async for chunk in chunks:
                writer.write(chunk)
                await writer.drain()
                sent += len(chunk)

    sending = asyncio.create_task(send())
    try:
        async with asyncio.timeout(60):
            status_line = await reader.readline()
            status = int(status_line.split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length))
    finally:
        sending.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sending
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return status, body, sent


async def zeros(total: int, *, chunked: bool) -> AsyncIterator[bytes]:
    """`total` zero bytes in 1 MiB pieces (as chunked transfer coding, when `chunked`)."""
    piece = b"\0" * MIB
    for _ in range(total // MIB):
        yield f"{len(piece):x}\r\n".encode() + piece + b"\r\n" if chunked else piece
    if chunked:
        yield b"0\r\n\r\n"


async def test_a_body_over_the_limit_is_a_413_before_the_token_is_checked(
    client: Client, tmp_path: Path
) -> None:
    """A declared or streamed body past the limit is refused, not read, with no token."""
    async with served(client, tmp_path) as url:
        declared, body, sent = await raw_post(
            url,
            "/api/sessions",
            {
                "Content-Type": "application/json",
                "Content-Length": str(MAX_BODY_BYTES + 1),
            },
            zeros(MAX_BODY_BYTES + MIB, chunked=False),
        )
        assert declared == 413, body
        error = body["error"]
        assert isinstance(error, dict)
        assert error["code"] == "too_large"  # pyright: ignore[reportUnknownMemberType]
        message = str(error["message"])  # pyright: ignore[reportUnknownArgumentType]
        assert "64 MiB" in message and "32 MiB" in message, message
        # Refused on its Content-Length: far less than the body was read.
        assert sent < MAX_BODY_BYTES // 2, sent

        # No Content-Length (`curl -T - < /dev/zero`): counted as it streams.
        streamed, body, sent = await raw_post(
            url,
            "/api/sessions",
            {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
            zeros(MAX_BODY_BYTES * 2, chunked=True),
        )
        assert streamed == 413, body
        assert sent < MAX_BODY_BYTES * 2, sent


async def test_the_largest_message_fits_under_the_body_limit(
    client: Client, tmp_path: Path
) -> None:
    """A 32 MiB message, even with a JSON escape every few characters, is not a 413."""
    text = ("line of text\n" * (32 * MIB // 13 + 1))[: 32 * MIB]
    body = json.dumps({"text": text}).encode()
    assert len(body) > 32 * MIB  # the escapes add to it
    async with (
        served(client, tmp_path) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as http,
    ):
        sent = await http.post(
            "/api/sessions/nobody/messages",
            content=body,
            headers={
                "Content-Type": "application/json",
                "Authorization": f"Bearer {ROLE_TOKENS['chat']}",
            },
        )
        # Read and checked: the session does not exist.
        assert sent.json()["error"]["code"] == "session_not_found", sent.text[:300]
        over = await http.post(
            "/api/sessions/nobody/messages",
            content=b" " * (MAX_BODY_BYTES + 1),
            headers={"Content-Type": "application/json"},
        )
        assert (over.status_code, over.json()["error"]["code"]) == (413, "too_large")


async def test_the_login_form_takes_no_files_and_few_bytes(
    client: Client, tmp_path: Path
) -> None:
    async with (
        served(client, tmp_path) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        csrf = csrf_of(await http.get("/login"))
        fields = {"token": ROLE_TOKENS["read"], "next": "/inbox", "csrf_token": csrf}
        with_file = await http.post(
            "/login", data=fields, files={"upload": ("a.bin", b"x" * 1000)}
        )
        assert with_file.status_code == 400, with_file.text
        assert "files" in with_file.json()["error"]["message"]
        big = await http.post(
            "/login",
            data=fields,
            files={"upload": ("a.bin", b"x" * (LOGIN_BODY_BYTES + 1))},
        )
        assert big.status_code == 413, big.text
        assert "16 KiB" in big.json()["error"]["message"]
        # The form as the page sends it still signs in.
        signed = await http.post("/login", data=fields)
        assert signed.status_code == 303, signed.text


@pytest.mark.parametrize(
    ("value", "as_json"),
    [
        (b"{" * (40 * MIB), False),
        ("x" * (40 * MIB), False),
        ({"text": "x" * (40 * MIB)}, True),
        ([["y" * (40 * MIB)]] * 3, True),
    ],
    ids=["bytes", "str", "object", "list"],
)
def test_a_refused_value_is_cut_before_it_is_quoted(
    value: object, as_json: bool
) -> None:
    """Quoting a huge refused body in a 422 copies at most a few hundred bytes of it."""
    tracemalloc.start()
    try:
        shown = _shown(value, as_json=as_json)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert shown.endswith("…") and len(shown) <= 61, shown
    assert peak < 64 * 1024, peak


async def test_no_form_of_the_app_takes_a_file(client: Client, tmp_path: Path) -> None:
    """A multipart file part is refused before anything reads it, on pages and the API."""
    async with (
        served(client, tmp_path) as url,
        httpx.AsyncClient(base_url=url, timeout=30) as http,
    ):
        csrf = csrf_of(await http.get("/login"))
        signed = await http.post(
            "/login",
            data={"token": ROLE_TOKENS["admin"], "next": "", "csrf_token": csrf},
        )
        assert signed.status_code == 303, signed.text
        upload = {"upload": ("a.bin", b"x" * 1000)}
        for path in (
            "/logout",  # a page form the app checks itself
            "/sessions/nobody/approvals/intr-x/reject",  # a page form FastAPI parses
            "/api/sessions/nobody/end",  # the cookie's CSRF check reads the form
        ):
            posted = await http.post(
                path, data={"csrf_token": csrf}, files=upload, follow_redirects=False
            )
            assert posted.status_code == 400, (path, posted.text[:300])
            assert "files" in posted.text, (path, posted.text[:300])
