"""How MCP reaches the server: streamable HTTP (`http`, with `cors`, `middleware` and the resumable event store
`events`) and stdio (`stdio`); both check each JSON-RPC message first (`messages`)."""
