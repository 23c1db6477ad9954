"""The web suite's rig: the ledger flow, its worker, the app on a real uvicorn server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio
from temporalio.client import Client
from temporalio.service import RPCError

from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from dex_agents.temporal._flow import AgentSessionFlow
from dex_agents.temporal._snapshot import AgentSnapshot
from dex_agents.testing import Ledger
from dex_agents.testing._ledger_flow import LedgerFlowConfig, ledger_flow
from dex_agents.web import create_app
from dex_agents.web._server import serving
from dex_agents.web._tokens import Role, Token, TokenSet, hash_token
from support.gates import gate_reached, open_gate
from support.session_harness import ledger_config

ROLE_TOKENS: dict[Role, str] = {
    "read": "tok-reader-secret",
    "chat": "tok-chatter-secret",
    "approve": "tok-approver-secret",
    "admin": "tok-admin-secret",
}
TOKEN_NAMES: dict[Role, str] = {
    "read": "reader",
    "chat": "chatter",
    "approve": "approver",
    "admin": "root",
}
_TEST_SCRYPT_N = 16
"""scrypt's cost in tests: the format is the production one, the work is not."""


def role_tokens() -> TokenSet:
    """One token per role, hashed as a token file keeps them."""
    return TokenSet(
        [
            Token(
                name=TOKEN_NAMES[role],
                roles=frozenset({role}),
                hash=hash_token(secret, n=_TEST_SCRYPT_N),
            )
            for role, secret in ROLE_TOKENS.items()
        ]
    )


def bearer(role: Role | None) -> dict[str, str]:
    """The headers of a request made with `role`'s token (none for None)."""
    return {} if role is None else {"Authorization": f"Bearer {ROLE_TOKENS[role]}"}


@dataclass
class WebRig:
    """A served app over a ledger flow with a running worker."""

    url: str
    http: httpx.AsyncClient
    flow: AgentSessionFlow
    sessions: SessionClient
    store: SQLiteRuntimeStore
    ledger: Ledger
    gate_dir: Path

    def session_id(self, prefix: str = "web") -> str:
        return f"{prefix}-{uuid.uuid4().hex[:8]}"

    def open_gate(self, name: str) -> None:
        open_gate(self.gate_dir, name)

    async def reached(self, gate: str, timeout: float = 30.0) -> None:
        await gate_reached(self.gate_dir, gate, timeout)

    async def pending(self, session_id: str) -> str:
        """Start nothing; wait until the session waits for approval; its interrupt ID."""
        snapshot = await self.sessions.wait_for_idle(session_id)
        (interrupt,) = snapshot.pending_interrupts
        return interrupt.interrupt_id

    async def approved_over_api(
        self, session_id: str, interrupt_id: str, body: dict[str, Any] | None = None
    ) -> AgentSnapshot:
        """Approve over the API as the approver (with `body`); the snapshot once idle.

        The answer must say the approver resolved it through the engine at once.
        """
        approved = await self.http.post(
            f"/api/sessions/{session_id}/approvals/{interrupt_id}/approve",
            json=body,
            headers=bearer("approve"),
        )
        assert approved.status_code == 200, approved.text
        assert approved.json() == {
            "interrupt_id": interrupt_id,
            "approved": True,
            "by": "approver",
            "resolved": True,
            "recorded": False,
        }
        return await self.sessions.wait_for_idle(session_id)

    async def listed_approval(self, session_id: str, timeout: float = 30.0) -> None:
        """Wait until the store's projection lists the session as waiting."""
        async with asyncio.timeout(timeout):
            while True:
                page = await self.http.get("/api/approvals", headers=bearer("read"))
                if any(a["session_id"] == session_id for a in page.json()["approvals"]):
                    return
                await asyncio.sleep(0.05)


@dataclass
class Sse:
    """One server-sent event as a client parses it."""

    data: str
    id: str | None = None
    event: str | None = None

    def json(self) -> Any:
        return json.loads(self.data)


