"""`--agent module:attr`: the flow reference of `dev`, `worker`, `chat` and `serve`.

The loading lives in `dex_agents.temporal._flow_ref` (worker subprocesses use it
too); here a bad reference becomes the command line's usage error (exit code 2).
"""

from __future__ import annotations

from .._errors import InvalidArgumentError
from ..temporal._flow import AgentSessionFlow
from ..temporal._flow_ref import load_flow as _load_flow
from ._errors import BadArgumentError


def load_flow(ref: str) -> AgentSessionFlow:
    """Import `ref` and return its flow.

    Raises:
        BadArgumentError: the reference is malformed, its module or
            attribute is missing, importing it failed, or it is not a flow.
    """
    try:
        return _load_flow(ref)
    except InvalidArgumentError as err:
        raise BadArgumentError(err.message) from err
