"""Access tokens from an OAuth 2.1 authorization server, checked as the MCP authorization spec asks
of a resource server.

The issuer is named once (`--oauth-issuer`); everything else is read from its metadata document
(RFC 8414, or OpenID Connect discovery): its signing keys (`jwks_uri`) and, when it has one, its
introspection endpoint. A token is either

- a JWT access token (RFC 9068): signed by a key of the issuer's JWKS with an algorithm of
  ALGORITHMS (never `none`, never a shared-secret HMAC), `iss` the issuer, `aud` this server's
  resource URL (RFC 8707), within `exp` and `nbf` give or take LEEWAY_S, `exp`, `nbf` and `iat`
  numbers of seconds (a numeric string is refused: it would be read as no expiry); or
- an opaque token, asked of the issuer's introspection endpoint (RFC 7662) with this server's own
  client credentials: active, for this resource, not expired.

Signature checks are PyJWT's; this module only fetches, caches and compares. Keys are kept until
a token names a key id they lack (the issuer rotated its keys): the key set is then fetched again,
at most once every REFETCH_S, so tokens with made-up key ids cannot make the server hammer the
issuer. A key set holding a key published for anyone to sign with (kg_mcp.serving.published_keys)
is refused at start (`check_at_start`), and such a key is never trusted.

Introspection is what a forged token can make the server spend on the issuer, so it is bounded
three ways: a request that would need one is counted against its address's rate limit first
(`needs_issuer`, kg_mcp.serving.rate_limit.TokenChecks); answers are remembered by the token's
digest (active ones until INTROSPECTION_CACHE_S or their `exp`, inactive ones for INACTIVE_CACHE_S,
so a repeated forgery costs a lookup), and requests for one token already being asked about wait
for that answer; every request goes through one pooled client (kg_mcp.serving.issuer). Nothing
here logs a token.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import OrderedDict

import anyio
import jwt
from mcp.server.auth.provider import AccessToken

from kg_mcp.errors import ConfigError
from kg_mcp.serving.issuer import (
    IssuerClient,
    IssuerMetadata,
    IssuerUnreachable,
    check_issuer_url,
    fetch_at_start,
    metadata_urls,
    published_keys_in,
    read_metadata,
    signing_keys,
)

log = logging.getLogger(__name__)

# Asymmetric signatures only: an HMAC "signed" with a public key is the classic JWT forgery.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_S = 30.0  # clock skew allowed on exp, nbf and iat
REFETCH_S = 5.0  # an unknown key id fetches the key set again at most this often
KEYS_MAX_AGE_S = 3600.0  # keys are fetched again past this age, so a key the issuer withdrew stops working
INTROSPECTION_CACHE_S = 30.0  # an active opaque token is trusted this long before it is asked about again
INACTIVE_CACHE_S = 10.0  # an inactive one (forged, expired, revoked: it never turns active) is refused this long unasked
INTROSPECTION_CACHE_SIZE = 10_000  # of each kind; past it the oldest answer is forgotten
VERIFIED_CACHE_S = 60.0  # a JWT already checked is not checked again for this long (nor past its exp)
VERIFIED_CACHE_SIZE = 10_000
TIME_CLAIMS = ("exp", "nbf", "iat")
# RFC 9068 marks access tokens with typ at+jwt; Keycloak and Entra ID write JWT. An ID token (or any
# JWT the issuer made for someone else) is refused by its audience, which must be this server.
ACCEPTED_TYPES = {"at+jwt", "application/at+jwt", "jwt", None}

__all__ = ["ALGORITHMS", "IssuerUnreachable", "OAuthVerifier", "check_issuer_url", "metadata_urls", "token_scopes"]


class Remembered:
    """Answers kept by key until their own expiry, at most `size` of them (the oldest forgotten first)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[bytes, tuple[float, object]] = OrderedDict()

    def get(self, key: bytes, now: float):
        """The answer kept under `key` (None when there is none, or it has expired)."""
        found = self._items.get(key)
        if found is None:
            return None
        if found[0] <= now:
            del self._items[key]
            return None
        return found[1]

    def put(self, key: bytes, value: object, until: float) -> None:
        self._items[key] = (until, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __contains__(self, key: bytes) -> bool:
        found = self._items.get(key)
        return found is not None and found[0] > time.time()

    def __len__(self) -> int:
        return len(self._items)


_INACTIVE = object()  # what the inactive answers hold


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
        self._http = IssuerClient()
        self._metadata: IssuerMetadata | None = None
        self._keys: dict[str, dict] = {}  # key id -> JWK (public signing keys only)
        self._prepared: dict[tuple[str, str], jwt.PyJWK] = {}
        self._keys_fetched = 0.0  # monotonic time of the last fetch (0: never)
        self._next_fetch_at = 0.0  # monotonic time before which the key set is not asked for again
        self._fetch_failure = ""  # why the last attempt failed, for the requests that do not try again
        self._introspected = Remembered(INTROSPECTION_CACHE_SIZE)  # token digest -> AccessToken
        self._inactive = Remembered(INTROSPECTION_CACHE_SIZE)  # token digest -> _INACTIVE
        self._asking: dict[bytes, anyio.Event] = {}  # token digests being introspected now
        self._verified = Remembered(VERIFIED_CACHE_SIZE)
        self._lock: anyio.Lock | None = None

    def __repr__(self) -> str:
        return f"OAuthVerifier(issuer={self.issuer!r}, resource={self.resource_url!r})"

    @property
    def introspects(self) -> bool:
        """Whether opaque tokens are asked of the issuer (this server has a client of its own there)."""
        return self._client is not None

    def check_at_start(self) -> None:
        """Read the issuer's metadata and keys before serving: a ConfigError when its key set holds a
        key published for anyone to sign with; the keys held when it answers; a warning when it does not."""
        fetched = fetch_at_start(self.issuer)
        if fetched is None:
            return
        metadata, document = fetched
        published = published_keys_in(document)
        if published:
            raise ConfigError(
                f"The issuer {self.issuer} signs with {published[0]}: its private half is published, so anyone can "
                "sign a token it would accept. Give the issuer a key of its own (for oidc-provider, its `jwks` "
                "option), then start kg-mcp again."
            )
        self._metadata = metadata
        if metadata.jwks_uri:
            self._keys = signing_keys(document, metadata.jwks_uri)
            self._keys_fetched = time.monotonic()
            self._next_fetch_at = self._keys_fetched + REFETCH_S
            log.info("OAuth: %d signing keys from %s", len(self._keys), metadata.jwks_uri)

    def needs_issuer(self, token: str) -> bool:
        """Whether checking `token` would ask the issuer (an opaque token with no answer remembered):
        such a request is counted against its address before it is checked."""
        if self._client is None or token.count(".") == 2:
            return False
        digest = _digest(token)
        return digest not in self._introspected and digest not in self._inactive and digest not in self._asking

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's identity and scopes, or None when it is not one of ours (the SDK answers 401)."""
        try:
            if token.count(".") == 2:
                return await self._verify_jwt_once(token)
            return await self._introspect_once(token)
        except IssuerUnreachable as e:
            log.error("OAuth: cannot check a token with the issuer %s: %s", self.issuer, e)
            return None

    async def _verify_jwt_once(self, token: str) -> AccessToken | None:
        """A JWT checked once is trusted until it expires, for at most VERIFIED_CACHE_S: a client sends
        the same token with every request, and a signature check costs half a millisecond (bench/auth_checks.py)."""
        digest = _digest(token)
        now = time.time()
        cached = self._verified.get(digest, now)
        if cached is not None:
            return cached
        access = await self._verify_jwt(token)
        if access is not None:
            until = now + VERIFIED_CACHE_S
            if access.expires_at is not None:
                until = min(until, access.expires_at)
            self._verified.put(digest, access, until)
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
        # PyJWT reads a numeric string as a time; this server would read it as no expiry at all.
        if (bad := _not_a_time(claims)) is not None:
            log.info("OAuth: refused a token whose %s is not a number of seconds", bad)
            return None
        return self._access_token(token, claims)

    async def _signing_key(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        if not self._keys_fetched:
            await self._fetch_keys()
        elif time.monotonic() - self._keys_fetched > KEYS_MAX_AGE_S:
            await self._fetch_keys(keep_on_failure=True)
        jwk = self._find_key(kid)
        if jwk is None and time.monotonic() >= self._next_fetch_at:
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
        """Fetch the issuer's key set, at most once every REFETCH_S whatever the outcome: the requests
        that come meanwhile (or waited for this one) use the keys held, or are refused at once when
        none are. With `keep_on_failure`, an issuer that does not answer leaves the keys held
        instead of refusing every token meanwhile."""
        async with self._fetch_lock():
            now = time.monotonic()
            if now < self._next_fetch_at:  # asked REFETCH_S ago or less, by this request's turn or another's
                if not self._keys and not keep_on_failure:
                    raise IssuerUnreachable(self._fetch_failure or "its key set was asked for a moment ago")
                return
            self._next_fetch_at = now + REFETCH_S
            try:
                metadata = await self.metadata()
                if not metadata.jwks_uri:
                    raise IssuerUnreachable("its metadata names no jwks_uri, so no JWT can be checked")
                document = await self._http.get_json(metadata.jwks_uri)
            except IssuerUnreachable as e:
                self._fetch_failure = str(e)
                if not keep_on_failure or not self._keys:
                    raise
                log.error("OAuth: keeping the signing keys held: %s", e)
                return
            self._keys = signing_keys(document, metadata.jwks_uri)
            self._prepared = {}
            self._keys_fetched = time.monotonic()
            log.info("OAuth: %d signing keys from %s", len(self._keys), metadata.jwks_uri)

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
                document = await self._http.get_json(url)
            except IssuerUnreachable as e:
                problems.append(str(e))
                continue
            self._metadata = read_metadata(self.issuer, url, document)
            return self._metadata
        raise IssuerUnreachable("no metadata document: " + "; ".join(problems))

    # --- opaque tokens (RFC 7662 introspection) ----------------------------------------------

    async def _introspect_once(self, token: str) -> AccessToken | None:
        """The remembered answer for this token, or the issuer's; a token already being asked about
        waits for that answer instead of asking again."""
        digest = _digest(token)
        while True:
            now = time.time()
            if (access := self._introspected.get(digest, now)) is not None:
                return access
            if self._inactive.get(digest, now) is not None:
                return None
            asking = self._asking.get(digest)
            if asking is None:
                break
            await asking.wait()
            if digest not in self._introspected and digest not in self._inactive:
                return None  # that request failed (the issuer did not answer): this one fails alike
        self._asking[digest] = done = anyio.Event()
        try:
            access = await self._introspect(token)
        finally:
            del self._asking[digest]
            done.set()
        return access

    async def _introspect(self, token: str) -> AccessToken | None:
        digest, now = _digest(token), time.time()
        if self._client is None:
            log.info("OAuth: refused an opaque token (no --oauth-client-id to introspect it with)")
            return None
        metadata = await self.metadata()
        if not metadata.introspection_endpoint:
            log.info("OAuth: refused an opaque token (the issuer has no introspection endpoint)")
            return None
        claims = await self._http.post_form(
            metadata.introspection_endpoint, {"token": token, "token_type_hint": "access_token"}, self._client
        )
        access = self._active(token, claims, now)
        if access is None:
            self._inactive.put(digest, _INACTIVE, now + INACTIVE_CACHE_S)
            return None
        until = now + INTROSPECTION_CACHE_S
        if access.expires_at is not None:
            until = min(until, access.expires_at)
        self._introspected.put(digest, access, until)
        return access

    def _active(self, token: str, claims, now: float) -> AccessToken | None:
        """The token an introspection answer describes, when it is active and for this resource."""
        if not isinstance(claims, dict) or claims.get("active") is not True:
            return None
        if claims.get("iss", self.issuer) != self.issuer:
            return None
        audiences = claims.get("aud")
        audiences = [audiences] if isinstance(audiences, str) else audiences or []
        if not any(a in self.audiences for a in audiences):
            log.info("OAuth: refused an opaque token issued for %s", audiences or "no audience")
            return None
        if (bad := _not_a_time(claims)) is not None:
            log.info("OAuth: refused an opaque token whose %s is not a number of seconds", bad)
            return None
        exp = claims.get("exp")
        if exp is not None and exp + self.leeway_s < now:
            return None
        return self._access_token(token, {"iss": self.issuer, **claims})

    def _access_token(self, token: str, claims: dict) -> AccessToken:
        client_id = claims.get("client_id") or claims.get("azp") or claims.get("sub") or "unknown"
        exp = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=str(client_id),
            scopes=token_scopes(claims),
            expires_at=int(exp + self.leeway_s) if exp is not None else None,
            resource=self.resource_url,
            subject=str(claims["sub"]) if claims.get("sub") else str(client_id),
            claims={"iss": claims.get("iss")},
        )


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _not_a_time(claims: dict) -> str | None:
    """The first of exp, nbf and iat present that is not a finite number (bool is not one), or None.

    >>> _not_a_time({"exp": 1700000000, "iat": 1.5}), _not_a_time({"exp": "1700000000"}), _not_a_time({"nbf": True})
    (None, 'exp', 'nbf')
    """
    for name in TIME_CLAIMS:
        value = claims.get(name)
        if value is None and name not in claims:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return name
    return None


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
