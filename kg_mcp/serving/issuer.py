"""Talking to an OAuth issuer: where its metadata is, one pooled HTTP client for everything asked of
it, and the signing keys it publishes, read as kg_mcp.serving.oauth trusts them.

One client per event loop, kept for the server's life: a client made per request costs a TLS context
and a connection each time (22.8 ms of event-loop time per introspection, measured in the third
round of attacks), and nothing bounds how many run at once. This one holds at most
ISSUER_CONNECTIONS connections; a request that finds them all busy waits for one, within
HTTP_TIMEOUT_S, then counts as the issuer not answering.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
import weakref
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2

from kg_mcp.errors import ConfigError
from kg_mcp.serving.published_keys import published_as

log = logging.getLogger(__name__)

HTTP_TIMEOUT_S = 10.0
START_TIMEOUT_S = 5.0  # the key check at start waits about this long in all for an issuer that does not answer
ISSUER_CONNECTIONS = 8


class IssuerUnreachable(Exception):
    """The issuer's metadata, keys or introspection could not be had: the token is refused."""


@dataclass(frozen=True)
class IssuerMetadata:
    issuer: str
    jwks_uri: str | None
    introspection_endpoint: str | None


def check_issuer_url(url: str) -> str:
    """The issuer URL as given, or a ConfigError: https, except on a loopback address.

    >>> check_issuer_url("https://login.example.org/realms/team")
    'https://login.example.org/realms/team'
    >>> check_issuer_url("http://127.0.0.1:9000")
    'http://127.0.0.1:9000'
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--oauth-issuer {url!r} is not an http(s) URL.")
    if parts.query or parts.fragment:
        raise ConfigError(f"--oauth-issuer {url!r} must not have a query or a fragment (RFC 8414).")
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigError(
            f"--oauth-issuer {url!r}: an issuer must be reached over https (plain http is allowed on a "
            "loopback address only, for local development)."
        )
    return url


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback name or address.

    >>> is_loopback("127.0.0.2"), is_loopback("::1"), is_loopback("localhost"), is_loopback("10.0.0.1")
    (True, True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414's well-known path (with the issuer's path after
    it), then OpenID Connect discovery's (appended to the issuer).

    >>> metadata_urls("https://login.example.org/realms/team")  # doctest: +NORMALIZE_WHITESPACE
    ['https://login.example.org/.well-known/oauth-authorization-server/realms/team',
     'https://login.example.org/realms/team/.well-known/openid-configuration']
    """
    parts = urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    return [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}{path}/.well-known/openid-configuration"]


def read_metadata(issuer: str, url: str, document) -> IssuerMetadata:
    """The metadata `document` fetched from `url`; its `issuer` must be exactly the configured one."""
    if not isinstance(document, dict) or document.get("issuer") != issuer:
        found = document.get("issuer") if isinstance(document, dict) else None
        raise IssuerUnreachable(f"{url} names the issuer {found!r}, not {issuer!r}")
    # The keys and the introspection (which carries the client secret) are held to the issuer's own
    # rule: https, plain http on a loopback address only.
    for name in ("jwks_uri", "introspection_endpoint"):
        endpoint = document.get(name)
        if endpoint is not None:
            parts = urlsplit(str(endpoint))
            if not (parts.scheme == "https" or parts.scheme == "http" and is_loopback(parts.hostname or "")):
                raise IssuerUnreachable(f"{url} gives {name} {endpoint!r}: kg-mcp reaches an issuer over https only")
    return IssuerMetadata(issuer, document.get("jwks_uri"), document.get("introspection_endpoint"))


def signing_keys(document, where: str) -> dict[str, dict]:
    """Key id -> JWK of the public signing keys in a JWKS `document`: symmetric keys, keys for
    encryption and keys published for anyone to sign with (kg_mcp.serving.published_keys) left out."""
    keys = {}
    for jwk in document.get("keys", []) if isinstance(document, dict) else []:
        if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
            continue  # symmetric keys are never trusted
        if jwk.get("use", "sig") != "sig":
            continue
        if (published := published_as(jwk)) is not None:
            log.error("OAuth: %s publishes %s, whose private half anyone has: tokens it signs are refused", where, published)
            continue
        keys[str(jwk.get("kid", ""))] = {**jwk, "kid": str(jwk.get("kid", ""))}
    return keys


def published_keys_in(document) -> list[str]:
    """What each published key (kg_mcp.serving.published_keys) in a JWKS `document` is."""
    keys = document.get("keys", []) if isinstance(document, dict) else []
    return [what for jwk in keys if isinstance(jwk, dict) and (what := published_as(jwk))]


class IssuerClient:
    """The pooled HTTP client every request to the issuer goes through (one per event loop)."""

    def __init__(self, connections: int = ISSUER_CONNECTIONS):
        self.limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
        # By the loop itself, held weakly: an id can come back for a new loop once the old one is
        # gone, which would hand it connections of a dead loop.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx2.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )

    def _client(self) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, limits=self.limits)
        return client

    async def get_json(self, url: str):
        try:
            response = await self._client().get(url, headers={"Accept": "application/json"})
        except httpx2.HTTPError as e:
            raise IssuerUnreachable(f"{url}: {type(e).__name__} {e}") from None
        return _json_of(url, response)

    async def post_form(self, url: str, data: dict, auth: tuple[str, str]):
        try:
            response = await self._client().post(url, data=data, auth=auth, headers={"Accept": "application/json"})
        except httpx2.HTTPError as e:
            raise IssuerUnreachable(f"{url}: {type(e).__name__} {e}") from None
        return _json_of(url, response)


def fetch_at_start(issuer: str) -> tuple[IssuerMetadata, dict] | None:
    """The issuer's metadata and key set document, fetched once before serving (a blocking call), or
    None when it does not answer within START_TIMEOUT_S in all (logged; tokens are checked when it
    does): each request's connect and each read waits at most what is left of it, and none starts
    after it."""
    problems = []
    ends = time.monotonic() + START_TIMEOUT_S

    def get(client: httpx2.Client, url: str):
        left = ends - time.monotonic()
        if left <= 0:
            raise IssuerUnreachable(f"no answer within {START_TIMEOUT_S:g} s")
        return _json_of(url, client.get(url, headers={"Accept": "application/json"}, timeout=left))

    with httpx2.Client(timeout=START_TIMEOUT_S) as client:
        for url in metadata_urls(issuer):
            try:
                metadata = read_metadata(issuer, url, get(client, url))
                if not metadata.jwks_uri:
                    return metadata, {}
                return metadata, get(client, metadata.jwks_uri)
            except (httpx2.HTTPError, IssuerUnreachable) as e:
                problems.append(f"{url}: {e}")
    log.warning("OAuth: the issuer %s does not answer yet (%s); its keys are checked when it does", issuer, "; ".join(problems))
    return None


def _json_of(url: str, response: httpx2.Response):
    if response.status_code != 200:
        raise IssuerUnreachable(f"{url} answered HTTP {response.status_code}")
    try:
        return json.loads(response.content)
    except ValueError:
        raise IssuerUnreachable(f"{url} answered something other than JSON") from None
