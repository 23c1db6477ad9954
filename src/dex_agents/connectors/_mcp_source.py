"""`MCPServerToolSource`: the tools of an MCP server, offered as a session tool source.

An MCP server (run over stdio, or reached over streamable HTTP) lists tools and
runs them. As a tool source it behaves like every other source:

- **Listing** happens in each RunModel attempt (`tools/list`), because a server's
  tools may change; a failing or slow listing raises, and the runner then offers
  none of the server's tools in that attempt.
- **Classification** comes from the tool's MCP annotations, by the rule custom
  tools follow: `readOnlyHint` is `read`; otherwise `idempotentHint` is
  `idempotent_write`; otherwise `non_idempotent_write`, whatever
  `destructiveHint` says (an additive write still writes twice when rerun). A
  custom tool without hints falls back to the session's default effect; an MCP
  tool without hints is a `non_idempotent_write`, because a source must decide,
  and "unknown" has to mean "waits for approval and runs at most once".
  Approval then follows `ToolPolicy`: a `non_idempotent_write` waits for it, a
  read or an idempotent write does not unless a policy asks. The MCP
  specification calls annotations hints that a client must not trust from an
  untrusted server, so `tool_policies` pins any tool's effect and approval
  instead, and a session policy can still add approval to any source tool.
- **Every call runs in its own tool Step** with the request `_meta` keys
  `dex/idempotencyKey`, `dex/stepExecutionId` and `dex/attempt`: every attempt
  of one call carries the same key, so a server that deduplicates by it turns a
  retried idempotent write into one write.
- **Failures** are told apart by what they prove. A result with `isError` is a
  failed record the model reads (`ToolExecutionError`); so is a connection that
  failed before `tools/call` was sent, or a protocol error saying the server
  refused the request itself (`METHOD_NOT_FOUND`, `INVALID_REQUEST`), because
  in both the tool certainly did not run. Any other failure after the request
  was sent (a transport error, a timeout, an internal server error, and
  `INVALID_PARAMS`, which a tool's own handler may return after a side effect)
  leaves the outcome of a write unknown: a `non_idempotent_write` (or an
  unclassified call) raises `SessionError(retryable=False)` and records
  `outcome_unknown`. For a read or an idempotent write, `INVALID_PARAMS` is a
  failed record the model reads, and any other failure propagates, so the Step
  retries under the same idempotency key.
- **Output** is the result's text, capped at 256 KiB of UTF-8 with a note of
  how much was cut, so a huge result cannot break the tool Step's result.

Each listing and each call opens its own connection (a process for stdio, an
HTTP session for streamable HTTP) and closes it afterwards. A session is
durable and its Steps run on whichever worker is free, possibly days apart, so
a connection held open between Steps could not be reused reliably anyway; one
connection per operation keeps no state to go stale, at the cost of a server
start or an HTTP handshake per call.

`mcp` and `jsonschema` come with the `claude` extra; they are imported when a
source first connects or validates, so `dex_agents.connectors` imports without
them.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from .._errors import SessionError, ToolExecutionError, UserError
from .._schema import compiled_validator
from ..session import ToolCall, ToolOutcome, ToolPolicy
from ..session._json import JsonObject
from ..session._policy import ToolEffect
from ..session._records import DeferredToolExecution
from ..session._tool_sources import (
    SourceCall,
    SourceCallRefused,
    SourceCallResult,
    SourceTool,
    ToolSourceContext,
    ToolStepOptions,
)

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, ContentBlock, RequestParamsMeta, Tool

logger = logging.getLogger(__name__)

MCP_IDEMPOTENCY_KEY_META = "dex/idempotencyKey"
"""The request `_meta` key of the call's idempotency key, the same on every attempt."""
MCP_STEP_EXECUTION_ID_META = "dex/stepExecutionId"
"""The request `_meta` key of the tool Step's execution ID."""
MCP_ATTEMPT_META = "dex/attempt"
"""The request `_meta` key of the tool Step's attempt, from 1."""

_MAX_OUTPUT_BYTES = 256 * 1024
"""The most UTF-8 bytes of a result's text the record keeps; the rest is cut.

A tool Step's result travels in workflow history, whose payloads are limited
(2 MB by default), so a larger result would fail the Step instead of recording.
The cut text ends with `[output truncated: N bytes more]`.
"""

