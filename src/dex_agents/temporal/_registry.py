"""The flows of this process, by workflow class name, shared with every sandbox.

A session's workflow class is made per flow at run time. Temporal's sandbox
loads a workflow class with `from <module> import <class name>` in a fresh copy
of its module, where a class made at run time does not exist; that module's
`__getattr__` rebuilds it from the spec kept here. The plugin passes this
module through the sandbox, so every sandbox sees the one dict the host filled.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ..session import AgentSessionOptions

_numbers = itertools.count(1)


@dataclass(frozen=True, kw_only=True, eq=False)
class FlowSpec:
    """What the workflow code of one flow needs besides the code itself."""

    flow_type: str
    options: AgentSessionOptions
    supports_images: bool
    class_name: str
    sandboxed: bool
    failure_exception_types: tuple[type[BaseException], ...]


SPECS: dict[str, FlowSpec] = {}
"""Specs by class name (process-unique; only the workflow type name is persisted)."""


def register(
    flow_type: str,
    options: AgentSessionOptions,
    *,
    supports_images: bool,
    sandboxed: bool,
    failure_exception_types: Sequence[type[BaseException]],
) -> FlowSpec:
    """Keep the spec of a new workflow class under a name no other class has."""
    safe = "".join(c if c.isalnum() else "_" for c in flow_type)
    spec = FlowSpec(
        flow_type=flow_type,
        options=options,
        supports_images=supports_images,
        class_name=f"AgentSessionWorkflow_{safe}_{next(_numbers)}",
        sandboxed=sandboxed,
        failure_exception_types=tuple(failure_exception_types),
    )
    SPECS[spec.class_name] = spec
    return spec
