"""The fake Claude CLI's session transcript: a JSONL file, mirrored to the SDK.

Like CLI 2.1.327, the fake appends every entry to
`$CLAUDE_CONFIG_DIR/projects/<project key>/<session id>.jsonl` and, with
`--session-mirror`, sends it as a `transcript_mirror` frame `{filePath, entries}`,
which the SDK appends to its `SessionStore`. Conversation entries (`user`,
`assistant`, `attachment`) carry `uuid` and `parentUuid` and form a chain; other
entries (`queue-operation`, `last-prompt`, `mode`, `cost-state`) do not. A
resumed process reads the file the SDK materialized from the store and walks the
chain back from its last entry to rebuild what the model sees.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, cast

from pydantic import JsonValue

from ._fake_cli_args import JsonObject
from ._fake_cli_usage import CLI_VERSION
from ._fake_cli_wire import Wire

CONTINUE_TEXT = "Continue from where you left off."
"""The isMeta prompt CLI 2.1.327 appends after resuming a deferred call."""

_CHAIN_TYPES = frozenset({"user", "assistant", "attachment", "system"})
_SANITIZE = re.compile(r"[^a-zA-Z0-9]")
_MAX_SANITIZED = 200


def project_key(directory: str) -> str:
    """The project directory name for `directory`, as the CLI and the SDK derive it.

    Copied from claude-agent-sdk 0.2.184 `project_key_for_directory` rather than
    imported: importing `claude_agent_sdk` would add a second to every start.
    """
    try:
        path = unicodedata.normalize("NFC", os.path.realpath(directory))
    except OSError:
        path = unicodedata.normalize("NFC", directory)
    sanitized = _SANITIZE.sub("-", path)
    if len(sanitized) <= _MAX_SANITIZED:
        return sanitized
    return f"{sanitized[:_MAX_SANITIZED]}-{_simple_hash(path)}"


def _simple_hash(text: str) -> str:
    value = 0
    for char in text:
        value = ((value << 5) - value + ord(char)) & 0xFFFFFFFF
    if value >= 0x80000000:
        value -= 0x100000000
    value = abs(value)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while value:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
    return out or "0"


def now_iso() -> str:
    """A timestamp in the CLI's format, e.g. `2026-11-29T21:12:09.763Z`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def read_entries(path: Path) -> list[JsonObject]:
    """The entries of a JSONL transcript; unreadable lines are skipped."""
    entries: list[JsonObject] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry: JsonValue = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


@dataclass(kw_only=True, slots=True)
class ViewMessage:
    """One message of the model's input, rebuilt from transcript entries."""

    role: Literal["user", "assistant"]
    content: list[JsonObject]
    is_prompt: bool = False
    """A real prompt: a user message that is neither tool results nor isMeta."""
    message_id: str | None = None


