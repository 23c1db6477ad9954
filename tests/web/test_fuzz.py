"""The API fuzzed from its own OpenAPI schema (schemathesis): no 500, and a refused request writes nothing.

Schemathesis calls the real server with `requests` (blocking), so the cases
run on a thread while the test's event loop serves the app and runs the
worker. "Nothing written" is checked on both sides of a session: the runtime
store's every row, and every session workflow's history length in Temporal.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sqlite3
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import APIOperation, BaseSchema, Case, GenerationMode, Response
from schemathesis.core.result import Ok
from temporalio.client import Client

from dex_agents.web._tokens import Role
from support.web_rig import WebRig, bearer

_SSE_PATHS = ("/events",)
_SUPPRESSED = [
    HealthCheck.too_slow,
    HealthCheck.filter_too_much,
    HealthCheck.data_too_large,
]


def operations(schema: BaseSchema) -> list[APIOperation]:
    """The schema's operations (it is the app's own: each one loads)."""
    found: list[APIOperation] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        found.append(result.ok())
    return found


_EXAMPLES = 12


def store_digest(path: Path) -> str:
    """A hash of every row of the runtime store (a separate connection: WAL readers see all)."""
    digest = hashlib.sha256()
    with sqlite3.connect(path) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
            )
        ]
        for table in tables:
            digest.update(table.encode())
            for row in conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid'):
                digest.update(repr(row).encode())
    return digest.hexdigest()


Digest = tuple[str, list[tuple[str, int]]]
"""The store's rows, hashed, and each session workflow's history length."""


async def quiet_digest(client: Client, flow_type: str, store_path: Path) -> Digest:
    """The store's and the engine's state once nothing is in flight.

    An accepted write goes on after its answer (a publish, a turn), so the
    state is read when no session workflow has a task or an activity pending
    and every session in the store is listed by Temporal: a condition, waited
    for with a deadline.
    """
    async with asyncio.timeout(60):
        while True:
            lengths: dict[str, int] = {}
            busy = False
            async for execution in client.list_workflows(
                f"WorkflowType = '{flow_type}'"
            ):
                described = await client.get_workflow_handle(
                    execution.id, run_id=execution.run_id
                ).describe()
                raw = described.raw_description
                busy |= raw.HasField("pending_workflow_task") or bool(
                    raw.pending_activities
                )
                lengths[execution.id] = raw.workflow_execution_info.history_length
            with sqlite3.connect(store_path) as conn:
                stored = {
                    r[0] for r in conn.execute("SELECT session_id FROM snapshots")
                }
            if not busy and stored <= set(lengths):
                return store_digest(store_path), sorted(lengths.items())
            await asyncio.sleep(0.05)


class Fuzzer:
    """Runs schemathesis cases from a thread, with the event loop's help for waits."""

    def __init__(
        self, rig: WebRig, client: Client, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.rig = rig
        self.client = client
        self.loop = loop
        self.session = requests.Session()
        self.store_path = Path(rig.store.path) if hasattr(rig.store, "path") else None
        self.calls = 0

    def on_loop(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=120)

    def digest(self) -> Digest:
        assert self.store_path is not None
        return self.on_loop(
            quiet_digest(self.client, self.rig.flow.flow_type, self.store_path)
        )

    @staticmethod
    def app_answered(response: Response) -> bool:
        """False for a request the HTTP server refused before the app saw it.

        uvicorn answers a request that is not valid HTTP/1.1 (a header value
        with a byte h11 refuses) with a plain-text 400 of its own.
        """
        return not (
            response.status_code == 400
            and response.text.strip() == "Invalid HTTP request received."
        )

    def call(self, case: Case, role: Role | None) -> Response:
        self.calls += 1
        headers = {
            k: v
            for k, v in (case.headers or {}).items()
            if k.lower() != "authorization"
        }
        headers.update(bearer(role))
        if "/events" in case.path:
            case.query = {**(case.query or {}), "until": "idle"}
        try:
            return case.call(
                base_url=self.rig.url, session=self.session, headers=headers, timeout=30
            )
        except requests.Timeout as err:
            # Name the request: a hang is a finding, not a flaky timeout.
            raise AssertionError(
                f"no answer in 30 s: {case.method} {case.path} "
                f"{case.path_parameters} {case.query} {case.body!r}"
            ) from err

    def settle(self, case: Case, response: Response) -> None:
        """After a write that was applied, wait until its session is idle again."""
        if case.method.upper() != "POST" or response.status_code >= 300:
            return
        session_id = (case.path_parameters or {}).get("session_id")
        if session_id is None and case.path == "/api/sessions":
            session_id = response.json()["session_id"]
        if session_id is not None:
            self.on_loop(self.rig.sessions.wait_for_idle(session_id, timeout=60))

    def run(
        self,
        mode: GenerationMode,
        role: Role | None,
        check: Callable[[Case, Response], None],
        *,
        include_sse: bool,
    ) -> None:
        raw = self.on_loop(self._schema())
        schema = schemathesis.openapi.from_dict(raw)
        for operation in operations(schema):
            if not include_sse and any(p in operation.path for p in _SSE_PATHS):
                continue
            # schemathesis also draws from the global `random` (its dictionaries
            # and negative mutations): seeded here, so the cases do not depend on
            # the tests that ran before (derandomize seeds Hypothesis's draws).
            random.seed(f"{mode.value} {role} {operation.method} {operation.path}")
            strategy = operation.as_strategy(generation_mode=mode)

            @settings(
                max_examples=_EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=_SUPPRESSED,
            )
            @given(case=strategy)
            def fuzz(case: Case) -> None:
                check(case, self.call(case, role))

            try:
                fuzz()
            except Unsatisfiable:
                continue  # no negative case exists for an operation without inputs

    async def _schema(self) -> Any:
        return (await self.rig.http.get("/api/openapi.json")).json()


# A module mark: pytest-timeout reads the limit before fixtures run.
pytestmark = pytest.mark.timeout(600)


async def test_refused_requests_write_nothing(rig: WebRig, client: Client) -> None:
    # Sessions to aim at: one idle, one waiting for approval.
    await rig.sessions.start("fuzz-idle", initial_message="say hi")
    await rig.sessions.wait_for_idle("fuzz-idle")
    await rig.sessions.start(
        "fuzz-waiting", initial_message='call create_refund {"orderId": "9"}'
    )
    await rig.sessions.wait_for_idle("fuzz-waiting")
    fuzzer = Fuzzer(rig, client, asyncio.get_running_loop())
    before = await asyncio.to_thread(fuzzer.digest)
    statuses: set[int] = set()

    def refused(case: Case, response: Response) -> None:
        statuses.add(response.status_code)
        assert 400 <= response.status_code < 500, (
            case.method,
            case.path,
            response.text,
        )
        if fuzzer.app_answered(response):
            assert set(response.json()) == {"error"}, response.text

    def run_all() -> None:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzzer.run(mode, None, refused, include_sse=True)
            # A read-only token against every write.
            fuzzer.run(
                mode,
                "read",
                lambda c, r: refused(c, r) if c.method.upper() == "POST" else None,
                include_sse=False,
            )

    await asyncio.to_thread(run_all)
    after = await asyncio.to_thread(fuzzer.digest)
    assert after == before
    assert rig.ledger.count("create_refund_started") == 0
    assert 401 in statuses and 403 in statuses
    assert fuzzer.calls > 100


async def test_fuzzing_with_an_admin_token_finds_no_server_error(
    rig: WebRig, client: Client
) -> None:
    fuzzer = Fuzzer(rig, client, asyncio.get_running_loop())
    statuses: dict[int, int] = {}

    def no_server_error(case: Case, response: Response) -> None:
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (
            case.method,
            case.path,
            case.body,
            response.text,
        )
        if response.status_code >= 400 and fuzzer.app_answered(response):
            assert set(response.json()) == {"error"}, response.text
        fuzzer.settle(case, response)

    def checked_writes(case: Case, response: Response) -> None:
        no_server_error(case, response)

    def run_all() -> None:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzzer.run(mode, "admin", checked_writes, include_sse=True)

    await asyncio.to_thread(run_all)
    assert any(200 <= s < 300 for s in statuses), statuses
    assert any(400 <= s < 500 for s in statuses), statuses


async def test_a_refused_write_by_an_admin_changes_nothing(
    rig: WebRig, client: Client
) -> None:
    # Invalid writes (negative cases) aimed at live sessions: each refused one leaves
    # the store and the engine exactly as they were.
    await rig.sessions.start(
        "fuzz-target", initial_message='call create_refund {"orderId": "3"}'
    )
    await rig.sessions.wait_for_idle("fuzz-target")
    fuzzer = Fuzzer(rig, client, asyncio.get_running_loop())
    refused = 0

    def unchanged_when_refused(case: Case, response: Response) -> None:
        nonlocal refused
        assert response.status_code < 500, (case.method, case.path, response.text)
        fuzzer.settle(case, response)

    def run_all() -> None:
        nonlocal refused
        raw = fuzzer.on_loop(fuzzer._schema())  # pyright: ignore[reportPrivateUsage]
        schema = schemathesis.openapi.from_dict(raw)
        for operation in operations(schema):
            if operation.method.upper() != "POST":
                continue
            random.seed(f"edits {operation.method} {operation.path}")  # see `run`
            strategy = operation.as_strategy(
                generation_mode=GenerationMode.NEGATIVE,
                path_parameters={"session_id": "fuzz-target"},
            )

            @settings(
                max_examples=_EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=_SUPPRESSED,
            )
            @given(case=strategy)
            def fuzz(case: Case) -> None:
                nonlocal refused
                before = fuzzer.digest()
                response = fuzzer.call(case, "admin")
                unchanged_when_refused(case, response)
                if response.status_code >= 400:
                    refused += 1
                    assert fuzzer.digest() == before, (
                        case.method,
                        case.path,
                        case.body,
                        response.text,
                    )

            try:
                fuzz()
            except Unsatisfiable:
                continue

    await asyncio.to_thread(run_all)
    assert refused > 10
    assert rig.ledger.count("create_refund_started") == 0
