"""Bearer-token auth for the HTTP transports: one shared token, from an environment variable or a file.

Named tokens are kg_mcp.serving.tokens; OAuth access tokens kg_mcp.serving.oauth."""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from kg_mcp.errors import ConfigError
from kg_mcp.serving import scopes

MIN_TOKEN_LENGTH = 16


class StaticTokenVerifier:
    """Accepts exactly one token, compared in constant time; the token is never logged. It grants
    every scope (and so every graph): the caller is known by its address."""

    def __init__(self, token: str):
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(f"The auth token must be at least {MIN_TOKEN_LENGTH} characters long.")
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if self.knows(token):
            return AccessToken(token=token, client_id="kg-mcp-client", scopes=list(scopes.FULL))
        return None

    def knows(self, token: str) -> bool:
        return hmac.compare_digest(token.encode(), self._token)

    def __repr__(self) -> str:
        return "StaticTokenVerifier(token=***)"


def read_token(*, env_var: str | None = None, file: str | Path | None = None) -> str | None:
    """The token named by --auth-token-env or --auth-token-file (None when neither is given)."""
    if env_var and file:
        raise ConfigError("Give --auth-token-env or --auth-token-file, not both.")
    if env_var:
        token = os.environ.get(env_var, "").strip()
        if not token:
            raise ConfigError(f"The environment variable {env_var} is not set or empty.")
        return token
    if file:
        try:
            token = Path(file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise ConfigError(f"Cannot read the token file {file}: {e.strerror}") from None
        if not token:
            raise ConfigError(f"The token file {file} is empty.")
        return token
    return None


@dataclass
class ServerAuth:
    """How an HTTP server checks its callers: the token verifier (one shared token, named tokens, an
    OAuth issuer's tokens, or several of them in turn) and, with an issuer, what its Protected
    Resource Metadata (RFC 9728) says: this server's resource URL, the issuer, the scopes it knows."""

    verifier: TokenVerifier
    resource_url: str | None = None  # the MCP endpoint's public URL; with `issuer`, every token's audience
    issuer: str | None = None
    scopes_supported: list[str] = field(default_factory=lambda: list(scopes.KNOWN))
    # The served tools that need more than kg:read (set by build_server): calls of them are checked
    # at the HTTP layer, so that a token without the scope gets the spec's 403 challenge.
    scoped_tools: frozenset[str] = frozenset()

    @property
    def metadata_url(self) -> str | None:
        """Where the Protected Resource Metadata is served (None without an issuer)."""
        if not (self.issuer and self.resource_url):
            return None
        return str(build_resource_metadata_url(AnyHttpUrl(self.resource_url)))

    def sdk_settings(self) -> AuthSettings:
        """The SDK's view: every request needs kg:read; the verifiers check audiences themselves."""
        return AuthSettings(
            issuer_url=self.issuer or self.resource_url or "http://127.0.0.1",
            resource_server_url=self.resource_url if self.issuer else None,
            required_scopes=[scopes.READ],
            validate_token_resource=False,
        )


def server_auth(
    *,
    token: str | None = None,
    tokens_file: str | Path | None = None,
    issuer: str | None = None,
    public_url: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    more_scopes: list[str] | tuple[str, ...] = (),
    leeway_s: float = 30.0,
) -> ServerAuth | None:
    """The auth of `kg-mcp serve` from its options (None: no auth at all). Tokens are tried in the
    order: the shared token, the named tokens, the issuer's (the cheap checks first). An issuer's keys
    are read now (kg_mcp.serving.oauth.OAuthVerifier.check_at_start)."""
    from kg_mcp.serving.oauth import OAuthVerifier, check_issuer_url
    from kg_mcp.serving.tokens import FirstOf, NamedTokens

    verifiers: list = []
    if token:
        verifiers.append(StaticTokenVerifier(token))
    if tokens_file:
        verifiers.append(NamedTokens(tokens_file))
    if issuer:
        check_issuer_url(issuer)
        if not public_url:
            raise ConfigError(
                "--oauth-issuer (KG_MCP_OAUTH_ISSUER) needs --public-url (KG_MCP_PUBLIC_URL): the URL clients reach "
                "the MCP endpoint at, e.g. https://kg.example.org/mcp (every access token must be issued for it)."
            )
        oauth = OAuthVerifier(issuer, public_url, client_id=client_id, client_secret=client_secret, leeway_s=leeway_s)
        oauth.check_at_start()  # an issuer signing with a published key stops the server here
        verifiers.append(oauth)
    elif client_id:
        raise ConfigError("--oauth-client-id is the server's own client at the issuer: give --oauth-issuer too.")
    if not verifiers:
        return None
    known = list(dict.fromkeys([*scopes.KNOWN, *more_scopes]))
    verifier = verifiers[0] if len(verifiers) == 1 else FirstOf(verifiers)
    return ServerAuth(verifier, public_url, issuer, known)


def endpoint_url(public_url: str | None, path: str) -> str | None:
    """The MCP endpoint's public URL: `public_url` as given, or with `path` added when it has none.

    >>> endpoint_url("https://kg.example.org", "/mcp"), endpoint_url("https://example.org/kg/mcp", "/mcp")
    ('https://kg.example.org/mcp', 'https://example.org/kg/mcp')
    """
    if not public_url:
        return None
    parts = urlsplit(public_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ConfigError(f"--public-url {public_url!r} must be an http(s) URL without a query or fragment.")
    return public_url if parts.path not in ("", "/") else public_url.rstrip("/") + path


def public_host(url: str) -> str:
    """The Host header (name and port) a request for the public `url` carries through the proxy.

    >>> public_host("https://kg.example.org/mcp"), public_host("http://[::1]:8080/mcp")
    ('kg.example.org:443', '[::1]:8080')
    """
    parts = urlsplit(url)
    name = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{name}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
