"""The Claude transcript in session storage, and the SessionStore that serves it.

The CLI keeps its conversation as JSONL transcript entries. The session stores
them as messages whose item is
`{"kind": "claude_transcript", "session_id": ..., "entries": [...]}`: each
assistant API message and each tool result is one message, and the other entries
(the CLI's copy of the prompt, attachments such as the deferral, the hidden
"Continue from where you left off.") ride along with the next message, or with
the last one at the end. The entries of all messages, in order, are the
transcript.

A segment hands the SDK a `ClaudeTranscriptStore`: `load` serves the committed
transcript plus the turn's entries so far (the SDK writes them to a temporary
`CLAUDE_CONFIG_DIR` that the CLI resumes from), and `append` collects what the
CLI mirrors during the segment.

`last-prompt` entries are never kept: each names the leaf a resume continues
from, and CLI 2.1.327 writes it after the result frame, so one from an earlier
segment would make a later resume skip every entry after it.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, cast

from claude_agent_sdk import SessionKey, SessionStoreEntry

from ..session import StoredMessage
from ..session._json import JsonObject

USER_PROMPT_ITEM_KIND = "user_prompt"
"""Stored item of a user message: `{"kind": "user_prompt", "text": ...}`."""
CLAUDE_TRANSCRIPT_ITEM_KIND = "claude_transcript"
"""Stored item of Claude transcript entries; see the module docstring."""

_DROPPED_ENTRY_TYPES = frozenset({"last-prompt"})
_SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)

_Key = tuple[str, str, str | None]


def kept_entries(entries: Iterable[JsonObject]) -> list[JsonObject]:
    """`entries` without the ones a resume must never see (`last-prompt`)."""
    return [e for e in entries if e.get("type") not in _DROPPED_ENTRY_TYPES]


class ClaudeTranscriptStore:
    """A `claude_agent_sdk.SessionStore` over one segment's view of the transcript.

    `committed` are the entries of the Claude session `session_id` that the
    segment continues from. They answer `load` of that session's main
    transcript under any project key, so a changed `cwd` still finds them.
    Everything else behaves as a plain in-memory store: appended entries are
    kept per key, in call order, and returned by `load` after the committed
    ones. The optional `SessionStore` methods are left out (the SDK probes for
    them): a segment only loads and mirrors one session.
    """

    def __init__(
        self, *, session_id: str | None = None, committed: Sequence[JsonObject] = ()
    ) -> None:
        self._session_id = session_id
        self._committed = list(committed)
        self._appended: dict[_Key, list[SessionStoreEntry]] = {}
        self._sealed = False

    @property
    def session_id(self) -> str | None:
        """The Claude session the segment continues (None: it starts a new one)."""
        return self._session_id

    def seal(self) -> None:
        """Keep no later entries: the segment was taken at its result.

        CLI 2.1.327 mirrors only `last-prompt`, `cost-state` (and on a resumed
        segment `mode`) after the result, as it shuts down. `last-prompt` is
        never kept; without a `cost-state` the next segment's CLI restores its
        cumulative cost from an earlier one, and its cost is measured against
        that same entry (`cumulative_cost`), so it stays right.
        """
        self._sealed = True

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Collect mirrored entries of `key`, in call order (none once sealed)."""
        if not entries or self._sealed:
            return
        self._appended.setdefault(_key(key), []).extend(entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The committed entries of the resumed session, then those appended."""
        appended = self._appended.get(_key(key))
        committed: list[SessionStoreEntry] = []
        if key["session_id"] == self._session_id and not key.get("subpath"):
            committed = cast(list[SessionStoreEntry], self._committed)
        if appended is None and not committed:
            return None
        return cast(
            list[SessionStoreEntry],
            kept_entries(cast(list[JsonObject], [*committed, *(appended or [])])),
        )

    async def rewrite_appended(
        self,
        rewrite: Callable[[Sequence[JsonObject]], Awaitable[list[JsonObject]]],
    ) -> None:
        """Replace every appended entry with `rewrite`'s output, such as image references.

        Call it once the CLI is done: entries appended after it stay as written.
        """
        for key, entries in self._appended.items():
            rewritten = await rewrite(cast(list[JsonObject], entries))
            self._appended[key] = cast(list[SessionStoreEntry], rewritten)

    def segment_entries(self, session_id: str) -> list[JsonObject]:
        """What the CLI mirrored this segment for `session_id`'s main transcript."""
        entries: list[JsonObject] = []
        for (_, sid, subpath), appended in self._appended.items():
            if sid == session_id and subpath is None:
                entries.extend(cast(list[JsonObject], appended))
        return kept_entries(entries)


def _key(key: SessionKey) -> _Key:
    return (key["project_key"], key["session_id"], key.get("subpath") or None)


def transcript_item(session_id: str, entries: Sequence[JsonObject]) -> JsonObject:
    """The stored item of one transcript message."""
    return {
        "kind": CLAUDE_TRANSCRIPT_ITEM_KIND,
        "session_id": session_id,
        "entries": list(entries),
    }


def last_session_id(messages: Iterable[StoredMessage]) -> str | None:
    """The Claude session ID of the newest transcript message, if any."""
    session_id: str | None = None
    for message in messages:
        if message.item.get("kind") == CLAUDE_TRANSCRIPT_ITEM_KIND:
            value = message.item.get("session_id")
            if isinstance(value, str):
                session_id = value
    return session_id


def transcript_entries(
    messages: Iterable[StoredMessage], session_id: str | None = None
) -> list[JsonObject]:
    """The transcript entries of `messages`, of one Claude session when given."""
    entries: list[JsonObject] = []
    for message in messages:
        item = message.item
        if item.get("kind") != CLAUDE_TRANSCRIPT_ITEM_KIND:
            continue
        if session_id is not None and item.get("session_id") != session_id:
            continue
        stored = item.get("entries")
        if isinstance(stored, list):
            entries.extend(e for e in stored if isinstance(e, dict))
    return kept_entries(entries)


def group_messages(
    session_id: str, entries: Sequence[JsonObject]
) -> list[StoredMessage]:
    """Split a turn's entries into stored messages; see the module docstring."""
    groups: list[tuple[str, list[JsonObject]]] = []
    riders: list[JsonObject] = []
    last_message_id: str | None = None
    for entry in kept_entries(entries):
        role = _message_role(entry)
        if role is None:
            riders.append(entry)
            continue
        message_id = _assistant_message_id(entry) if role == "assistant" else None
        if (
            message_id is not None
            and message_id == last_message_id
            and groups
            and groups[-1][0] == "assistant"
        ):
            # CLI 2.1.327 writes one assistant entry per content block; the
            # blocks of one API message stay one stored message.
            groups[-1][1].extend([*riders, entry])
        else:
            groups.append((role, [*riders, entry]))
        riders = []
        last_message_id = message_id
    if riders:
        if groups:
            groups[-1][1].extend(riders)
        else:
            groups.append(("assistant", riders))
    return [
        StoredMessage(
            role="tool" if role == "tool" else "assistant",
            text=_projection(role, group),
            item=transcript_item(session_id, group),
        )
        for role, group in groups
    ]


def _message_role(entry: JsonObject) -> str | None:
    kind = entry.get("type")
    if kind == "assistant":
        return "assistant"
    if kind == "user" and _tool_results(entry):
        return "tool"
    return None


def _content(entry: JsonObject) -> list[dict[str, Any]]:
    message = entry.get("message")
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict)]


