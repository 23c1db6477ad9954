from typing import Any, cast

from claude_agent_sdk import SessionStore
from claude_agent_sdk.testing import run_session_store_conformance

from dex_agents.claude._transcript import (
    CLAUDE_TRANSCRIPT_ITEM_KIND,
    ClaudeTranscriptStore,
    group_messages,
    last_session_id,
    transcript_entries,
    transcript_item,
)
from dex_agents.session import StoredMessage


async def test_conformance() -> None:
    # Duck-typed: the optional SessionStore methods are deliberately absent.
    await run_session_store_conformance(
        lambda: cast(SessionStore, ClaudeTranscriptStore())
    )


async def test_committed_entries_serve_any_project_key_without_last_prompt() -> None:
    committed: list[Any] = [
        {"type": "user", "uuid": "1"},
        {"type": "last-prompt", "leafUuid": "1"},
        {"type": "cost-state", "totalCostUSD": 1.0},
    ]
    store = ClaudeTranscriptStore(session_id="s", committed=committed)
    expected = [
        {"type": "user", "uuid": "1"},
        {"type": "cost-state", "totalCostUSD": 1.0},
    ]
    assert await store.load({"project_key": "a", "session_id": "s"}) == expected
    assert await store.load({"project_key": "b", "session_id": "s"}) == expected
    assert (
        await store.load({"project_key": "a", "session_id": "s", "subpath": "x"})
        is None
    )
    assert await store.load({"project_key": "a", "session_id": "other"}) is None
    await store.append(
        {"project_key": "a", "session_id": "s"}, [{"type": "assistant", "uuid": "2"}]
    )
    await store.append(
        {"project_key": "a", "session_id": "s"}, [{"type": "last-prompt"}]
    )
    await store.append(
        {"project_key": "a", "session_id": "s", "subpath": "subagents/x"},
        [{"type": "user"}],
    )
    loaded = await store.load({"project_key": "a", "session_id": "s"})
    assert loaded == [*expected, {"type": "assistant", "uuid": "2"}]
    assert store.segment_entries("s") == [{"type": "assistant", "uuid": "2"}]
    assert store.segment_entries("other") == []


def assistant(message_id: str, *blocks: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": message_id, "role": "assistant", "content": list(blocks)},
    }


def tool_result(call_id: str, content: Any) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": content}
            ],
        },
    }


def test_grouping_makes_one_message_per_api_message_and_tool_result() -> None:
    prompt = {"type": "user", "message": {"role": "user", "content": "hi"}}
    attachment = {"type": "attachment", "attachment": {"type": "hook_deferred_tool"}}
    entries: list[Any] = [
        {"type": "queue-operation"},
        prompt,
        assistant("m1", {"type": "text", "text": "Let me "}),
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "x", "input": {}}),
        attachment,
        tool_result("t1", [{"type": "text", "text": "r1"}]),
        {
            "type": "user",
            "message": {"role": "user", "content": "Continue from where you left off."},
            "isMeta": True,
        },
        assistant(
            "m2",
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "done"},
        ),
        {"type": "last-prompt"},
        {"type": "cost-state"},
    ]
    messages = group_messages("s", entries)
    assert [(m.role, m.text) for m in messages] == [
        ("assistant", "Let me "),
        ("tool", "r1"),
        ("assistant", "done"),
    ]
    assert messages[0].item["entries"] == entries[:4]
    assert messages[1].item["entries"] == [attachment, entries[5]]
    assert messages[2].item["entries"] == [entries[6], entries[7], entries[9]]
    assert all(m.item["kind"] == CLAUDE_TRANSCRIPT_ITEM_KIND for m in messages)
    assert all(m.item["session_id"] == "s" for m in messages)
    flattened = transcript_entries(messages)
    assert flattened == [e for e in entries if e["type"] != "last-prompt"]


def test_same_message_id_after_a_tool_result_starts_a_new_message() -> None:
    entries: list[Any] = [
        assistant("m1", {"type": "tool_use", "id": "t1", "name": "x", "input": {}}),
        tool_result("t1", "plain"),
        assistant("m1", {"type": "text", "text": "odd"}),
    ]
    assert [(m.role, m.text) for m in group_messages("s", entries)] == [
        ("assistant", ""),
        ("tool", "plain"),
        ("assistant", "odd"),
    ]


def test_riders_without_any_message_become_one() -> None:
    [message] = group_messages("s", [{"type": "queue-operation"}])
    assert message.item["entries"] == [{"type": "queue-operation"}]
    assert group_messages("s", []) == []


def test_session_lookup_skips_other_items() -> None:
    messages = [
        StoredMessage(
            role="user", text="hi", item={"kind": "user_prompt", "text": "hi"}
        ),
        StoredMessage(
            role="assistant", text="", item=transcript_item("old", [{"type": "a"}])
        ),
        StoredMessage(
            role="assistant", text="", item=transcript_item("new", [{"type": "b"}])
        ),
    ]
    assert last_session_id(messages) == "new"
    assert last_session_id(messages[:1]) is None
    assert transcript_entries(messages, "new") == [{"type": "b"}]
    assert transcript_entries(messages) == [{"type": "a"}, {"type": "b"}]
