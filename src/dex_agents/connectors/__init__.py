"""Tool sources beyond custom tools: reviewed connector operations, and MCP servers."""

from ._mcp_source import MCPServerStdio, MCPServerStreamableHTTP, MCPServerToolSource
from ._model import ConnectorOperation, connector_tool
from ._source import ConnectorToolSource

__all__ = [
    "ConnectorOperation",
    "ConnectorToolSource",
    "MCPServerStdio",
    "MCPServerStreamableHTTP",
    "MCPServerToolSource",
    "connector_tool",
]
