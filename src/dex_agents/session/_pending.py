"""What a session holds before a model reads it: user prompts and turn-failure notes.

These are the items the workflow keeps (and carries through continue-as-new)
until a turn's transcript takes them in. They are typed and bounded: a user
message longer than `INLINE_TEXT_LIMIT` bytes lives in the runtime store as a
blob and the item keeps only a reference and a short preview, so what the
workflow holds, sends and receives never grows with what a user pastes.
Runners still get the whole text: the RunModel Step resolves the reference and
builds the runner's own stored item from it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import Field

from ._blob import PREVIEW_CHARS, BlobReference, preview
from ._json import JsonObject
from ._media import ImageReference
from ._records import ToolRecord

INLINE_TEXT_LIMIT = 2048
"""Bytes (UTF-8) of a user message kept in the workflow; longer text travels by reference."""

MAX_USER_MESSAGE_BYTES = 32 * 1024 * 1024
"""The largest user message (UTF-8 bytes) a session accepts: 32 MiB."""

MAX_QUEUED_MESSAGES = 100
"""User messages that may wait for a turn at once; more are refused until it answers."""

KEEP_FAILURE_NOTES = 3
"""Failure notes `pending` keeps whole, the newest; older ones collapse into one line."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UserPrompt:
    """A user message waiting for (or being sent by) a turn."""

    kind: Literal["user_prompt"] = "user_prompt"
    text: str = ""
    """The whole text, or a preview of it when `text_ref` is set."""
    text_ref: BlobReference | None = None
    """Where the whole text lives when it is longer than `INLINE_TEXT_LIMIT` bytes."""
    images: tuple[ImageReference, ...] = ()
    """Media store references sent after the text, in this order."""

    @property
    def preview(self) -> str:
        """A short form for snapshots and listings."""
        return preview(self.text, PREVIEW_CHARS)


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnFailureNote:
    """What the next turn's model is told about a turn that failed for good."""

    kind: Literal["turn_failure_note"] = "turn_failure_note"
    turn_id: str
    text: str
    tool_calls: tuple[JsonObject, ...] = field(default_factory=tuple)
    """`{"tool_call_id", "tool_name", "status"}` of each deferred call that ran."""

    def to_item(self) -> JsonObject:
        """The stored item runners read (`{"kind": "turn_failure_note", ...}`)."""
        return {
            "kind": self.kind,
            "turn_id": self.turn_id,
            "text": self.text,
            "tool_calls": list(self.tool_calls),
        }


PendingItem = Annotated[UserPrompt | TurnFailureNote, Field(discriminator="kind")]
"""One item the next model segment sends, oldest first."""


def failure_note(
    turn_id: str, reason: str, records: Sequence[ToolRecord]
) -> TurnFailureNote:
    """The note for a turn whose RunModel failed for good.

    It lists the deferred calls that ran, so the next turn's model knows what
    already happened in the world. Outputs are cut to a preview: the note lives
    in workflow state until a turn completes.
    """
    lines = [f"The previous turn ({turn_id}) failed: {preview(reason, 1000)}"]
    if records:
        lines.append("These tool calls ran before it failed:")
        lines.extend(
            f"- {r.tool_name} {r.tool_call_id}: {r.status}"
            + (f" ({preview(r.output)})" if r.output else "")
            for r in records
        )
    else:
        lines.append("No tool call ran before it failed.")
    return TurnFailureNote(
        turn_id=turn_id,
        text="\n".join(lines),
        tool_calls=tuple(
            {
                "tool_call_id": r.tool_call_id,
                "tool_name": r.tool_name,
                "status": r.status,
            }
            for r in records
        ),
    )


_COLLAPSED = re.compile(r"(\d+) earlier turns? failed or (?:was|were) cancelled")
"""How the note that stands for older notes begins (see `collapse_notes`)."""


def collapse_notes(items: Sequence[PendingItem]) -> list[PendingItem]:
    """`items` with at most `KEEP_FAILURE_NOTES` failure notes whole, the newest.

    Only a completed turn takes notes out of `pending`, so turns that fail or
    are cancelled one after another would pile them up in the state and in
    every RunModel input. The older notes become one note, where the oldest
    was, saying how many turns failed or were cancelled before; the items
    between them (prompts) stay in order.
    """
    notes = [
        (i, item) for i, item in enumerate(items) if isinstance(item, TurnFailureNote)
    ]
    older = notes[:-KEEP_FAILURE_NOTES]
    if not older or (len(older) == 1 and _COLLAPSED.match(older[0][1].text)):
        return list(items)
    count = sum(_turns_in(note) for _, note in older)
    first, newest = older[0][0], older[-1][1]
    were = "turn failed or was" if count == 1 else "turns failed or were"
    collapsed = TurnFailureNote(
        turn_id=newest.turn_id,
        text=f"{count} earlier {were} cancelled; their notes were not kept, so "
        "check what their tool calls did before you repeat one.",
    )
    gone = {i for i, _ in older[1:]}
    return [
        collapsed if i == first else item
        for i, item in enumerate(items)
        if i not in gone
    ]


def _turns_in(note: TurnFailureNote) -> int:
    """How many failed or cancelled turns a note tells of: more for a collapsed one."""
    match = _COLLAPSED.match(note.text)
    return int(match[1]) if match else 1
