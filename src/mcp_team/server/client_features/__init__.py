"""What the server asks of its MCP client: sampling (the team on the client's own model) and elicitation (a
person answering a checkpoint)."""
