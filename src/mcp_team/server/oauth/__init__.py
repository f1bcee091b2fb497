"""`serve --http` as an OAuth 2.1 protected resource (the MCP authorization spec, 2025-11-25 and 2026-07-28),
for a team server that several people use: every token is checked against one issuer and this server's
canonical URL, and every run belongs to the token's principal (`tasks.caller`).

- `settings`: `OAuthSettings` (`MCP_TEAM_AUTH_*`, `--auth-issuer`) and the canonical URL
- `metadata`: the issuer's metadata (RFC 8414 / OpenID discovery); `issuer`: talking to the issuer
- `jwks`: the issuer's signing keys, kept and fetched again on rotation; `verifiers`: JWT or introspection
- `access`: the access token a request carries; `scopes`: which scope each request needs
- `guard`: the 401/403 challenges and the protected-resource metadata on the HTTP app
- `resource`: `ResourceServer`, all of it made from the settings
"""
