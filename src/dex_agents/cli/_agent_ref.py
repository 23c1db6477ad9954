"""`--agent module:attr`: the flow reference of `dev`, `worker`, `chat` and `serve`.

The loading lives in `dex_agents.temporal._flow_ref` (worker subprocesses use it
too); here a bad reference becomes the command line's usage error (exit code 2).
"""

from __future__ import annotations

import os

from .._errors import InvalidArgumentError
from ..temporal._flow import AgentSessionFlow
from ..temporal._flow_ref import load_flow as _load_flow
from ._errors import DEBUG_ENV, BadArgumentError, one_line


def load_flow(ref: str) -> AgentSessionFlow:
    """Import `ref` and return its flow.

    Raises:
        BadArgumentError: the reference is malformed, its module or
            attribute is missing, importing it failed, it is not a flow, or
            the function it names raised building one.
    """
    try:
        return _load_flow(ref)
    except InvalidArgumentError as err:
        raise BadArgumentError(err.message) from err
    except Exception as err:
        # A factory (`module:make`) that raised: a missing environment variable
        # (KeyError), a definition it refuses (UserError). The commands call
        # this before their error translation, so it escaped as a traceback.
        if os.environ.get(DEBUG_ENV):
            raise
        raise BadArgumentError(
            f"bad `--agent {ref}`: building its flow raised {type(err).__name__}: "
            f"{one_line(str(err)) if str(err).strip() else '(no message)'}; fix what "
            f"it says (set {DEBUG_ENV}=1 to see the traceback)"
        ) from err
