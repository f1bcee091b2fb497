"""The MCP server of a team.

`app.build_server` wires it: `state` (what the server holds for its lifetime, how a call gets a model),
`runs` (the run service it opens), `registry` (a team's specialists on the surface), `watch` (team-file
reloads), `children` (exiting at once, the team's MCP servers first). In folders: `surface/` (tools,
prompts, resources), `client_features/` (sampling, elicitation), `tasks/`, `updates/` (subscriptions),
`transports/` (HTTP, stdio), `views/` (the run view), `oauth/`. Who the caller is: `auth`.
"""
