"""Connector tools: reviewed provider operations offered to an agent as a tool source."""

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
    "ManifestApproval",
    "ManifestEntry",
    "connector_call_id",
    "connector_tool",
    "parse_manifest",
]
