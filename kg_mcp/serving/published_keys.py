"""Signing keys published with software for its quick start: their private halves ship in public
packages, so anyone can sign a token with them and a token they sign proves nothing. An issuer whose
key set holds one is refused when the server starts, and such a key is never trusted after
(kg_mcp.serving.oauth).

Keys are known by their RFC 7638 thumbprint (the SHA-256 of their public members), not by their key
id: the same key published again under another `kid` is still refused.
"""

from __future__ import annotations

import base64
import hashlib
import json

# thumbprint -> where the key was published
PUBLISHED = {
    # npm oidc-provider, lib/consts/dev_keystore.js: the keys it signs with when given none (its
    # "quick start"), kid keystore-CHANGE-ME, RSA 2048.
    "r1LkbBo3925Rb2ZFFrKyU3MVex9T2817Kx0vbi6i_Kc": "npm oidc-provider's quick-start development key (kid keystore-CHANGE-ME)",
}

# The public members of each key type, as RFC 7638 §3.2 lists them.
_MEMBERS = {"RSA": ("e", "kty", "n"), "EC": ("crv", "kty", "x", "y"), "OKP": ("crv", "kty", "x")}


def thumbprint(jwk: dict) -> str | None:
    """A JWK's RFC 7638 thumbprint (SHA-256, base64url), or None when it lacks a required member.

    >>> thumbprint({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AQ", "kid": "any"})
    'fpsA8udergWQQtZ5ijw9k_6RoFRa-SBsNr8jkweRkU4'
    """
    members = _MEMBERS.get(jwk.get("kty"))
    if members is None or not all(isinstance(jwk.get(m), str) for m in members):
        return None
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).rstrip(b"=").decode()


def published_as(jwk: dict) -> str | None:
    """Where `jwk` was published for anyone to sign with, or None for a key of one's own."""
    found = thumbprint(jwk)
    return PUBLISHED.get(found) if found else None
