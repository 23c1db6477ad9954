"""A session flow: a runner, its options, and the workflow type that serves them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._errors import UserError, must_be
from ..session import AgentFrameworkRunner, AgentSessionOptions
from ..session._runner import image_message_builder
from ._workflow import ActivityNames, AgentSessionWorkflow, define_workflow_class

_FLOW_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,99}$")
_DEFAULT_OPTIONS = AgentSessionOptions()


@dataclass(frozen=True, kw_only=True, eq=False)
class AgentSessionFlow:
    """Everything a worker and a client need to serve and reach one kind of session.

    `flow_type` is the Temporal workflow type name: a persisted contract, so
    renaming it orphans existing sessions.
    """

    flow_type: str
    runner: AgentFrameworkRunner
    options: AgentSessionOptions
    workflow_class: type[AgentSessionWorkflow]
    task_queue: str

    @property
    def activity_names(self) -> ActivityNames:
        """The Step names registered for this flow."""
        return self.workflow_class.names


_RUNNER_METHODS = ("build_user_message", "run_model", "validate_session_options")
"""What every `AgentFrameworkRunner` has and every turn uses (the others are
needed only by a turn that asks for them)."""


def _check_runner(runner: object) -> None:
    """Refuse a `runner` that is not an `AgentFrameworkRunner`.

    A Claude agent definition passed here failed with an AttributeError on
    `validate_session_options`; it has its own builder.

    Raises:
        InvalidArgumentError: what `runner` is, and what to call or pass instead.
    """
    missing = [m for m in _RUNNER_METHODS if not callable(getattr(runner, m, None))]
    if not missing:
        return
    if type(runner).__name__ == "ClaudeAgentDefinition":
        fix = (
            "a Claude agent definition builds its flow with "
            "`create_claude_agent_session_flow(agent, flow_type)` (dex_agents.claude)"
        )
    else:
        fix = (
            f"it has no {', '.join(f'`{m}`' for m in missing)}; pass a runner such as "
            "`ClaudeAgentRunner`, or build a Claude agent's flow with "
            "`create_claude_agent_session_flow`"
        )
    raise must_be("runner", "an `AgentFrameworkRunner`", runner, fix)


def create_agent_session_flow(
    runner: AgentFrameworkRunner,
    flow_type: str,
    options: AgentSessionOptions = _DEFAULT_OPTIONS,
    *,
    task_queue: str | None = None,
) -> AgentSessionFlow:
    """Build the session flow of `runner` under the workflow type `flow_type`.

    `options` defaults to `AgentSessionOptions()`, a new one for each flow.

    Raises:
        InvalidArgumentError: `runner` is not a runner (a `ClaudeAgentDefinition`
            builds its flow with `create_claude_agent_session_flow`).
        UserError: for a malformed flow type, or options the runner cannot honor
            (such as a compaction policy for a runner that cannot compact).
    """
    _check_runner(runner)
    if not isinstance(flow_type, str) or not _FLOW_TYPE.match(flow_type):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(
            f"flow type {flow_type!r} must be a string that starts with a letter and "
            "contains only letters, digits, `_`, `.` or `-` (at most 100 characters)"
        )
    if options is _DEFAULT_OPTIONS or options is None:  # pyright: ignore[reportUnnecessaryComparison] - None: from untyped code
        options = AgentSessionOptions()  # so no two flows share one policy dict
    if not isinstance(options, AgentSessionOptions):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(
            f"session options must be an `AgentSessionOptions`, got "
            f"{type(options).__name__} {options!r:.80}; build one, e.g. "
            "AgentSessionOptions(spend_limit=5.0)"
        )
    if task_queue is not None and (not isinstance(task_queue, str) or not task_queue):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise UserError(
            f"`task_queue` must be a non-empty string or None, got {task_queue!r}"
        )
    runner.validate_session_options(compaction=options.compaction)
    return AgentSessionFlow(
        flow_type=flow_type,
        runner=runner,
        options=options,
        workflow_class=define_workflow_class(
            flow_type,
            options,
            supports_images=image_message_builder(runner) is not None,
        ),
        task_queue=task_queue or flow_type,
    )
