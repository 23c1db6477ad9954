"""The chat shows how each tool call ended, with the tool's own error, in a pseudo-terminal."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from dex_agents.temporal import EmbeddedEngine
from support.cli_harness import Term, spawn_chat

pytestmark = pytest.mark.usefixtures("no_dex_agents_settings")

RUN = uuid.uuid4().hex[:6]


async def test_the_chat_shows_a_failed_and_an_unknown_outcome_with_their_errors(
    engine: EmbeddedEngine,
    tmp_path: Path,
    flow_type: str,
    cli_worker: Term,
) -> None:
    chat = spawn_chat(
        engine, tmp_path, flow_type, f"chat-outcomes-{RUN}", "--agent", "agents:flow"
    )
    chat.expect("you › ")

    # A tool that raises on every attempt: each retry says why, then the outcome.
    chat.sendline('call send_email {"to": "a@b.c", "fail_attempts": 9}')
    chat.expect(
        re.escape(
            "attempt 1 failed, retrying: ConnectionError: mail server unavailable "
            "(attempt 1)"
        )
    )
    chat.expect(
        re.escape(
            "↳ outcome unknown: ConnectionError: mail server unavailable (attempt 3)"
        )
    )
    chat.expect("you › ")

    # A tool that reports an error: the chat shows the tool's message.
    chat.sendline('call create_refund {"orderId": "9", "invalid": true}')
    chat.expect(re.escape("approve or reject? [a/r]"))
    chat.sendline("a")
    chat.expect(re.escape("↳ failed: order 9 cannot be refunded"))
    chat.expect("you › ")
    chat.sendline("/quit")
    assert chat.wait_exit() == 0
