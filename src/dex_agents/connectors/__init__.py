"""Tool sources beyond custom tools: reviewed connector operations, and MCP servers."""

from ._mcp_source import MCPServerToolSource
from ._model import ConnectorOperation
from ._source import ConnectorToolSource

__all__ = [
    "ConnectorOperation",
    "ConnectorToolSource",
    "MCPServerToolSource",
]