@dataclass
class SseReader:
    """Reads SSE frames off one streaming response."""

    lines: AsyncIterator[str]
    seen: list[Sse] = field(default_factory=lambda: [])

    async def next(self, timeout: float = 30.0) -> Sse:
        """The next event (comments and pings skipped)."""
        data: list[str] = []
        event_id: str | None = None
        name: str | None = None
        async with asyncio.timeout(timeout):
            async for line in self.lines:
                if not line:
                    if data:
                        sse = Sse(data="\n".join(data), id=event_id, event=name)
                        self.seen.append(sse)
                        return sse
                    continue
                if line.startswith(":"):
                    continue
                key, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if key == "data":
                    data.append(value)
                elif key == "id":
                    event_id = value
                elif key == "event":
                    name = value
        raise EOFError("the stream ended")

    async def until(
        self, stop: Callable[[Sse], bool], timeout: float = 30.0
    ) -> list[Sse]:
        """Events up to and including the first one `stop` holds for."""
        got: list[Sse] = []
        async with asyncio.timeout(timeout):
            while True:
                sse = await self.next(timeout)
                got.append(sse)
                if stop(sse):
                    return got


@contextlib.asynccontextmanager
async def serve_ledger(
    client: Client,
    config: LedgerFlowConfig,
    *,
    worker_timeout: float = 10.0,
    wait_timeout: float = 300.0,
) -> AsyncIterator[WebRig]:
    """The ledger flow of `config` with an in-process worker, served by the app."""
    flow = ledger_flow(config)
    store = SQLiteRuntimeStore(Path(config.ledger_path).parent / "runtime.sqlite")
    app = create_app(
        client,
        [flow],
        store,
        tokens=role_tokens(),
        worker_timeout=worker_timeout,
        wait_timeout=wait_timeout,
    )
    async with (
        create_worker(client, [flow], store=store),
        serving(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as http,
    ):
        yield WebRig(
            url=server.url,
            http=http,
            flow=flow,
            sessions=SessionClient(client, flow, store),
            store=store,
            ledger=Ledger(config.ledger_path),
            gate_dir=Path(config.gate_dir),
        )
    await store.close()


def csrf_of(page: httpx.Response) -> str:
    """The CSRF token of a page's form."""
    found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


async def sign_in(rig: WebRig, http: httpx.AsyncClient) -> None:
    """Sign `http` in as the approver through the login form."""
    form = await http.get("/login")
    signed = await http.post(
        "/login",
        data={
            "token": ROLE_TOKENS["approve"],
            "next": "/inbox",
            "csrf_token": csrf_of(form),
        },
    )
    assert (signed.status_code, signed.headers["location"]) == (303, "/inbox")


def approve_path(sid: str, interrupt_id: str) -> str:
    """The API path that approves `interrupt_id` of session `sid`."""
    return f"/api/sessions/{sid}/approvals/{interrupt_id}/approve"


async def idle_stream(
    http: httpx.AsyncClient, path: str, after: int = 0
) -> list[dict[str, Any]]:
    """An event stream's items after `after`, to its next idle point (as SSE sends them)."""
    async with http.stream(
        "GET", f"{path}?until=idle&after={after}", headers=bearer("read")
    ) as stream:
        return [
            json.loads(line[6:])
            async for line in stream.aiter_lines()
            if line.startswith("data: ")
        ]


@contextlib.asynccontextmanager
async def workerless_app(
    client: Client, tmp_path: Path, flow_type: str, session_id: str
) -> AsyncIterator[httpx.AsyncClient]:
    """The app of a ledger flow no worker serves (`worker_timeout` 1 s), and a client of it.

    `session_id`, if the app admitted it, is terminated at the end, so no later
    worker of the flow type picks it up.
    """
    flow = ledger_flow(ledger_config(tmp_path, flow_type))
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    app = create_app(client, [flow], store, tokens=role_tokens(), worker_timeout=1.0)
    try:
        async with (
            serving(app) as server,
            httpx.AsyncClient(base_url=server.url, timeout=30) as http,
        ):
            yield http
    finally:
        with contextlib.suppress(RPCError):  # never admitted
            await client.get_workflow_handle(session_id).terminate()
        await store.close()


@pytest_asyncio.fixture  # pyright: ignore[reportUntypedFunctionDecorator]
async def rig(client: Client, tmp_path: Path, flow_type: str) -> AsyncIterator[WebRig]:
    """The ledger flow with an in-process worker, served by the app with role tokens."""
    config = ledger_config(tmp_path, flow_type)
    async with serve_ledger(
        client, config, worker_timeout=5.0, wait_timeout=5.0
    ) as served:
        yield served
