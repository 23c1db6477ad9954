"""Rules every runtime store applies the same way, shared so they cannot drift."""

from __future__ import annotations

from .._errors import UserError
from ..session import JsonObject


def snapshot_version(snapshot: JsonObject) -> int:
    """The `version` of a snapshot projection; a missing one counts as 0."""
    version = snapshot.get("version", 0)
    # bool is an int subclass, but `True` as a version is a bug, not version 1.
    if not isinstance(version, int) or isinstance(version, bool):
        raise UserError(
            f"snapshot `version` must be an int, got {version!r}; "
            "publish the snapshot's integer version counter"
        )
    return version


def order_chain(
    session_id: str, head_id: str, parents: dict[str, str | None]
) -> list[str]:
    """Segment IDs from the root to `head_id`, following `parents`.

    Raises:
        KeyError: A segment on the chain was never written.
        ValueError: The chain loops, which only corrupt parent links can cause.
    """
    order: list[str] = []
    seen: set[str] = set()
    current: str | None = head_id
    while current is not None:
        if current not in parents:
            raise KeyError(f"session {session_id!r} has no segment {current!r}")
        if current in seen:
            raise ValueError(
                f"the segment chain of session {session_id!r} loops at {current!r}"
            )
        seen.add(current)
        order.append(current)
        current = parents[current]
    order.reverse()
    return order
