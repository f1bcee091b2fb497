"""Tracing for mcp-team: span helpers and attribute keys. Imports nothing else from mcp_team."""
