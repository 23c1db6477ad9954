"""Tool effects and policies: how a tool call runs, and whether it waits for a person."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, assert_never

from .._errors import InvalidArgumentError, shown

ToolEffect = Literal["read", "idempotent_write", "non_idempotent_write", "unclassified"]
"""What a call does to the world; it decides the Step a deferred call runs in."""

TOOL_EFFECTS: tuple[ToolEffect, ...] = (
    "read",
    "idempotent_write",
    "non_idempotent_write",
    "unclassified",
)


def check_effect(argument: str, value: object, *, owner: str) -> None:
    """Refuse `value` of option `argument` (of `owner`) unless it is a `ToolEffect`.

    Raises:
        InvalidArgumentError: `value` is not one of `TOOL_EFFECTS`.
    """
    if not isinstance(value, str) or value not in TOOL_EFFECTS:
        raise InvalidArgumentError(
            argument,
            f"`{owner}.{argument}` must be a tool effect, got {shown(value)}; use "
            f"one of {', '.join(repr(e) for e in TOOL_EFFECTS)}",
        )


def _check_flag(argument: str, value: object) -> None:
    """Refuse a `ToolPolicy` flag that is not a bool ("no" would count as True).

    Raises:
        InvalidArgumentError: `value` is not True or False.
    """
    if not isinstance(value, bool):
        raise InvalidArgumentError(
            argument,
            f"`ToolPolicy.{argument}` must be True or False, got {shown(value)} "
            f"(any non-empty value would count as True); use {argument}=True to "
            "make every call wait for approval, or leave it False",
        )


ToolStep = Literal["call_tool", "call_single_attempt_tool"]
"""`call_tool` retries (same idempotency key); `call_single_attempt_tool` never does."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolPolicy:
    """How calls of one tool are treated.

    `non_idempotent_write` and `unclassified` always wait for approval;
    `requires_approval=True` adds approval to the others.
    """

    effect: ToolEffect
    requires_approval: bool = False

    def __post_init__(self) -> None:
        check_effect("effect", self.effect, owner="ToolPolicy")
        _check_flag("requires_approval", self.requires_approval)

    @property
    def needs_approval(self) -> bool:
        """Whether a call waits in AwaitToolApproval before it runs."""
        return self.requires_approval or self.effect in (
            "non_idempotent_write",
            "unclassified",
        )

    @property
    def step(self) -> ToolStep:
        """The Step that runs a deferred call of this tool."""
        match self.effect:
            case "read" | "idempotent_write":
                return "call_tool"
            case "non_idempotent_write" | "unclassified":
                return "call_single_attempt_tool"
            case _:
                assert_never(self.effect)


def resolve_policy(
    tool_name: str,
    policies: dict[str, ToolPolicy],
    default_effect: ToolEffect = "unclassified",
) -> ToolPolicy:
    """The policy of `tool_name`: its own entry, else the session's default effect."""
    policy = policies.get(tool_name)
    return policy if policy is not None else ToolPolicy(effect=default_effect)


def idempotency_key(flow_id: str, turn_id: str, tool_call_id: str) -> str:
    """The key a write passes to its provider, the same on every attempt of the call."""
    return f"{flow_id}/{turn_id}/{tool_call_id}"
