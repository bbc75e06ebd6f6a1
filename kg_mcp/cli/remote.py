"""How `kg-mcp call` and `kg-mcp tools` reach an MCP server over HTTP as a team's script would: a
bearer token, or OAuth client credentials; the team's own CA trusted beside the system's; and a
refusal told in the server's words.

With `--client-id`, the token endpoint is found as the MCP authorization spec has a client find
it, by the SDK's own OAuth client: the server's 401 names its Protected Resource Metadata, which
names the issuer, whose metadata names the token endpoint. The credentials go to that issuer only
(or only to `--issuer`, when given). The scopes asked for are `--scope`'s, else those the metadata
lists; an issuer may refuse scopes the client does not hold (`invalid_scope`), and is then
quoted with what to change.
"""

from __future__ import annotations

import os
import ssl
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpcore2
import httpx2
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.errors import ConfigError


@dataclass
class Remote:
    """The options that say how to reach a server over HTTP."""

    url: str
    token: str | None = None
    cacert: str | None = None
    client_id: str | None = None
    client_secret: str | None = None
    scopes: tuple[str, ...] = ()
    issuer: str | None = None
    refusals: list[httpx2.Response] = field(default_factory=list)  # the 401/403 answers seen

    def transport(self):
        """The SDK's streamable HTTP transport for this server."""
        auth = None
        if self.client_id:
            if self.token:
                raise ConfigError("Give --auth-token-env or --client-id, not both.")
            if not self.client_secret:
                raise ConfigError("--client-id needs --client-secret-env VAR, the variable holding the client's secret.")
            auth = _FixedScopes(self.url, TokensInMemory(), self.client_id, self.client_secret, scopes=self.scopes,
                                issuer=self.issuer or _issuer_of(self.url, self.verify()))
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        client = httpx2.AsyncClient(headers=headers, auth=auth, timeout=60, verify=self.verify(),
                                    event_hooks={"response": [self._note_refusal]})
        return _closing(client, streamable_http_client(self.url, http_client=client))

    def verify(self) -> ssl.SSLContext | bool:
        if not self.cacert:
            return True
        # The system's CAs and --cacert's together: create_default_context(cafile=...) would trust
        # that file alone, and the issuer the server names often has a public CA's certificate while
        # the server has one of the team's own CA. The base is what httpx2 trusts by default (the
        # system's store through truststore on macOS and Windows, where Python's own context holds
        # no CA at all on python.org's builds).
        context = httpcore2.default_ssl_context()
        try:
            context.load_verify_locations(cafile=self.cacert)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"Cannot read the CA certificates in {self.cacert}: {e}") from None
        return context

    async def _note_refusal(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            await response.aread()
            self.refusals.append(response)

    def explain(self, error: BaseException) -> str:
        """What to tell the user when the talk failed: the server's or the issuer's own words."""
        from mcp.client.auth import OAuthFlowError, OAuthTokenError

        if isinstance(error, OAuthTokenError) and "invalid_scope" in str(error):
            asked = " ".join(self.scopes) or "every scope the server lists"
            return (f"the issuer refused the scopes asked for ({asked}): {error}. Ask only for scopes this client "
                    f"holds, e.g. --scope kg:read --scope graph:NAME")
        if isinstance(error, (OAuthTokenError, OAuthFlowError)):
            return f"signing in with --client-id {self.client_id} failed: {error}"
        # Signing in starts with a 401 that names the metadata: only what came after it is a refusal.
        refused = self.refusals[1:] if self.client_id else self.refusals
        if refused:
            return refusal_text(refused[-1], f"--client-id {self.client_id}" if self.client_id else "--auth-token-env")
        return ""


@asynccontextmanager
async def _closing(client: httpx2.AsyncClient, transport):
    """`transport`, then `client` closed with it: the SDK leaves an HTTP client it is given open."""
    async with client, transport as streams:
        yield streams


def refusal_text(response: httpx2.Response, how: str) -> str:
    """A 401 or 403 in the server's words: its error, the scopes it wants, its description.

    >>> r = httpx2.Response(403, headers={"www-authenticate": 'Bearer error="insufficient_scope", '
    ...     'scope="kg:read kg:sparql", error_description="Required scope: kg:read kg:sparql"'})
    >>> refusal_text(r, "--auth-token-env")
    'the MCP server refused the request (HTTP 403, insufficient_scope): Required scope: kg:read kg:sparql. The token given with --auth-token-env lacks a scope of: kg:read kg:sparql'
    """
    params = challenge_params(response.headers.get("www-authenticate", ""))
    error = params.get("error")
    description = params.get("error_description")
    if not description:
        try:
            description = response.json().get("error_description")
        except ValueError:
            description = None
    text = f"the MCP server refused the request (HTTP {response.status_code}{', ' + error if error else ''})"
    if description:
        text += f": {description.rstrip('.')}"
    if response.status_code == 403 and params.get("scope"):
        return f"{text}. The token given with {how} lacks a scope of: {params['scope']}"
    return f"{text}. Check the token given with {how}"


def challenge_params(value: str) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", ...` header (RFC 6750)."""
    from mcp.client.auth.utils import extract_field_from_www_auth

    response = httpx2.Response(401, headers={"www-authenticate": value})
    names = ("error", "error_description", "scope", "resource_metadata")
    return {name: found for name in names if (found := extract_field_from_www_auth(response, name))}


def _issuer_of(url: str, verify) -> str:
    """The issuer the server's Protected Resource Metadata names (found from its 401): the server
    chooses it, so it is checked as RFC 9728 asks (the metadata describes this URL) and reached
    over https only (but on a loopback address). Give --issuer to choose it yourself."""
    from kg_mcp.serving.issuer import is_loopback

    def https(where: str, what: str) -> None:
        parts = urlsplit(where)
        if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname or "")):
            raise ConfigError(f"{url} names {what} {where!r}, not an https URL: the client's secret would travel in "
                              "the clear. Give --issuer URL to choose the issuer yourself.")

    try:
        answer = httpx2.post(url, json={}, headers={"Accept": "application/json, text/event-stream"}, timeout=30,
                             verify=verify)
        where = challenge_params(answer.headers.get("www-authenticate", "")).get("resource_metadata")
        if answer.status_code != 401 or not where:
            raise ConfigError(f"{url} does not ask for OAuth sign-in (HTTP {answer.status_code}, no resource_metadata): "
                              "give its token with --auth-token-env instead of --client-id.")
        https(where, "its resource metadata at")
        metadata = httpx2.get(where, timeout=30, verify=verify).json()
        servers = metadata.get("authorization_servers") or []
    except (httpx2.HTTPError, ValueError, AttributeError) as e:
        raise ConfigError(f"Cannot read how {url} signs clients in: {e}") from None
    if str(metadata.get("resource", "")).rstrip("/") != url.rstrip("/"):
        raise ConfigError(f"{where} describes {metadata.get('resource')!r}, not {url} (RFC 9728): give --issuer URL "
                          "to choose the issuer yourself.")
    if len(servers) != 1:
        raise ConfigError(f"{url} names {len(servers)} issuers: say which one holds this client with --issuer URL.")
    https(str(servers[0]), "the issuer")
    return str(servers[0])


class _FixedScopes(ClientCredentialsOAuthProvider):
    """Client credentials that ask for `scopes` when given (the SDK would ask for what the server
    lists, which an issuer may refuse), else for what the server lists."""

    def __init__(self, *args, scopes: tuple[str, ...] = (), **kwargs):
        super().__init__(*args, **kwargs)
        self._scopes = " ".join(scopes) or None

    async def _exchange_token_client_credentials(self):
        if self._scopes:
            self.context.client_metadata.scope = self._scopes
        return await super()._exchange_token_client_credentials()


class TokensInMemory:
    """Tokens kept in memory, for one command or one test client (the SDK's TokenStorage)."""

    def __init__(self):
        self.tokens = self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def secret_from(variable: str | None) -> str | None:
    """The secret in environment variable `variable` (None when no variable is named)."""
    if not variable:
        return None
    value = os.environ.get(variable, "").strip()
    if not value:
        raise ConfigError(f"The environment variable {variable} is not set or empty.")
    return value
