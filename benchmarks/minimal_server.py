"""The baseline for the cold-start benchmark: a minimal one-tool MCPServer over stdio."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("minimal")


@server.tool()
async def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run()
