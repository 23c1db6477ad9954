"""Durable agent sessions for the Claude Agent SDK, on Temporal."""
