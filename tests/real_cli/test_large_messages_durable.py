"""Large user messages through a durable session: dev server, real bundled CLI, scripted API.

The client writes a message longer than `INLINE_TEXT_LIMIT` to the runtime store
and sends a reference; RunModel resolves it, so the CLI and the model get the
whole text while no history event carries it. The scripted model's
`dex-script: digest` answers the length and SHA-256 of the text it received,
which each test computes itself. A message over `MAX_USER_MESSAGE_BYTES` is
refused before anything is written; one the Messages API refuses (HTTP 413)
fails its turn after one RunModel attempt, and the session drops it so the next
message is answered.

As in `tests/claude/test_large_messages.py`, the agent's options tell the CLI
that the scripted model's context window is 100M tokens (`DISABLE_COMPACT`,
`CLAUDE_CODE_MAX_CONTEXT_TOKENS`), or CLI 2.1.327 would refuse a multi-MB prompt
itself, before any request.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest
from claude_agent_sdk import ClaudeAgentOptions
from pydantic import JsonValue
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from dex_agents import AgentSessionOptions, UserError
from dex_agents.claude import (
    ClaudeAgentDefinition,
    ClaudeAgentOptionsContext,
    create_claude_agent_session_flow,
)
from dex_agents.session._blob import blob_reference
from dex_agents.session._pending import INLINE_TEXT_LIMIT, MAX_USER_MESSAGE_BYTES
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.temporal import SessionClient, create_worker
from support.claude_rig import ClaudeRig

pytestmark = pytest.mark.timeout(240)

MB = 1_000_000
EVENT_LIMIT = 256 * 1024
"""The largest history event a session may write, whatever a user pastes."""
LARGE_WINDOW_ENV = {
    "DISABLE_COMPACT": "1",
    "CLAUDE_CODE_MAX_CONTEXT_TOKENS": "100000000",
}
"""Makes the CLI take the scripted model's context window for 100M tokens."""
RUN_MODEL_ATTEMPTS = 3


@dataclass(kw_only=True)
class LargeMessageAgent:
    sessions: SessionClient
    store: SQLiteRuntimeStore
    options_built: list[ClaudeAgentOptionsContext] = field(default_factory=lambda: [])

    def attempts_of(self, session_id: str) -> list[tuple[str, int]]:
        """(turn, attempt) of every RunModel attempt of a session, by its options."""
        return [
            (c.turn_id, c.attempt)
            for c in self.options_built
            if c.flow_id == session_id
        ]


@asynccontextmanager
async def large_message_agent(
    rig: ClaudeRig, client: Client, flow_type: str
) -> AsyncIterator[LargeMessageAgent]:
    """A tool-less Claude agent on the real CLI, served by a worker in this process."""
    built: list[ClaudeAgentOptionsContext] = []

    def options(context: ClaudeAgentOptionsContext) -> ClaudeAgentOptions:
        built.append(context)
        cwd = rig.tmp / "agents" / context.flow_id
        cwd.mkdir(parents=True, exist_ok=True)
        return ClaudeAgentOptions(
            tools=[],
            setting_sources=[],
            cwd=str(cwd.resolve()),
            env={**rig.env, **LARGE_WINDOW_ENV},
        )

    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=options),
        flow_type,
        AgentSessionOptions(run_model_attempts=RUN_MODEL_ATTEMPTS),
    )
    store = SQLiteRuntimeStore(rig.tmp / "runtime.sqlite")
    try:
        async with create_worker(client, [flow], store=store):
            yield LargeMessageAgent(
                sessions=SessionClient(client, flow, store),
                store=store,
                options_built=built,
            )
    finally:
        await store.close()


