// A real OpenID provider (node `oidc-provider`, pinned in package.json) for the OAuth tests. TEST ONLY:
// in-memory storage, the built-in login and consent pages (any user name logs in), plain HTTP on loopback.
//
//   node provider.mjs <node_modules dir>     (tests/oidc_provider.py starts it)
//
// Environment: OIDC_PORT (127.0.0.1 only), OIDC_JWKS_FILE (the private JWK Set: the FIRST key signs, the
// others are published too; tests/oidc_provider.py writes and rotates it, then restarts this process; made
// with one new key when missing, for trying it by hand: docs/serving-several-people.md).
//
// Resource indicators (RFC 8707): any `http://127.0.0.1:<port>/.../mcp` gets JWT access tokens (RFC 9068,
// typ at+jwt, aud = the resource); `http://localhost:<port>/.../mcp` gets opaque ones, for introspection;
// OTHER_RESOURCE exists so that a test can hold a token for another server. Anything else: invalid_target.
//
// Clients: `mcp-cc` (client_credentials, every scope), `mcp-public` (authorization_code + PKCE, a public
// client as MCP hosts are; redirect http://127.0.0.1:33418/callback), `mcp-team-rs` (no grants: the resource
// server's own client, for introspection).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

const modules = process.argv[2];
const { default: Provider, errors } = await import(
  pathToFileURL(path.join(modules, 'oidc-provider', 'lib', 'index.js')).href
);

const PORT = Number(process.env.OIDC_PORT);
const ISSUER = `http://127.0.0.1:${PORT}`;
const SCOPES = ['team:run', 'runs:read', 'checkpoints:answer', 'runs:admin'];
const OTHER_RESOURCE = 'http://127.0.0.1:9/other-api';
const JWT_RESOURCE = /^http:\/\/127\.0\.0\.1:\d+(\/[\w.-]+)*\/mcp$/;
const OPAQUE_RESOURCE = /^http:\/\/localhost:\d+(\/[\w.-]+)*\/mcp$/;

if (!fs.existsSync(process.env.OIDC_JWKS_FILE)) {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const key = { ...privateKey.export({ format: 'jwk' }), kid: `k-${Date.now()}`, use: 'sig', alg: 'RS256' };
  fs.writeFileSync(process.env.OIDC_JWKS_FILE, JSON.stringify({ keys: [key] }), { mode: 0o600 });
}
const jwks = JSON.parse(fs.readFileSync(process.env.OIDC_JWKS_FILE, 'utf8'));

const provider = new Provider(ISSUER, {
  jwks,
  clients: [
    {
      client_id: 'mcp-cc',
      client_secret: 'mcp-cc-secret',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: SCOPES.join(' '),
    },
    {
      client_id: 'mcp-public',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1:33418/callback'],
      scope: ['openid', ...SCOPES].join(' '),
    },
    {
      client_id: 'mcp-team-rs',
      client_secret: 'mcp-team-rs-secret',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  scopes: ['openid', 'offline_access', ...SCOPES],
  features: {
    clientCredentials: { enabled: true },
    devInteractions: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      getResourceServerInfo: async (ctx, resource) => {
        const opaque = OPAQUE_RESOURCE.test(resource);
        if (!opaque && !JWT_RESOURCE.test(resource) && resource !== OTHER_RESOURCE) {
          throw new errors.InvalidTarget();
        }
        return { scope: SCOPES.join(' '), accessTokenFormat: opaque ? 'opaque' : 'jwt', accessTokenTTL: 600 };
      },
    },
  },
  pkce: { required: () => true },
  findAccount: async (ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
});

provider.on('server_error', (ctx, err) => console.error('server_error', err));
provider.listen(PORT, '127.0.0.1', () => {
  console.log(`oidc-provider ready: ${ISSUER}, signing kid ${jwks.keys[0].kid}`);
});
