"""Strict checks of the session RPCs' arguments, at the client and in the validators.

A wrong argument is refused before anything happens: the client raises
`InvalidArgumentError` before any RPC or store write, and the workflow's
Update validators (for callers that bypass the client: `temporal workflow
update`, a client of their own) refuse the same values, which writes no
history. Strict means what Python means, not what a JSON decoder forgives: a
flag is a `bool` (not `"false"`, not `0`), an ID a non-empty `str`, and every
text valid Unicode (no lone surrogate, which no wire format can carry).

The converter decodes Update arguments leniently (pydantic's lax mode turns
`"false"` into False), and the workflow must keep decoding them so: an Update
accepted before replays with the same values. So the Update argument types
here note which flags arrived as something else than a JSON boolean, and the
validator refuses those; the handler still sees the lenient value, and a
replay (which runs no validator) decodes as it always did.

This module is pure: the workflow imports it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, cast

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from .._errors import InvalidArgumentError, is_positive_number, must_be, shown
from ..session._blob import BlobReference
from ..session._media import ImageReference
from ..session._pending import INLINE_TEXT_LIMIT
from ..session._state import REJECTION_MESSAGE_LIMIT
from ._models import (
    CancelTurnInput,
    EndSessionInput,
    ResolveInterruptInput,
    UserMessageInput,
)

MAX_INLINE_EDIT_BYTES = 4 * INLINE_TEXT_LIMIT
"""Bytes (JSON, UTF-8) of an edited input sent inside the Update; more travels by reference."""
MAX_ID_BYTES = 1000
"""The longest session or interrupt ID, in UTF-8 bytes (Temporal's default for IDs)."""
MAX_COUNT = 2**63 - 1
"""The largest count or cursor: the largest integer a store (SQLite, PostgreSQL) keeps."""
INVALID_ARGUMENT = "InvalidArgument"
"""The failure type of a validator's refusal of an argument; its detail names it."""


def _unicode_problem(argument: str, value: str) -> InvalidArgumentError | None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        return InvalidArgumentError(
            argument,
            f"`{argument}` is not valid Unicode: it holds the lone surrogate "
            f"{value[err.start]!r} at index {err.start}, which UTF-8 cannot encode; "
            "pass text without it (decode bytes with `errors='replace'`)",
        )
    return None


def check_id(argument: str, value: object, *, what: str) -> str:
    """`value` if it is a usable ID: a non-empty, valid `str` of at most `MAX_ID_BYTES`.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, str) or not value:
        raise must_be(argument, f"a non-empty string ({what})", value)
    problem = _unicode_problem(argument, value)
    if problem is not None:
        raise problem
    size = len(value.encode())
    if size > MAX_ID_BYTES:
        raise InvalidArgumentError(
            argument,
            f"`{argument}` is {size:,} bytes long, over the limit of {MAX_ID_BYTES} "
            f"bytes for an ID; pass {what}",
        )
    return value


def check_session_id(value: object) -> str:
    """See `check_id`."""
    return check_id(
        "session_id", value, what="the ID the session was started with, a `str`"
    )


def check_text(argument: str, value: object, *, optional: bool = False) -> None:
    """Refuse a text that is not a valid `str` (or None, when `optional`).

    Raises:
        InvalidArgumentError: it is not.
    """
    if value is None and optional:
        return
    if not isinstance(value, str):
        none = " or None" if optional else ""
        raise must_be(argument, f"a string{none}", value)
    problem = _unicode_problem(argument, value)
    if problem is not None:
        raise problem


def check_flag(argument: str, value: object) -> bool:
    """`value` if it is a `bool`: not a string, a number or None.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, bool):
        raise must_be(
            argument,
            "True or False (a bool)",
            value,
            "pass a bool: a string such as 'false' or a number is not read as one",
        )
    return value