def pasted_log(size: int, seed: str) -> str:
    """A `dex-script: digest` prompt of at least `size` UTF-8 bytes, like a pasted log.

    Every line differs (and differs per `seed`), and the text has what JSON and
    terminals treat specially: quotes, backslashes, tabs, CR, ANSI colour
    codes, NUL, and characters outside ASCII.
    """
    lines = ["dex-script: digest"]
    total = len(lines[0]) + 1
    number = 0
    while total < size:
        line = (
            f"2026-12-01T09:{number // 60 % 60:02d}:{number % 60:02d}Z\t{seed}\t"
            f"\x1b[3{number % 8}mWARN\x1b[0m shard-{number % 89} "
            f'id={number:08x} file="D:\\dumps\\{number}.bin" '
            f"durée=✓ 東京 🧾 nul=\x00 took={number % 991}ms"
        )
        line += "\r" if number % 7 == 0 else ""
        lines.append(line)
        total += len(line.encode()) + 1
        number += 1
    return "\n".join(lines)


def digest_of(text: str) -> str:
    """What the scripted model answers to a one-block `dex-script: digest` prompt."""
    return (
        f"digest: {len(text)} chars, sha256 {hashlib.sha256(text.encode()).hexdigest()}"
    )


async def history_of(client: Client, session_id: str) -> list[HistoryEvent]:
    return list((await client.get_workflow_handle(session_id).fetch_history()).events)


def run_model_attempts(events: list[HistoryEvent]) -> dict[str, int]:
    """The attempt each finished RunModel Step ended on, by activity ID.

    Temporal writes a retried activity's started event once, with its last
    attempt, so 1 means the Step ran exactly one attempt.
    """
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_id
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name.endswith(
            ".run_model"
        )
    }
    return {
        scheduled[attrs.scheduled_event_id]: attrs.attempt
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and (attrs := e.activity_task_started_event_attributes).scheduled_event_id
        in scheduled
    }


def user_texts(body: JsonValue) -> list[str]:
    """The text blocks of the user messages of a Messages API request body."""
    assert isinstance(body, dict)
    messages = body["messages"]
    assert isinstance(messages, list)
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                str(b["text"])
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return texts


async def test_3_mb_then_20_mb_messages_are_answered_whole_in_a_durable_session(
    claude_rig: ClaudeRig, client: Client, flow_type: str
) -> None:
    sid = "large-durable-claude-3mb-then-20mb"
    prompts = [pasted_log(3 * MB, "first"), pasted_log(20 * MB, "second")]
    async with large_message_agent(claude_rig, client, flow_type) as agent:
        sessions = agent.sessions
        await sessions.start(sid)
        for number, prompt in enumerate(prompts, start=1):
            assert len(prompt.encode()) > INLINE_TEXT_LIMIT
            assert await sessions.send_user_message(sid, prompt)
            snap = await sessions.wait_for_idle(sid)
            turn = snap.turns[-1]
            assert turn.turn_id == f"turn-{number}"
            assert turn.status == "completed", turn.error
            assert turn.final_text == digest_of(prompt)
            # The snapshot shows a preview; the transcript keeps the whole message.
            assert len(turn.prompts[0]) <= 200
            said = [
                m.text for m in snap.messages if m.item.get("kind") == "user_prompt"
            ]
            assert said == prompts[:number]
        events = await history_of(client, sid)
        assert agent.attempts_of(sid) == [("turn-1", 1), ("turn-2", 1)]
    largest = max(e.ByteSize() for e in events)
    assert largest <= EVENT_LIMIT, f"largest history event: {largest:,} B"
    assert run_model_attempts(events) == {
        "turn-1/run_model/1": 1,
        "turn-2/run_model/1": 1,
    }
    # The second turn resumed the first from the store: the model saw both, whole.
    requests = claude_rig.api.requests
    assert len(requests) == 2
    assert user_texts(requests[-1].body) == prompts
    assert requests[-1].size > 23 * MB
    assert claude_rig.api.too_large == []
    assert claude_rig.proxy.attempts == []


