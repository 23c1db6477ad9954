"""Tool sources beyond custom tools: reviewed connector operations, and MCP servers."""

from ._mcp_source import (
    MCP_ATTEMPT_META,
    MCP_IDEMPOTENCY_KEY_META,
    MCP_STEP_EXECUTION_ID_META,
    MCPServerStdio,
    MCPServerStreamableHTTP,
    MCPServerToolSource,
)
from ._model import (
    ConnectorError,
    ConnectorFence,
    ConnectorInvocation,
    ConnectorKind,
    ConnectorOperation,
    ConnectorOutcomeUnknown,
    ConnectorResult,
    ConnectorRetry,
    ConnectorTool,
    ManifestApproval,
    ManifestEntry,
    connector_call_id,
    connector_tool,
    parse_manifest,
)
from ._source import DEFAULT_CONNECTOR_SOURCE_NAME, ConnectorToolSource

__all__ = [
    "ConnectorError",
    "ConnectorFence",
    "ConnectorInvocation",
    "ConnectorKind",
    "ConnectorOperation",
    "ConnectorOutcomeUnknown",
    "ConnectorResult",
    "ConnectorRetry",
    "ConnectorTool",
    "ConnectorToolSource",
    "DEFAULT_CONNECTOR_SOURCE_NAME",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "MCPServerToolSource",
    "MCP_ATTEMPT_META",
    "MCP_IDEMPOTENCY_KEY_META",
    "MCP_STEP_EXECUTION_ID_META",
    "ManifestApproval",
    "ManifestEntry",
    "connector_call_id",
    "connector_tool",
    "parse_manifest",
]
