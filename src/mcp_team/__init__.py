"""mcp-team: a team of LLM specialists and a supervisor behind one MCP server."""

__version__ = "0.1.0"