async def test_a_message_over_32_mib_is_refused_and_nothing_is_written(
    claude_rig: ClaudeRig, client: Client, flow_type: str
) -> None:
    sid = "large-durable-claude-over-32-mib"
    text = "dex-script: digest\n" + "y" * MAX_USER_MESSAGE_BYTES
    assert len(text.encode()) > MAX_USER_MESSAGE_BYTES
    async with large_message_agent(claude_rig, client, flow_type) as agent:
        sessions = agent.sessions
        await sessions.start(sid, initial_message="dex-script: say before the paste")
        before = await sessions.wait_for_idle(sid)
        assert before.turns[-1].final_text == "said: before the paste"
        length = (await client.get_workflow_handle(sid).describe()).history_length
        with pytest.raises(UserError) as refused:
            await sessions.send_user_message(sid, text)
        after = await sessions.snapshot(sid)
        after_length = (await client.get_workflow_handle(sid).describe()).history_length
        ref = blob_reference("msg", text.encode())
        with pytest.raises(KeyError):
            await agent.store.get_blob(sid, ref.blob_id)
        assert agent.attempts_of(sid) == [("turn-1", 1)]
    message = str(refused.value)
    assert f"{len(text.encode()):,} bytes" in message
    assert "33,554,432 bytes" in message
    assert after.turn_count == before.turn_count == 1
    assert after.pending_prompts == []
    assert after_length == length
    assert len(claude_rig.api.requests) == 1
    assert claude_rig.proxy.attempts == []


async def test_a_message_the_api_refuses_fails_its_turn_once_and_the_next_is_answered(
    claude_rig: ClaudeRig, client: Client, flow_type: str
) -> None:
    sid = "large-durable-claude-413-then-small"
    api = claude_rig.api
    api.max_request_bytes = 4 * 1024 * 1024
    prompt = pasted_log(5 * MB, "refused")
    async with large_message_agent(claude_rig, client, flow_type) as agent:
        sessions = agent.sessions
        await sessions.start(sid, initial_message=prompt)
        snap = await sessions.wait_for_idle(sid)
        [failed] = snap.turns
        assert failed.status == "failed"
        error = failed.error or ""
        # The turn's error is the Step's failure: its type, then the runner's message.
        assert error.startswith(
            "MessageTooLargeError: the message is too large for the model: "
        ), error
        assert "HTTP 413 request_too_large" in error
        assert f"{len(prompt.encode()):,} bytes" in error
        assert "Send a smaller message" in error
        # One RunModel attempt, one request: refused, not retried.
        assert RUN_MODEL_ATTEMPTS > 1
        assert agent.attempts_of(sid) == [("turn-1", 1)]
        [refused] = api.too_large
        assert refused.size > 4 * 1024 * 1024
        assert api.requests == [refused]
        # The refused message is not kept for the next turn.
        assert snap.pending_prompts == []

        await sessions.send_user_message(sid, "dex-script: say after the refusal")
        snap = await sessions.wait_for_idle(sid)
        answered = snap.turns[-1]
        assert answered.turn_id == "turn-2"
        assert answered.status == "completed", answered.error
        assert answered.final_text == "said: after the refusal"
        events = await history_of(client, sid)
        assert agent.attempts_of(sid) == [("turn-1", 1), ("turn-2", 1)]
    assert run_model_attempts(events) == {
        "turn-1/run_model/1": 1,
        "turn-2/run_model/1": 1,
    }
    assert max(e.ByteSize() for e in events) <= EVENT_LIMIT
    # The next turn sent the failure note and the new message, not the refused one.
    [_, served] = api.requests
    assert served.size < 1 * MB
    [note, said] = user_texts(served.body)
    assert note.startswith("The previous turn (turn-1) failed: ")
    assert "too large for the model and were not kept" in note
    assert said == "dex-script: say after the refusal"
    assert all(len(m.text) < 1 * MB for m in snap.messages)
    assert claude_rig.proxy.attempts == []
