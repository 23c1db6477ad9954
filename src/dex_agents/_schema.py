"""A tool input checked against its JSON Schema, with the field at fault named."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ._errors import InvalidEditError
from .session._json import JsonObject


def schema_problem(
    schema: Mapping[str, Any], arguments: JsonObject, tool_name: str
) -> InvalidEditError | None:
    """Why `arguments` do not fit `schema`, naming the field; None when they fit."""
    import jsonschema  # with the `claude` extra; only edits of a schema'd tool need it
    import jsonschema.exceptions

    validator = jsonschema.Draft202012Validator(dict(schema))
    # typeshed leaves best_match's return unannotated (it is the best error or None)
    # and one iter_errors overload's parameter untyped.
    error = cast(
        "jsonschema.exceptions.ValidationError | None",
        jsonschema.exceptions.best_match(  # pyright: ignore[reportUnknownMemberType]
            validator.iter_errors(dict(arguments))  # pyright: ignore[reportUnknownMemberType]
        ),
    )
    if error is None:
        return None
    field = _field(error.absolute_path)
    required: object = error.validator_value
    if error.validator == "required" and isinstance(required, list):
        # isinstance leaves the item types unknown; JSON values are all we need.
        instance: object = error.instance
        present: Mapping[object, object] = (
            cast("Mapping[object, object]", instance)
            if isinstance(instance, Mapping)
            else {}
        )
        names = cast("list[object]", required)
        missing = [str(n) for n in names if n not in present]
        if missing:
            field = ".".join(filter(None, [field, missing[0]]))
    where = f"field `{field}`" if field else "the input"
    return InvalidEditError(
        field,
        f"the edited input of {tool_name} does not fit its schema: {where}: "
        f"{error.message}; fix it and approve again, approve without an edit, or reject",
    )


def _field(path: Sequence[Any]) -> str:
    """A JSON path as people write it: `items[0].sku`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out
