"""JSON aliases: the one door through which untyped data enters."""

from __future__ import annotations

from pydantic import JsonValue

JsonObject = dict[str, JsonValue]
"""A JSON object: tool arguments, stored framework items, run state."""

__all__ = ["JsonObject", "JsonValue"]