def _tool_results(entry: JsonObject) -> list[dict[str, Any]]:
    return [b for b in _content(entry) if b.get("type") == "tool_result"]


def _assistant_message_id(entry: JsonObject) -> str | None:
    message = entry.get("message")
    if isinstance(message, dict):
        value = message.get("id")
        return value if isinstance(value, str) else None
    return None


def _projection(role: str, group: Sequence[JsonObject]) -> str:
    parts: list[str] = []
    for entry in group:
        if role == "assistant" and entry.get("type") == "assistant":
            parts.extend(
                str(b.get("text", ""))
                for b in _content(entry)
                if b.get("type") == "text"
            )
        elif role == "tool" and entry.get("type") == "user":
            parts.extend(tool_result_text(b) for b in _tool_results(entry))
    if role == "assistant":
        return without_system_reminders("".join(parts))
    return "\n".join(parts)


def tool_result_text(block: dict[str, Any]) -> str:
    """The text of a `tool_result` block, whose content is a string or blocks.

    Without the CLI's `<system-reminder>` blocks: they are the CLI's notes to
    the model, not the tool's output.
    """
    content = block.get("content")
    if isinstance(content, str):
        return without_system_reminders(content)
    if isinstance(content, list):
        # Transcript JSON: isinstance leaves the item types unknown.
        text = "".join(
            str(cast(dict[str, Any], b).get("text", ""))
            for b in cast(list[object], content)
            if isinstance(b, dict)
        )
        return without_system_reminders(text)
    return ""


def without_system_reminders(text: str) -> str:
    """`text` without the `<system-reminder>` blocks of the Claude Code CLI.

    The CLI adds them to what the model reads (prompts, tool results); a model
    that echoes one is quoting the CLI, so the text reported as the agent's or
    a tool's drops them. A text without one is returned unchanged; the stored
    transcript entries, which the CLI resumes from, always keep them. Never
    applied to a person's prompt.
    """
    if "<system-reminder>" not in text:
        return text
    return _SYSTEM_REMINDER.sub("", text).strip()