_MAX_LIST_PAGES = 100
"""A server whose `tools/list` cursor never ends cannot hang a listing."""
_UNKNOWN_OUTCOME_EFFECTS: tuple[ToolEffect, ...] = (
    "non_idempotent_write",
    "unclassified",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class _StdioServer:
    """An MCP server that runs as a subprocess, speaking MCP on its stdin and stdout."""

    command: str
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | os.PathLike[str] | None


@dataclass(frozen=True, kw_only=True, slots=True)
class _HttpServer:
    """An MCP server reached over streamable HTTP."""

    url: str
    headers: Mapping[str, str]


def _server(
    server: str | Sequence[str | os.PathLike[str]],
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    headers: Mapping[str, str] | None,
) -> _StdioServer | _HttpServer:
    """How to reach `server`: a URL, or a command line; each with its own options."""
    if isinstance(server, str):
        if not server.lower().startswith(("http://", "https://")):
            raise UserError(
                f"MCP server {server!r} is neither an http(s) URL nor a command "
                'line; pass the URL ("https://example.com/mcp") or the command as '
                'a list (["python", "server.py"])'
            )
        if env or cwd is not None:
            raise UserError(
                f"`env=` and `cwd=` configure a server run as a command, not the URL "
                f"{server!r}; drop them (send credentials with `headers=`)"
            )
        return _HttpServer(url=server, headers=dict(headers or {}))
    command = _command_line(server)
    if command is None:
        raise UserError(
            f"an MCP server is a URL or a command line (a non-empty list of "
            f'non-empty strings, ["python", "server.py"]), not {server!r}; for a '
            "script's path, pass [sys.executable, str(path)]"
        )
    if headers:
        raise UserError(
            f"`headers=` are sent to a server reached by URL, not to the command "
            f"{command[0]!r}; drop them (give a command's secrets with `env=`)"
        )
    return _StdioServer(command=command[0], args=command[1:], env=env, cwd=cwd)


def _command_line(server: object) -> tuple[str, ...] | None:
    """`server` as an argv (paths as text), or None when it is not a command line."""
    if not isinstance(server, list | tuple):
        return None
    words: list[str] = []
    for word in cast("list[object] | tuple[object, ...]", server):
        if isinstance(word, os.PathLike):
            word = os.fspath(cast("os.PathLike[str]", word))
        if not isinstance(word, str) or not word:
            return None
        words.append(word)
    return tuple(words) or None


@dataclass(frozen=True, kw_only=True, slots=True)
class _ListedTool:
    tool: SourceTool
    policy: ToolPolicy
    effect_from: Literal["annotations", "policy"]


class MCPServerToolSource:
    """Offers the tools of one MCP server; their annotations decide effect and approval.

    Args:
        server: How to reach the server: its command line
            (`["python", "server.py"]`; a bare name is looked up on the `PATH`
            the server gets), run as a subprocess speaking MCP on its stdin and
            stdout, or the URL of its streamable HTTP endpoint
            (`"https://example.com/mcp"`).
        source_name: Unique among the agent's sources; interrupts and logs name it.
        env: For a command: variables set over the MCP SDK's safe default
            environment (`PATH`, `HOME`, ...). The worker's own environment is
            not inherited beyond those defaults, so a server sees only the
            secrets given to it here.
        cwd: For a command: its working directory; None keeps the worker's.
        headers: For a URL: sent with every request, such as `Authorization`.
            They live in the worker's configuration only, never in workflow
            history.
        declared_tool_names: The tools the server may offer. Empty (the default)
            makes the listing dynamic: the runner checks each attempt's listing
            for collisions instead of the agent's definition. When given, they
            are also the only tools offered: a source must never list a name it
            did not declare, so other tools the server lists are dropped.
        tool_policies: Effect and approval of named tools, instead of what their
            annotations say (annotations are a server's unverified hints).
        step_options: The tool Step's timeout and attempts for every tool.
        tool_step_options: Per-tool Step options, instead of `step_options`.
        request_timeout: Limit for each handshake and `tools/list` request.
        call_timeout: Limit for one `tools/call`; the tool Step's own timeout
            still applies. A timed-out write records outcome_unknown.

    Raises:
        UserError: `source_name` is empty, `server` is neither a URL nor a
            command line, an option does not fit the kind of server, or a
            policy names a tool that is not declared.
    """

    def __init__(
        self,
        server: str | Sequence[str | os.PathLike[str]],
        *,
        source_name: str,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        headers: Mapping[str, str] | None = None,
        declared_tool_names: Sequence[str] = (),
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        step_options: ToolStepOptions | None = None,
        tool_step_options: Mapping[str, ToolStepOptions] | None = None,
        request_timeout: timedelta = timedelta(seconds=30),
        call_timeout: timedelta = timedelta(minutes=10),
    ) -> None:
        if not source_name:
            raise UserError("`source_name` of an MCP tool source must not be empty")
        self._server = _server(server, env, cwd, headers)
        self._name = source_name
        self._declared = tuple(dict.fromkeys(declared_tool_names))
        self._policies = dict(tool_policies or {})
        self._step_options = step_options or ToolStepOptions()
        self._tool_step_options = dict(tool_step_options or {})
        if self._declared:
            unknown = sorted(
                (set(self._policies) | set(self._tool_step_options))
                - set(self._declared)
            )
            if unknown:
                raise UserError(
                    f"MCP tool source {source_name!r} configures {unknown!r}, which "
                    "are not in `declared_tool_names`; declare them or drop the entries"
                )
        self._request_timeout = request_timeout
        self._call_timeout = call_timeout
        self._listed: dict[str, _ListedTool] = {}

    @property
    def source_name(self) -> str:
        """The source's name, unique among an agent's sources."""
        return self._name

    @property
    def declared_tool_names(self) -> Sequence[str]:
        """The declared tools; empty for a dynamic listing."""
        return self._declared

    async def list_tools(self, context: ToolSourceContext) -> Sequence[SourceTool]:
        """Connect, list the server's tools (every page), and keep them for `build_call`.

        Raises:
            Exception: The server cannot be reached or answered with an error;
                the runner then offers none of its tools in this attempt.
        """
        del context  # The server decides what it offers; the attempt does not.
        tools: list[Tool] = []
        async with self._connect() as client:
            cursor: str | None = None
            for _ in range(_MAX_LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        listed: dict[str, _ListedTool] = {}
        for tool in tools:
            if self._declared and tool.name not in self._declared:
                continue
            listed[tool.name] = self._classify(tool)
        # Merged, not replaced: sessions on one worker share this source, and one
        # session's listing must not make `build_call` refuse a tool another
        # session's attempt offered. A tool keeps its latest schema and policy;
        # the runner itself denies a tool its attempt did not list.
        self._listed.update(listed)
        return [entry.tool for entry in listed.values()]

    def _classify(self, tool: Tool) -> _ListedTool:
        source_tool = SourceTool(
            name=tool.name,
            description=tool.description or tool.title or tool.name,
            input_schema=dict(tool.input_schema),
        )
        policy = self._policies.get(tool.name)
        if policy is not None:
            return _ListedTool(tool=source_tool, policy=policy, effect_from="policy")
        return _ListedTool(
            tool=source_tool,
            policy=ToolPolicy(effect=_annotation_effect(tool)),
            effect_from="annotations",
        )

    async def build_call(self, tool_name: str, arguments: JsonObject) -> SourceCall:
        """Check the input against the listed schema and classify the call.

        It uses the latest listing of the tool by this source (by any attempt
        of any session on this worker) and does no I/O.

        Raises:
            SourceCallRefused: The tool is not offered now, or the input does not
                fit its schema; the call never reaches the server.
        """
        entry = self._listed.get(tool_name)
        if entry is None:
            raise SourceCallRefused(
                f"MCP server {self._name!r} does not offer `{tool_name}` now"
            )
        problem = _schema_problem(entry.tool.input_schema, arguments)
        if problem is not None:
            raise SourceCallRefused(
                f"the input of `{tool_name}` does not fit its schema: {problem}"
            )
        policy = entry.policy
        return SourceCall(
            tool_name=tool_name,
            arguments=dict(arguments),
            policy=policy,
            reason=(
                f"{tool_name} is a {policy.effect.replace('_', ' ')} on MCP server "
                f"{self._name!r} and needs approval"
                if policy.needs_approval
                else ""
            ),
            metadata={"effect_from": entry.effect_from},
        )

    async def execute_deferred_tool_call(
        self, call: ToolCall, execution: DeferredToolExecution
    ) -> SourceCallResult:
        """Connect and run `tools/call`, with the idempotency key in the request `_meta`.

        Text content is the output. Other content is named, not passed on (the
        record holds text only): `[image image/png omitted]`. Structured content
        is the output when a result has no content blocks. Text beyond 256 KiB
        is cut, with a note of how much.

        Raises:
            ToolExecutionError: The result has `isError`, or the tool certainly
                did not run (no connection, or the server refused the request
                itself), or a read or idempotent write got `INVALID_PARAMS`.
            SessionError: A write whose outcome is unknown (not retryable).
        """
        meta: RequestParamsMeta = {
            MCP_IDEMPOTENCY_KEY_META: execution.idempotency_key,
            MCP_STEP_EXECUTION_ID_META: execution.step_execution_id,
            MCP_ATTEMPT_META: execution.attempt,
        }
        unknown_if_failed = call.policy.effect in _UNKNOWN_OUTCOME_EFFECTS
        connected = False
        outcome: CallToolResult | Exception | None = None
        try:
            async with self._connect() as client:
                connected = True
                try:
                    outcome = await client.call_tool(
                        call.tool_name,
                        dict(call.arguments),
                        read_timeout_seconds=self._call_timeout.total_seconds(),
                        meta=meta,
                    )
                except Exception as e:
                    outcome = e
        except Exception as e:
            if outcome is not None:
                # The call is over; a failure to close its connection changes nothing.
                logger.warning(
                    "closing MCP server %r after %s failed: %s",
                    self._name,
                    call.tool_name,
                    _describe(e),
                )
            elif connected:
                # The request may have been sent and the transport failed around
                # it: over streamable HTTP a server that dies mid-call ends the
                # call as a task group error. Classified like a failed call.
                outcome = _sole_error(e)
            elif unknown_if_failed:
                raise ToolExecutionError(
                    f"{call.tool_name} did not run: MCP server {self._name!r} "
                    f"could not be reached: {_describe(e)}"
                ) from e
            else:
                raise
        assert outcome is not None
        if isinstance(outcome, Exception):
            failure = self._call_failure(call, outcome, unknown_if_failed)
            if failure is outcome:
                # Not `from` itself: a cause cycle breaks failure conversion.
                raise failure
            raise failure from outcome
        text = _result_text(outcome)
        if outcome.is_error:
            raise ToolExecutionError(text or f"{call.tool_name} failed")
        return ToolOutcome(output=text)

    def _call_failure(
        self, call: ToolCall, error: Exception, unknown_if_failed: bool
    ) -> Exception:
        from mcp import MCPError
        from mcp.types import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND

        if isinstance(error, MCPError) and error.code in (
            INVALID_REQUEST,
            METHOD_NOT_FOUND,
        ):
            # The server refused the request itself: nothing ran, and a retry
            # would be refused the same way.
            return ToolExecutionError(
                f"{call.tool_name} did not run: MCP server {self._name!r} refused "
                f"the call: {_describe(error)}"
            )
        if (
            isinstance(error, MCPError)
            and error.code == INVALID_PARAMS
            and not unknown_if_failed
        ):
            # A tool's handler may return INVALID_PARAMS after a side effect, so
            # it proves nothing for a write that must not run twice (below); a
            # read or an idempotent write is safe to report and not retry.
            return ToolExecutionError(
                f"{call.tool_name} failed: MCP server {self._name!r} rejected "
                f"its parameters: {_describe(error)}"
            )
        if unknown_if_failed:
            return SessionError(
                f"{call.tool_name} outcome unknown: MCP server {self._name!r} failed "
                f"after the call was sent: {_describe(error)}",
                retryable=False,
            )
        return error

    def tool_call_step_options(self, tool_name: str) -> ToolStepOptions:
        """The configured Step options of `tool_name`, else the source's."""
        return self._tool_step_options.get(tool_name, self._step_options)

    @asynccontextmanager
    async def _connect(self) -> AsyncGenerator[Client, None]:
        try:
            from mcp import Client, StdioServerParameters
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError(
                'MCP tool sources need the `claude` extra: pip install "dex-agents[claude]"'
            ) from e

        timeout = self._request_timeout.total_seconds()
        async with AsyncExitStack() as stack:
            match self._server:
                case _StdioServer() as stdio:
                    target: Any = StdioServerParameters(
                        command=stdio.command,
                        args=list(stdio.args),
                        env=None if stdio.env is None else dict(stdio.env),
                        cwd=None if stdio.cwd is None else os.fspath(stdio.cwd),
                    )
                case _HttpServer() as http:
                    # httpx2 is the HTTP client the MCP SDK's transport takes.
                    import httpx2
                    from mcp.client.streamable_http import streamable_http_client

                    read = max(timeout, self._call_timeout.total_seconds())
                    http_client = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=dict(http.headers),
                            timeout=httpx2.Timeout(timeout, read=read),
                        )
                    )
                    target = streamable_http_client(http.url, http_client=http_client)
            # No response cache: every listing must see the server's tools now.
            client = Client(target, cache=None, read_timeout_seconds=timeout)
            yield await stack.enter_async_context(client)


