"""Access tokens from an OAuth 2.1 authorization server, checked as the MCP authorization spec asks
of a resource server.

The issuer is named once (`--oauth-issuer`); everything else is read from its metadata document
(RFC 8414, or OpenID Connect discovery): its signing keys (`jwks_uri`) and, when it has one, its
introspection endpoint. A token is either

- a JWT access token (RFC 9068): signed by a key of the issuer's JWKS with an algorithm of
  ALGORITHMS (never `none`, never a shared-secret HMAC), `iss` the issuer, `aud` this server's
  resource URL (RFC 8707), within `exp` and `nbf` give or take LEEWAY_S; or
- an opaque token, asked of the issuer's introspection endpoint (RFC 7662) with this server's own
  client credentials: active, for this resource, not expired.

Signature checks are PyJWT's; this module only fetches, caches and compares. Keys are kept until
a token names a key id they lack (the issuer rotated its keys): the key set is then fetched again,
at most once every REFETCH_S, so tokens with made-up key ids cannot make the server hammer the
issuer. Nothing here logs a token.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx2
import jwt
from mcp.server.auth.provider import AccessToken

from kg_mcp.errors import ConfigError

log = logging.getLogger(__name__)

# Asymmetric signatures only: an HMAC "signed" with a public key is the classic JWT forgery.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_S = 30.0  # clock skew allowed on exp, nbf and iat
REFETCH_S = 5.0  # an unknown key id fetches the key set again at most this often
KEYS_MAX_AGE_S = 3600.0  # keys are fetched again past this age, so a key the issuer withdrew stops working
INTROSPECTION_CACHE_S = 30.0  # an active opaque token is trusted this long before it is asked about again
INTROSPECTION_CACHE_SIZE = 10_000
VERIFIED_CACHE_S = 60.0  # a JWT already checked is not checked again for this long (nor past its exp)
VERIFIED_CACHE_SIZE = 10_000
HTTP_TIMEOUT_S = 10.0
# RFC 9068 marks access tokens with typ at+jwt; Keycloak and Entra ID write JWT. An ID token (or any
# JWT the issuer made for someone else) is refused by its audience, which must be this server.
ACCEPTED_TYPES = {"at+jwt", "application/at+jwt", "jwt", None}


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


@dataclass(frozen=True)
class IssuerMetadata:
    issuer: str
    jwks_uri: str | None
    introspection_endpoint: str | None


class OAuthVerifier:
    """The MCP SDK's TokenVerifier for tokens of one issuer, for the resource `resource_url`.

    `client_id` / `client_secret`: this server's own credentials at the issuer, used only to ask
    its introspection endpoint about opaque tokens (none: opaque tokens are refused).
    """

    def __init__(
        self,
        issuer: str,
        resource_url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        leeway_s: float = LEEWAY_S,
    ):
        self.issuer = check_issuer_url(issuer)
        self.resource_url = resource_url
        self.audiences = [resource_url.rstrip("/"), resource_url.rstrip("/") + "/"]
        self.leeway_s = leeway_s
        self._client = (client_id, client_secret) if client_id and client_secret else None
        self._metadata: IssuerMetadata | None = None
        self._keys: dict[str, dict] = {}  # key id -> JWK (public signing keys only)
        self._prepared: dict[tuple[str, str], jwt.PyJWK] = {}
        self._keys_fetched = 0.0  # monotonic time of the last fetch (0: never)
        self._introspected: dict[str, tuple[float, AccessToken]] = {}
        self._verified: dict[bytes, tuple[float, AccessToken]] = {}
        self._lock: anyio.Lock | None = None

    def __repr__(self) -> str:
        return f"OAuthVerifier(issuer={self.issuer!r}, resource={self.resource_url!r})"

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's identity and scopes, or None when it is not one of ours (the SDK answers 401)."""
        try:
            if token.count(".") == 2:
                return await self._verify_jwt_once(token)
            return await self._introspect(token)
        except IssuerUnreachable as e:
            log.error("OAuth: cannot check a token with the issuer %s: %s", self.issuer, e)
            return None

    async def _verify_jwt_once(self, token: str) -> AccessToken | None:
        """A JWT checked once is trusted until it expires, for at most VERIFIED_CACHE_S: a client sends
        the same token with every request, and a signature check costs half a millisecond (bench/auth_checks.py)."""
        digest = hashlib.sha256(token.encode()).digest()
        now = time.time()
        cached = self._verified.get(digest)
        if cached is not None and cached[0] > now:
            return cached[1]
        access = await self._verify_jwt(token)
        if access is not None:
            if len(self._verified) >= VERIFIED_CACHE_SIZE:
                self._verified.clear()
            until = now + VERIFIED_CACHE_S
            if access.expires_at is not None:
                until = min(until, access.expires_at)
            self._verified[digest] = (until, access)
        return access

    # --- JWT access tokens (RFC 9068) --------------------------------------------------------

    async def _verify_jwt(self, token: str) -> AccessToken | None:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            log.info("OAuth: refused a token: %s", e)
            return None
        alg, kid = header.get("alg"), header.get("kid")
        typ = header.get("typ")
        if alg not in ALGORITHMS:
            log.info("OAuth: refused a token signed with %.40r (allowed: %s)", alg, ", ".join(ALGORITHMS))
            return None
        if (typ.lower() if isinstance(typ, str) else typ) not in ACCEPTED_TYPES:
            log.info("OAuth: refused a JWT of type %.40r (not an access token)", typ)
            return None
        key = await self._signing_key(kid, alg)
        if key is None:
            log.info("OAuth: refused a token signed by key %.40r, which the issuer does not publish", kid)
            return None
        try:
            claims = jwt.decode(
                token,
                key=key,
                algorithms=[alg],
                audience=self.audiences,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as e:
            log.info("OAuth: refused a token: %s", e)
            return None
        return self._access_token(token, claims)

    async def _signing_key(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        if not self._keys_fetched:
            await self._fetch_keys()
        elif time.monotonic() - self._keys_fetched > KEYS_MAX_AGE_S:
            await self._fetch_keys(keep_on_failure=True)
        jwk = self._find_key(kid)
        if jwk is None and time.monotonic() - self._keys_fetched > REFETCH_S:
            # Rotated keys: the issuer publishes a new key before it signs with it.
            await self._fetch_keys(keep_on_failure=True)
            jwk = self._find_key(kid)
        if jwk is None:
            return None
        if jwk.get("alg") not in (None, alg):
            return None  # a key published for one algorithm is not used with another
        prepared = self._prepared.get((jwk["kid"], alg))
        if prepared is None:
            try:
                prepared = jwt.PyJWK(jwk, algorithm=alg)
            except jwt.PyJWTError:  # the algorithm does not fit the key's type (an EC key for RS256...)
                return None
            self._prepared[(jwk["kid"], alg)] = prepared
        return prepared

    def _find_key(self, kid: str | None) -> dict | None:
        if kid is None:  # no key id: only an issuer with a single key can be understood
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _fetch_keys(self, *, keep_on_failure: bool = False) -> None:
        """Fetch the issuer's key set; with `keep_on_failure`, an issuer that does not answer leaves
        the keys held (tried again after REFETCH_S) instead of refusing every token meanwhile."""
        async with self._fetch_lock():
            if self._keys_fetched and time.monotonic() - self._keys_fetched < 1.0:
                return  # another request fetched them while this one waited
            try:
                metadata = await self.metadata()
                if not metadata.jwks_uri:
                    raise IssuerUnreachable("its metadata names no jwks_uri, so no JWT can be checked")
                document = await _get_json(metadata.jwks_uri)
            except IssuerUnreachable as e:
                if not keep_on_failure or not self._keys:
                    raise
                log.error("OAuth: keeping the signing keys held: %s", e)
                self._keys_fetched = time.monotonic() - KEYS_MAX_AGE_S + REFETCH_S
                return
            keys = {}
            for jwk in document.get("keys", []) if isinstance(document, dict) else []:
                if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC", "OKP"):
                    continue  # symmetric keys are never trusted
                if jwk.get("use", "sig") != "sig":
                    continue
                keys[str(jwk.get("kid", ""))] = {**jwk, "kid": str(jwk.get("kid", ""))}
            self._keys = keys
            self._prepared = {}
            self._keys_fetched = time.monotonic()
            log.info("OAuth: %d signing keys from %s", len(keys), metadata.jwks_uri)

    def _fetch_lock(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock()
        return self._lock

    async def metadata(self) -> IssuerMetadata:
        """The issuer's metadata, fetched once; its `issuer` must be exactly the configured one."""
        if self._metadata is not None:
            return self._metadata
        problems = []
        for url in metadata_urls(self.issuer):
            try:
                document = await _get_json(url)
            except IssuerUnreachable as e:
                problems.append(str(e))
                continue
            if not isinstance(document, dict) or document.get("issuer") != self.issuer:
                found = document.get("issuer") if isinstance(document, dict) else None
                raise IssuerUnreachable(f"{url} names the issuer {found!r}, not {self.issuer!r}")
            self._metadata = IssuerMetadata(
                self.issuer, document.get("jwks_uri"), document.get("introspection_endpoint")
            )
            return self._metadata
        raise IssuerUnreachable("no metadata document: " + "; ".join(problems))

    # --- opaque tokens (RFC 7662 introspection) ----------------------------------------------

    async def _introspect(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).hexdigest()
        cached = self._introspected.get(digest)
        now = time.time()
        if cached is not None:
            if cached[0] > now:
                return cached[1]
            del self._introspected[digest]
        if self._client is None:
            log.info("OAuth: refused an opaque token (no --oauth-client-id to introspect it with)")
            return None
        metadata = await self.metadata()
        if not metadata.introspection_endpoint:
            log.info("OAuth: refused an opaque token (the issuer has no introspection endpoint)")
            return None
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
            try:
                response = await client.post(
                    metadata.introspection_endpoint,
                    data={"token": token, "token_type_hint": "access_token"},
                    auth=self._client,
                    headers={"Accept": "application/json"},
                )
            except httpx2.HTTPError as e:
                raise IssuerUnreachable(f"introspection failed: {e}") from None
        if response.status_code != 200:
            raise IssuerUnreachable(f"introspection answered HTTP {response.status_code}")
        try:
            claims = response.json()
        except ValueError:
            raise IssuerUnreachable("introspection answered something other than JSON") from None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            return None
        if claims.get("iss", self.issuer) != self.issuer:
            return None
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if not any(a in self.audiences for a in audiences):
            log.info("OAuth: refused an opaque token issued for %s", audiences or "no audience")
            return None
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and exp + self.leeway_s < now:
            return None
        access = self._access_token(token, {"iss": self.issuer, **claims})
        if len(self._introspected) >= INTROSPECTION_CACHE_SIZE:
            self._introspected.clear()
        until = now + INTROSPECTION_CACHE_S
        if isinstance(exp, (int, float)):
            until = min(until, exp + self.leeway_s)
        self._introspected[digest] = (until, access)
        return access

    def _access_token(self, token: str, claims: dict) -> AccessToken:
        client_id = claims.get("client_id") or claims.get("azp") or claims.get("sub") or "unknown"
        exp = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=str(client_id),
            scopes=token_scopes(claims),
            expires_at=int(exp + self.leeway_s) if isinstance(exp, (int, float)) else None,
            resource=self.resource_url,
            subject=str(claims["sub"]) if claims.get("sub") else str(client_id),
            claims={"iss": claims.get("iss")},
        )


def token_scopes(claims: dict) -> list[str]:
    """The scopes a token grants: `scope` (RFC 9068, RFC 7662: space-separated), or `scp` as Okta
    (a list) and Entra ID (space-separated) write it.

    >>> token_scopes({"scope": "kg:read graph:movies"}), token_scopes({"scp": ["kg:read"]})
    (['kg:read', 'graph:movies'], ['kg:read'])
    """
    for name in ("scope", "scp"):
        value = claims.get(name)
        if isinstance(value, str):
            return value.split()
        if isinstance(value, list):
            return [str(v) for v in value]
    return []


class IssuerUnreachable(Exception):
    """The issuer's metadata, keys or introspection could not be had: the token is refused."""


async def _get_json(url: str):
    try:
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S) as client:
            response = await client.get(url, headers={"Accept": "application/json"})
    except httpx2.HTTPError as e:
        raise IssuerUnreachable(f"{url}: {e}") from None
    if response.status_code != 200:
        raise IssuerUnreachable(f"{url} answered HTTP {response.status_code}")
    try:
        return json.loads(response.content)
    except ValueError:
        raise IssuerUnreachable(f"{url} answered something other than JSON") from None
