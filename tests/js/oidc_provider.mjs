// A real OpenID provider (npm oidc-provider, OpenID certified) on loopback for the OAuth tests.
//   node oidc_provider.mjs CONFIG.json
// CONFIG: {port, keys: [private JWKs, the first signs], clients: [...], users: {name: {password, scopes}},
//          resources: {URL: {scope, ttl}}, opaque_clients: [client ids whose access tokens are opaque],
//          scope_by_client: {client id: the scopes of every resource it may have}, ttl_by_client: {client id: s}}
// Without keys it signs with a P-256 key made here at start, never with oidc-provider's published
// development key (its "quick start", which anyone can sign with).
// Access tokens are RFC 9068 JWTs bound to the resource indicator the client sent (RFC 8707),
// except for opaque_clients, whose tokens are opaque and read through introspection (RFC 7662).
// Sign-in is a plain HTML form (login, password) and a consent form; consent grants the scopes asked
// for that the user holds in CONFIG and rejects the rest. Prints "ready ISSUER" once listening.
import { generateKeyPairSync, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import http from "node:http";
import Provider, { errors } from "oidc-provider";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const issuer = `http://127.0.0.1:${config.port}`;
const resourceScopes = new Set(Object.values(config.resources).flatMap((r) => r.scope.split(" ")));

function keyOfOurOwn() {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  return { ...privateKey.export({ format: "jwk" }), kid: randomUUID(), use: "sig", alg: "ES256" };
}

const jwks = { keys: config.keys?.length ? config.keys : [keyOfOurOwn()] };
const signingAlg = config.alg || "ES256";

const provider = new Provider(issuer, {
  clients: config.clients,
  clientDefaults: { id_token_signed_response_alg: signingAlg, grant_types: ["authorization_code"], response_types: ["code"] },
  jwks,
  scopes: ["openid", "offline_access", ...resourceScopes],
  findAccount: async (ctx, id) =>
    config.users[id] ? { accountId: id, claims: async () => ({ sub: id }) } : undefined,
  interactions: { url: async (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, indicator, client) => {
        const resource = config.resources[indicator];
        const ttl = (config.ttl_by_client || {})[client.clientId];
        if (!resource) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
        const opaque = (config.opaque_clients || []).includes(client.clientId);
        // What this client may have of the resource (an API's per-client grants): the token gets
        // the scopes asked for within it, whatever else the client asked for.
        const scope = (config.scope_by_client || {})[client.clientId] ?? resource.scope;
        return {
          scope,
          audience: indicator,
          accessTokenTTL: ttl || resource.ttl || 300,
          accessTokenFormat: opaque ? "opaque" : "jwt",
          jwt: { sign: { alg: signingAlg } },
        };
      },
    },
  },
  pkce: { required: () => true },
  clientBasedCORS: () => true,
  // Any client may ask about a token; the resource server authenticates as a client of its own.
  ttl: { AccessToken: 300, AuthorizationCode: 60, Grant: 3600, Interaction: 600, Session: 3600 },
});
provider.proxy = false;

const page = (title, body) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${title}</title></head><body><h1>${title}</h1>${body}</body></html>`;

async function formBody(req) {
  let data = "";
  for await (const chunk of req) data += chunk;
  return Object.fromEntries(new URLSearchParams(data));
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) throw new Error("interaction mismatch");
  const { prompt, params, session } = details;
  if (req.method === "GET") {
    res.setHeader("content-type", "text/html");
    if (prompt.name === "login") {
      return res.end(page("Sign in", `<form method="post" action="/interaction/${uid}/login">
        <label>User <input name="login" id="login"></label>
        <label>Password <input name="password" id="password" type="password"></label>
        <button type="submit" id="sign-in">Sign in</button></form>`));
    }
    return res.end(page("Allow access", `<p>${params.client_id} asks for ${params.scope || ""}</p>
      <form method="post" action="/interaction/${uid}/confirm"><button type="submit" id="allow">Allow</button></form>`));
  }
  const form = await formBody(req);
  if (action === "login") {
    const user = config.users[form.login];
    if (!user || user.password !== form.password) {
      res.statusCode = 401;
      res.setHeader("content-type", "text/html");
      return res.end(page("Sign in", "<p id='error'>Wrong user or password.</p>"));
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.login } }, { mergeWithLastSubmission: false });
  }
  // consent: what the user holds of what was asked; the rest rejected, so it is not asked again
  const held = new Set(config.users[session.accountId].scopes);
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) {
    const wanted = missing.missingOIDCScope;
    grant.addOIDCScope(wanted.filter((s) => held.has(s) || s === "openid" || s === "offline_access").join(" "));
    grant.rejectOIDCScope(wanted.filter((s) => !(held.has(s) || s === "openid" || s === "offline_access")).join(" "));
  }
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.filter((s) => held.has(s)).join(" "));
    const refused = scopes.filter((s) => !held.has(s));
    if (refused.length) grant.rejectResourceScope(indicator, refused.join(" "));
  }
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

// How many requests each endpoint was sent, for tests that count what the resource server asks:
// GET /_test/counts answers {path: count}.
const counts = {};
const callback = provider.callback();
const server = http.createServer(async (req, res) => {
  const path = req.url.split("?")[0];
  if (path === "/_test/counts") {
    res.setHeader("content-type", "application/json");
    return res.end(JSON.stringify(counts));
  }
  counts[path] = (counts[path] || 0) + 1;
  const match = /^\/interaction\/([^/?]+)(?:\/(login|confirm))?/.exec(req.url);
  if (!match) return callback(req, res);
  try {
    await interaction(req, res, match[1], match[2]);
  } catch (error) {
    res.statusCode = 400;
    res.end(String(error));
  }
});
server.listen(config.port, "127.0.0.1", () => console.log(`ready ${issuer}`));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