def _annotation_effect(tool: Tool) -> ToolEffect:
    """The effect an MCP tool's annotations imply.

    `readOnlyHint` is read; otherwise `idempotentHint` is idempotent_write;
    otherwise non_idempotent_write, whatever `destructiveHint` says.
    """
    hints = tool.annotations
    if hints is not None and hints.read_only_hint is True:
        return "read"
    if hints is not None and hints.idempotent_hint is True:
        return "idempotent_write"
    return "non_idempotent_write"


def _schema_problem(schema: JsonObject, arguments: JsonObject) -> str | None:
    """Why `arguments` do not fit `schema` (JSON Schema 2020-12 unless it says), or None."""
    try:
        import jsonschema

        # typeshed leaves best_match's return unannotated (the best error, or None).
        from jsonschema.exceptions import (
            ValidationError,
            best_match,  # pyright: ignore[reportUnknownVariableType]
        )
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            'MCP tool sources need jsonschema: pip install "dex-agents[claude]"'
        ) from e
    try:
        validator = compiled_validator(schema)
    except jsonschema.SchemaError as e:
        return f"the server's input schema is invalid ({e.message})"
    error = cast(
        "ValidationError | None",
        best_match(validator.iter_errors(arguments)),
    )
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message} (at `{where}`)" if where else error.message