def check_count(argument: str, value: object, *, minimum: int) -> int:
    """`value` if it is an `int` (not a bool) from `minimum` to `MAX_COUNT`.

    Raises:
        InvalidArgumentError: it is not.
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise must_be(argument, f"a whole number of at least {minimum} (an int)", value)
    if value > MAX_COUNT:
        raise must_be(
            argument,
            f"at most 2**63 - 1 ({MAX_COUNT:,}), the largest whole number a store "
            "keeps",
            value,
        )
    return value


def check_timeout(value: object, *, never_recorded: str = "") -> None:
    """Refuse a `timeout=` that is not None, a `timedelta` or seconds (a finite number ≥ 0).

    `never_recorded` names a request that applies only if a worker takes it
    while the caller waits (a cancel, an end, an edited approval): for it a
    timeout of 0 could only ever fail, so it is refused instead.

    Raises:
        InvalidArgumentError: it is none of them, or 0 for such a request.
    """
    if value is None:
        return
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
    else:
        raise must_be(
            "timeout",
            "seconds (an int or float), a timedelta, or None to wait as long as it "
            "takes",
            value,
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise must_be(
            "timeout",
            "a finite number of seconds, at least 0",
            value,
            "pass None to wait as long as it takes",
        )
    if never_recorded and seconds == 0:
        raise must_be(
            "timeout",
            f"more than 0 for {never_recorded}",
            value,
            f"{never_recorded} is never recorded for later, so it applies only if a "
            "worker takes it while you wait: pass timeout=10, or None to wait as "
            "long as it takes",
        )


def check_images(argument: str, value: object) -> None:
    """Refuse images that are not a sequence of `ImageReference` (or None).

    Raises:
        InvalidArgumentError: they are not.
    """
    if value is None:
        return
    if not isinstance(value, Sequence) or isinstance(value, str | bytes | bytearray):
        raise must_be(
            argument,
            "a list of `ImageReference` (from `MediaStore.put_image`) or None",
            value,
        )
    # isinstance leaves the item type unknown; each item is checked below.
    for index, image in enumerate(cast(Sequence[object], value)):
        if not isinstance(image, ImageReference):
            raise InvalidArgumentError(
                argument,
                f"`{argument}[{index}]` must be an `ImageReference` (from "
                f"`MediaStore.put_image`), got {shown(image)}",
            )


# ----- Update arguments ---------------------------------------------------------


def check_message_input(input: UserMessageInput) -> None:
    """Refuse a message whose fields are not what the client sends.

    Raises:
        InvalidArgumentError: a field has the wrong type or is not valid Unicode.
    """
    check_text("text", input.text)
    check_images("images", input.images)
    if input.text_ref is not None and not isinstance(  # pyright: ignore[reportUnnecessaryIsInstance]
        input.text_ref, BlobReference
    ):
        raise must_be("text_ref", "a blob reference or None", input.text_ref)


def check_resolution_input(input: ResolveInterruptInput) -> None:
    """Refuse a resolution whose fields are not what the client sends.

    Raises:
        InvalidArgumentError: the interrupt ID is not a non-empty string,
            `approved` is not a bool, a text is not a valid string or None, or
            `rejection_message` is longer than `REJECTION_MESSAGE_LIMIT` characters.
    """
    check_id(
        "interrupt_id",
        input.interrupt_id,
        what="an interrupt's ID from the snapshot's `pending_interrupts`",
    )
    _check_decoded_flag(input, "approved")
    check_text("rejection_message", input.rejection_message, optional=True)
    if (
        input.rejection_message is not None
        and len(input.rejection_message) > REJECTION_MESSAGE_LIMIT
    ):
        raise InvalidArgumentError(
            "rejection_message",
            f"`rejection_message` is {len(input.rejection_message):,} characters "
            f"long, over the limit of {REJECTION_MESSAGE_LIMIT:,}; pass a shorter "
            "one: the model reads it as why the call was refused, and the session "
            "keeps it in its state",
        )
    check_text("resolved_by", input.resolved_by, optional=True)
    check_edit(input)
    # `object`: the decoded payload may hold anything, which is what is checked.
    limit = cast(object, input.new_spend_limit)
    if limit is not None and not is_positive_number(limit):
        raise must_be(
            "new_spend_limit",
            "a positive, finite number of USD (an int or float)",
            limit,
        )


def check_edit(input: ResolveInterruptInput) -> None:
    """Refuse an edited input that is not a JSON object, or that is not an approval.

    Raises:
        InvalidArgumentError: `edited_input` is not a JSON object of valid text,
            is too long to send inline, comes with `edited_input_ref` or with a
            rejection.
    """
    if input.edited_input_ref is not None and not isinstance(  # pyright: ignore[reportUnnecessaryIsInstance]
        input.edited_input_ref, BlobReference
    ):
        raise must_be(
            "edited_input_ref", "a blob reference or None", input.edited_input_ref
        )
    if input.edited_input is None:
        return
    if input.edited_input_ref is not None:
        raise InvalidArgumentError(
            "edited_input",
            "pass `edited_input` or `edited_input_ref`, not both",
        )
    check_json_object("edited_input", input.edited_input)
    if input.approved is not True:
        raise InvalidArgumentError(
            "edited_input",
            "`edited_input` approves the call with an edited input; pass "
            "approved=True with it, or reject without it",
        )
    size = len(json.dumps(input.edited_input, ensure_ascii=False).encode())
    if size > MAX_INLINE_EDIT_BYTES:
        raise InvalidArgumentError(
            "edited_input",
            f"`edited_input` of {size:,} bytes must travel by reference (more than "
            f"{MAX_INLINE_EDIT_BYTES:,} bytes inline); resolve with "
            "`SessionClient.resolve_interrupt`, which stores it first",
        )


def check_json_object(argument: str, value: object) -> None:
    """Refuse a value that is not a JSON object: `str` keys, JSON values, valid text.

    Raises:
        InvalidArgumentError: it is not, naming where inside it.
    """
    if not isinstance(value, Mapping):
        raise must_be(argument, "a JSON object (a dict with str keys)", value)
    _check_json(argument, argument, cast(Mapping[object, object], value), depth=0)


_MAX_JSON_DEPTH = 100


def _check_json(argument: str, where: str, value: object, *, depth: int) -> None:
    if depth > _MAX_JSON_DEPTH:
        raise InvalidArgumentError(
            argument,
            f"`{where}` nests deeper than {_MAX_JSON_DEPTH} levels; pass a flatter value",
        )
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgumentError(
                argument, f"`{where}` is {value!r}, which JSON cannot carry"
            )
        return
    if isinstance(value, str):
        problem = _unicode_problem(where, value)
        if problem is not None:
            raise InvalidArgumentError(argument, problem.message)
        return
    if isinstance(value, Mapping):
        # isinstance leaves the key and item types unknown; each is checked below.
        items = cast(Mapping[object, object], value)
        for key, item in items.items():
            if not isinstance(key, str):
                raise InvalidArgumentError(
                    argument,
                    f"`{where}` has the key {shown(key)}; JSON object keys are strings",
                )
            _check_json(argument, f"{where}[{key!r}]", key, depth=depth + 1)
            _check_json(argument, f"{where}[{key!r}]", item, depth=depth + 1)
        return
    if isinstance(value, list | tuple):
        sequence = cast(Sequence[object], value)
        for index, item in enumerate(sequence):
            _check_json(argument, f"{where}[{index}]", item, depth=depth + 1)
        return
    raise InvalidArgumentError(
        argument,
        f"`{where}` is {shown(value)}, which is not a JSON value (use str, int, "
        "float, bool, None, list or dict)",
    )


def check_cancel_input(input: CancelTurnInput) -> None:
    """Refuse a cancel whose fields are not what the client sends.

    Raises:
        InvalidArgumentError: `reason` or `cancelled_by` is not a valid string.
    """
    check_text("reason", input.reason)
    check_text("cancelled_by", input.cancelled_by, optional=True)


def check_end_input(input: EndSessionInput) -> None:
    """Refuse an end whose fields are not what the client sends.

    Raises:
        InvalidArgumentError: `reason` is not a valid string, or `force` not a bool.
    """
    check_text("reason", input.reason)
    _check_decoded_flag(input, "force")


def _check_decoded_flag(input: object, argument: str) -> None:
    coerced: dict[str, object] = dict(getattr(input, "coerced", ()))
    if argument in coerced:
        raise InvalidArgumentError(
            argument,
            f"`{argument}` must be a JSON boolean (true or false), got "
            f"{coerced[argument]}; send true or false, not a string or a number",
        )
    check_flag(argument, getattr(input, argument))


def _note_coerced(flags: tuple[str, ...]) -> Any:
    """A pydantic before-validator: note each of `flags` that is not a real bool."""

    def note(raw: Any) -> Any:
        if not isinstance(raw, Mapping):
            return raw
        fields: Mapping[str, Any] = raw  # pyright: ignore[reportUnknownVariableType]
        coerced = tuple(
            (name, shown(fields[name]))
            for name in flags
            if name in fields and not isinstance(fields[name], bool)
        )
        return {**fields, "coerced": coerced}

    return note


@dataclass(frozen=True, kw_only=True)
class _NotesCoerced:
    """An Update argument as the Update decodes it: lenient, with what it forgave.

    A subclass lists in `_FLAGS` the flags whose coercion it notes, and comes
    before the input it decodes among its bases, so `coerced` is its last field.
    """

    _FLAGS: ClassVar[tuple[str, ...]] = ()
    coerced: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Flags that arrived as another JSON type than a boolean, with what they were."""

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        """The dataclass's own schema, after a note of the flags it coerces."""
        return core_schema.no_info_before_validator_function(
            _note_coerced(cls._FLAGS), handler(source)
        )


@dataclass(frozen=True, kw_only=True)
class ResolveInterruptUpdate(_NotesCoerced, ResolveInterruptInput):
    """`ResolveInterruptInput` as the Update decodes it: lenient, with what it forgave."""

    _FLAGS = ("approved",)


@dataclass(frozen=True, kw_only=True)
class EndSessionUpdate(_NotesCoerced, EndSessionInput):
    """`EndSessionInput` as the Update decodes it: lenient, with what it forgave."""

    _FLAGS = ("force",)
