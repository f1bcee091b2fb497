"""mcp-team: a team of LLM specialists and a supervisor behind one MCP server."""
