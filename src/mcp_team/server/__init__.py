"""The MCP surface and the CLI.

`app.build_server` wires the server from one module per idea: `state` (what the server holds, how a
call gets a model), `tools`, `progress`, `prompts`, `resources`, `registry` (a team's specialists on
the surface), `middleware`, `watch`; `sampling` (the client's model), `http`, `store`, `teamfile`
(reading team files), `starter` (writing them).
`cli` is the `mcp-team` command; each command group is a module of `commands`.
"""
