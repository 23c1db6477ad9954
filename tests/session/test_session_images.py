"""`send_user_message` with images: queued by runners that can send images, refused otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from temporalio.client import Client

from dex_agents import UserError
from dex_agents.session._json import JsonObject
from dex_agents.session._media import ImageReference
from dex_agents.stores import SQLiteRuntimeStore
from dex_agents.stores._media import InMemoryMediaStore
from dex_agents.temporal import SessionClient, create_agent_session_flow, create_worker
from dex_agents.testing import ScriptedRunner
from support.session_harness import Harness


async def _reference() -> ImageReference:
    return await InMemoryMediaStore().put_image(b"\x89PNG pixel", "image/png")


async def test_a_runner_without_images_refuses_a_message_with_images(
    harness: Harness,
) -> None:
    sid = harness.session_id()
    ref = await _reference()
    assert not harness.flow.workflow_class.supports_images
    assert not await harness.sessions.start(
        sid, initial_message="say hi", initial_images=[ref]
    )
    assert not await harness.sessions.send_user_message(sid, "say hi", [ref])
    assert await harness.sessions.send_user_message(sid, "say plain")
    snap = await harness.sessions.wait_for_idle(sid)
    assert [t.final_text for t in snap.turns] == ["said: plain"]


async def test_send_and_wait_refuses_images_it_cannot_send_and_writes_nothing(
    harness: Harness, client: Client
) -> None:
    sid = harness.session_id()
    await harness.sessions.start(sid)
    handle = client.get_workflow_handle(sid)
    before = (await handle.describe()).raw_description.workflow_execution_info
    with pytest.raises(UserError, match="cannot send images"):
        await harness.sessions.send_and_wait(sid, "say hi", [await _reference()])
    after = (await handle.describe()).raw_description.workflow_execution_info
    assert after.history_length == before.history_length


class ImageRunner(ScriptedRunner):
    """A scripted runner that can send images: it answers with their count."""

    def build_user_message_with_images(
        self, text: str, images: Sequence[ImageReference]
    ) -> JsonObject:
        count = len(images)
        return {
            **self.build_user_message(f"{text} {count}"),
            "images": [i.to_wire() for i in images],
        }


async def test_a_runner_with_images_queues_them_in_the_stored_item(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    flow = create_agent_session_flow(ImageRunner(), flow_type)
    assert flow.workflow_class.supports_images
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    ref = await _reference()
    async with create_worker(client, [flow], store=store):
        assert await sessions.start(
            "images", initial_message="say images", initial_images=[ref, ref]
        )
        snap = await sessions.wait_for_idle("images")
    await store.close()
    assert [t.final_text for t in snap.turns] == ["said: images 2"]


async def test_a_claude_flow_without_a_media_store_refuses_images(
    client: Client, tmp_path: Path, flow_type: str
) -> None:
    from claude_agent_sdk import ClaudeAgentOptions

    from dex_agents.claude import (
        ClaudeAgentDefinition,
        create_claude_agent_session_flow,
    )

    with_store = create_claude_agent_session_flow(
        ClaudeAgentDefinition(
            options=ClaudeAgentOptions(), media_store=InMemoryMediaStore()
        ),
        f"{flow_type}-media",
    )
    assert with_store.workflow_class.supports_images
    flow = create_claude_agent_session_flow(
        ClaudeAgentDefinition(options=ClaudeAgentOptions()), flow_type
    )
    assert not flow.workflow_class.supports_images
    store = SQLiteRuntimeStore(tmp_path / "runtime.sqlite")
    sessions = SessionClient(client, flow, store)
    async with create_worker(client, [flow], store=store):
        assert not await sessions.start(
            "claude-images", initial_message="", initial_images=[await _reference()]
        )
        snap = await sessions.snapshot("claude-images")
    await store.close()
    assert snap.turns == []
    assert snap.status == "idle"