def _result_text(result: CallToolResult) -> str:
    """A `tools/call` result as the text the record keeps, cut to `_MAX_OUTPUT_BYTES`."""
    parts = [_block_text(block) for block in result.content]
    if not parts and result.structured_content is not None:
        return _capped(json.dumps(result.structured_content, sort_keys=True))
    return _capped("\n".join(parts))


def _capped(text: str) -> str:
    """`text` cut to `_MAX_OUTPUT_BYTES` UTF-8 bytes, with a note of the rest."""
    if len(text) <= _MAX_OUTPUT_BYTES // 4:
        return text  # Fast path: at most 4 bytes a character.
    # "surrogatepass": JSON text may hold a lone surrogate, which must not raise.
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= _MAX_OUTPUT_BYTES:
        return text
    # "ignore" drops a character the cut would split in two.
    kept = data[:_MAX_OUTPUT_BYTES].decode("utf-8", "ignore")
    rest = len(data) - len(kept.encode())
    return f"{kept}\n[output truncated: {rest} bytes more]"


def _block_text(block: ContentBlock) -> str:
    match block.type:
        case "text":
            return block.text
        case "image" | "audio":
            return f"[{block.type} {block.mime_type} omitted]"
        case "resource":
            text = getattr(block.resource, "text", None)
            return text if isinstance(text, str) else f"[resource {block.resource.uri}]"
        case "resource_link":
            return f"[resource {block.uri}]"


def _sole_error(error: Exception) -> Exception:
    """The one error inside single-member exception groups, else `error`."""
    while isinstance(error, ExceptionGroup):
        # isinstance leaves the member type unknown; an ExceptionGroup holds Exceptions.
        group = cast("ExceptionGroup[Exception]", error)
        if len(group.exceptions) != 1:
            return group
        error = group.exceptions[0]
    return error


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        # isinstance leaves the member type unknown; a group holds BaseExceptions.
        group = cast("BaseExceptionGroup[BaseException]", error)
        if group.exceptions:
            return _describe(group.exceptions[0])
        error = group  # the same object, with its member type known
    return str(error) or type(error).__name__