@dataclass(kw_only=True, slots=True)
class Transcript:
    """One transcript file: the main conversation or one subagent's."""

    path: Path
    session_id: str
    wire: Wire
    mirror: bool
    common: JsonObject
    """Fields every conversation entry carries (cwd, version, entrypoint...)."""
    entries: list[JsonObject] = field(default_factory=lambda: [])
    tail: str | None = None
    _unsent: list[JsonObject] = field(default_factory=lambda: [])

    def load(self, entries: list[JsonObject]) -> None:
        """Take the entries of a resumed session; new ones chain after them."""
        self.entries.extend(entries)
        self.tail = next(
            (
                str(e["uuid"])
                for e in reversed(self.entries)
                if e.get("type") in _CHAIN_TYPES and isinstance(e.get("uuid"), str)
            ),
            None,
        )

    def append(self, entry: JsonObject, *, parent: str | None = None) -> JsonObject:
        """Append a conversation entry after the tail, or after `parent`."""
        full: JsonObject = {
            "parentUuid": parent if parent is not None else self.tail,
            "isSidechain": False,
            **entry,
            "uuid": entry.get("uuid") or str(uuid.uuid4()),
            "timestamp": now_iso(),
            **self.common,
            "sessionId": self.session_id,
            "version": CLI_VERSION,
        }
        self.tail = str(full["uuid"])
        self._write(full)
        return full

    def append_plain(self, entry: JsonObject) -> None:
        """Append an entry outside the chain, such as `cost-state`."""
        self._write({**entry, "sessionId": self.session_id})

    def _write(self, entry: JsonObject) -> None:
        self.entries.append(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._unsent.append(entry)

    def flush(self) -> None:
        """Mirror the entries written since the last flush as one frame."""
        entries, self._unsent = self._unsent, []
        if self.mirror and entries:
            self.wire.send(
                {
                    "type": "transcript_mirror",
                    "filePath": str(self.path),
                    "entries": cast(JsonValue, entries),
                }
            )

    def by_uuid(self) -> dict[str, JsonObject]:
        """Every conversation entry by its uuid."""
        return {str(e["uuid"]): e for e in self.entries if "uuid" in e}

    def chain(self, leaf: str | None = None) -> list[JsonObject]:
        """The conversation entries from the root to `leaf` (default: the tail)."""
        index = self.by_uuid()
        chain: list[JsonObject] = []
        seen: set[str] = set()
        current = leaf if leaf is not None else self.tail
        while current is not None and current in index and current not in seen:
            seen.add(current)
            entry = index[current]
            chain.append(entry)
            parent = entry.get("parentUuid")
            current = parent if isinstance(parent, str) else None
        chain.reverse()
        return chain

    def view(self) -> list[ViewMessage]:
        """What the model sees: the chain's messages, attachments left out.

        Consecutive user entries merge into one message (tool results and the
        continuation text travel together, as in CLI 2.1.327's request), and so
        do the entries of one assistant API message (one per content block).
        """
        messages: list[ViewMessage] = []
        for entry in self.chain():
            message = entry.get("message")
            if entry.get("type") not in ("user", "assistant") or not isinstance(
                message, dict
            ):
                continue
            blocks = content_blocks(message.get("content"))
            if entry["type"] == "assistant":
                message_id = message.get("id")
                last = messages[-1] if messages else None
                if (
                    last is not None
                    and last.role == "assistant"
                    and last.message_id == message_id
                ):
                    last.content.extend(blocks)
                else:
                    messages.append(
                        ViewMessage(
                            role="assistant",
                            content=blocks,
                            message_id=str(message_id),
                        )
                    )
                continue
            is_prompt = entry.get("isMeta") is not True and not any(
                b.get("type") == "tool_result" for b in blocks
            )
            if messages and messages[-1].role == "user":
                messages[-1].content.extend(blocks)
                messages[-1].is_prompt |= is_prompt
            else:
                messages.append(
                    ViewMessage(role="user", content=blocks, is_prompt=is_prompt)
                )
        return messages

    def pending_deferral(self) -> JsonObject | None:
        """The last `hook_deferred_tool` attachment, unless its call has a result."""
        results = {
            str(b.get("tool_use_id"))
            for e in self.entries
            if e.get("type") == "user"
            for b in _entry_blocks(e)
            if b.get("type") == "tool_result"
        }
        for entry in reversed(self.entries):
            attachment = entry.get("attachment")
            if (
                entry.get("type") == "attachment"
                and isinstance(attachment, dict)
                and attachment.get("type") == "hook_deferred_tool"
            ):
                if str(attachment.get("toolUseID")) in results:
                    return None
                return entry
        return None

    def last_message(self) -> str | None:
        """The uuid of the last chain entry that is not an attachment.

        A resumed call's result hangs there, off the deferral attachments, and
        so after any result an earlier call of the same reply got (such as a
        refusal), which the model must still see.
        """
        index = self.by_uuid()
        current = self.tail
        while current is not None and current in index:
            entry = index[current]
            if entry.get("type") != "attachment":
                return current
            parent = entry.get("parentUuid")
            current = parent if isinstance(parent, str) else None
        return None

    def last_of_type(self, kind: str) -> JsonObject | None:
        """The last entry of type `kind`, such as `cost-state`."""
        return next((e for e in reversed(self.entries) if e.get("type") == kind), None)


def content_blocks(content: JsonValue) -> list[JsonObject]:
    """A message's content as blocks; a string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [cast(JsonObject, b) for b in content if isinstance(b, dict)]
    return []


def _entry_blocks(entry: JsonObject) -> Iterable[JsonObject]:
    message = entry.get("message")
    return content_blocks(message.get("content")) if isinstance(message, dict) else []


def text_of(blocks: Iterable[JsonObject]) -> str:
    """The text of a prompt or tool result: its text blocks, joined."""
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
