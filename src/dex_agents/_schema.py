"""A tool input checked against its JSON Schema, with the field at fault named."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ._errors import InvalidEditError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator


def compiled_validator(schema: Mapping[str, Any]) -> Validator:
    """A validator for `schema` (2020-12 unless its `$schema` says), built once.

    Checking a schema against its metaschema and building its validator costs
    about 0.6 ms; validating an input with the built one, about 10 µs. Every
    custom tool call is validated, so the validator is kept per distinct schema
    (validators hold no state between calls).

    Raises:
        jsonschema.SchemaError: `schema` is not a valid JSON Schema.
    """
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not JSON: build it each time
        return _build(schema)
    validator = _VALIDATORS.get(key)
    if validator is None:
        validator = _build(schema)
        if len(_VALIDATORS) >= _MAX_VALIDATORS:
            del _VALIDATORS[next(iter(_VALIDATORS))]  # the oldest
        _VALIDATORS[key] = validator
    return validator


_VALIDATORS: dict[str, Validator] = {}
_MAX_VALIDATORS = 512


def _build(schema: Mapping[str, Any]) -> Validator:
    import jsonschema  # with the `claude` extra; only schema'd tools need it
    from jsonschema.validators import validator_for

    schema = dict(schema)
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def schema_problem(
    schema: Mapping[str, Any], arguments: Mapping[str, Any], tool_name: str
) -> InvalidEditError | None:
    """Why `arguments` do not fit `schema`, naming the field; None when they fit."""
    import jsonschema.exceptions

    try:
        validator = compiled_validator(schema)
    except jsonschema.exceptions.SchemaError as e:
        return InvalidEditError(
            "",
            f"{tool_name}'s input schema is invalid ({e.message}), so no edit can "
            "be checked against it; approve without an edit, or reject",
        )
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
