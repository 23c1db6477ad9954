import asyncio
import json
import socket
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from pydantic import JsonValue

from dex_agents._scripted._mock_messages_api import MockMessagesApi
from dex_agents.testing._hermetic import (
    DUMMY_API_KEY,
    bundled_cli_path,
    hermetic_cli_env,
)
from dex_agents.testing._refusing_proxy import RefusingProxy


def body(prompt: str, *, stream: bool = True, tools: Sequence[str] = ()) -> JsonValue:
    return {
        "model": "claude-test-1",
        "max_tokens": 100,
        "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
        "tools": [{"name": n, "input_schema": {"type": "object"}} for n in tools],
    }


def parse_sse(text: str) -> list[tuple[str, dict[str, JsonValue]]]:
    events: list[tuple[str, dict[str, JsonValue]]] = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


async def test_streams_a_text_answer() -> None:
    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        response = await client.post(
            f"{api.base_url}/v1/messages?beta=true", json=body("dex-script: say hello")
        )
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names == [
        "message_start",
        "ping",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(data["type"] == name for name, data in events)
    message = events[0][1]["message"]
    assert isinstance(message, dict)
    assert message["model"] == "claude-test-1"
    assert str(message["id"]).startswith("msg_mock_0001_")
    assert message["usage"] == {
        "input_tokens": 20,
        "output_tokens": 1,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }
    text = "".join(
        str(d["delta"]["text"])  # type: ignore[index]
        for n, d in events
        if n == "content_block_delta"
    )
    assert text == "said: hello"
    assert events[-2][1]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    [request] = api.requests
    assert (request.method, request.path) == ("POST", "/v1/messages?beta=true")
    assert request.body == body("dex-script: say hello")
    assert api.unserved == []


async def test_streams_tool_use_blocks_in_one_message() -> None:
    prompt = 'dex-script: call lookup {"orderId": "7"} && call lookup {"orderId": "8"}'
    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        response = await client.post(
            f"{api.base_url}/v1/messages",
            json=body(prompt, tools=["mcp__tools__lookup"]),
        )
        events = parse_sse(response.text)
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [s["name"] for s in starts] == ["mcp__tools__lookup"] * 2  # type: ignore[index]
    ids = [str(s["id"]) for s in starts]  # type: ignore[index]
    assert all(i.startswith("toolu_mock_") and len(i) == 27 for i in ids)
    assert len(set(ids)) == 2
    inputs: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_delta":
            delta = data["delta"]
            assert isinstance(delta, dict) and delta["type"] == "input_json_delta"
            index = int(str(data["index"]))
            inputs[index] = inputs.get(index, "") + str(delta["partial_json"])
    assert [json.loads(v) for v in inputs.values()] == [
        {"orderId": "7"},
        {"orderId": "8"},
    ]
    assert events[-2][1]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


async def test_answers_json_when_not_streaming_and_counts_messages() -> None:
    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        for expected in ("msg_mock_0001_", "msg_mock_0002_"):
            response = await client.post(
                f"{api.base_url}/v1/messages",
                json=body("dex-script: say hi", stream=False),
            )
            message = response.json()
            assert message["id"].startswith(expected)
        assert message["content"] == [{"type": "text", "text": "said: hi"}]
        assert message["stop_reason"] == "end_turn"
        assert message["usage"]["output_tokens"] >= 1


async def test_unserved_requests_are_recorded() -> None:
    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        count = await client.post(f"{api.base_url}/v1/messages/count_tokens", json={})
        get = await client.get(f"{api.base_url}/v1/messages")
        bad = await client.post(f"{api.base_url}/v1/messages", content=b"{oops")
        script = await client.post(
            f"{api.base_url}/v1/messages", json=body("dex-script: dance")
        )
    assert [r.status_code for r in (count, get, bad, script)] == [404, 405, 400, 400]
    assert "unknown script command 'dance'" in script.json()["error"]["message"]
    assert [(r.method, r.path) for r in api.unserved] == [
        ("POST", "/v1/messages/count_tokens"),
        ("GET", "/v1/messages"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages"),
    ]
    assert len(api.requests) == 4


async def test_pause_holds_the_answer_until_the_gate_opens() -> None:
    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        api.open_gate("early")  # opening before anyone waits lets them pass
        pending = asyncio.create_task(
            client.post(
                f"{api.base_url}/v1/messages",
                json=body("dex-script: say slow ;; pause g1", stream=False),
            )
        )
        await api.wait_paused("g1")
        assert not pending.done()
        with pytest.raises(TimeoutError):
            await api.wait_paused("never", timeout=0.05)
        api.open_gate("g1")
        response = await asyncio.wait_for(pending, 10)
        assert response.json()["content"][0]["text"] == "said: slow"
        early = await client.post(
            f"{api.base_url}/v1/messages",
            json=body("dex-script: say now ;; pause early", stream=False),
        )
        assert early.status_code == 200


async def test_chunked_request_body() -> None:
    async def chunks():
        yield json.dumps(body("dex-script: say chunked", stream=False)).encode()

    async with MockMessagesApi() as api, httpx.AsyncClient() as client:
        response = await client.post(f"{api.base_url}/v1/messages", content=chunks())
    assert response.json()["content"][0]["text"] == "said: chunked"


def test_sync_use_and_not_started_errors() -> None:
    api = MockMessagesApi()
    with pytest.raises(RuntimeError):
        _ = api.base_url
    with api:
        response = httpx.post(
            f"{api.base_url}/v1/messages",
            json=body("dex-script: say sync", stream=False),
        )
        assert response.json()["content"][0]["text"] == "said: sync"


async def test_refusing_proxy_records_and_refuses() -> None:
    async with RefusingProxy() as proxy:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as s:
            s.sendall(b"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = s.recv(1024)
        assert reply.startswith(b"HTTP/1.1 403")
        async with httpx.AsyncClient(proxy=proxy.url) as client:
            response = await client.get("http://example.invalid/path")
        assert response.status_code == 403
        assert proxy.attempts == [
            "CONNECT api.anthropic.com:443 HTTP/1.1",
            "GET http://example.invalid/path HTTP/1.1",
        ]


def test_hermetic_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "real")
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "1")
    monkeypatch.setenv("https_proxy", "http://corp:3128")
    monkeypatch.setenv("ALL_PROXY", "socks5://corp")
    monkeypatch.setenv("DEX_UNRELATED", "kept")
    with MockMessagesApi() as api, RefusingProxy() as proxy:
        env = hermetic_cli_env(tmp_path, api=api, proxy=proxy)
        bare = hermetic_cli_env(tmp_path, api=None, proxy=proxy)
        assert env["ANTHROPIC_BASE_URL"] == api.base_url
        assert env["HTTPS_PROXY"] == env["https_proxy"] == proxy.url
        assert env["HTTP_PROXY"] == env["http_proxy"] == proxy.url
    assert "ANTHROPIC_BASE_URL" not in bare
    assert env["DEX_UNRELATED"] == "kept"
    assert env["ANTHROPIC_API_KEY"] == DUMMY_API_KEY
    assert env["NO_PROXY"] == env["no_proxy"] == "127.0.0.1,localhost"
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert Path(env["HOME"]).is_dir() and Path(env["HOME"]).parent == tmp_path
    assert Path(env["CLAUDE_CONFIG_DIR"]).is_dir()
    for name in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "ALL_PROXY"):
        assert name not in env


def test_bundled_cli_path() -> None:
    path = bundled_cli_path()
    assert path is None or (path.name == "claude" and path.parent.name == "_bundled")


async def test_close_cuts_a_request_waiting_at_a_gate() -> None:
    async with httpx.AsyncClient() as client:
        async with MockMessagesApi() as api:
            pending = asyncio.create_task(
                client.post(
                    f"{api.base_url}/v1/messages",
                    json=body("dex-script: say never ;; pause shut", stream=False),
                )
            )
            await api.wait_paused("shut")
        with pytest.raises(httpx.TransportError):
            await asyncio.wait_for(pending, 10)
