"""Signing keys published with software for its quick start: their private halves ship in public
packages, so anyone can sign a token with them and a token they sign proves nothing. An issuer whose
key set holds one is refused when the server starts, and such a key is never trusted after
(kg_mcp.serving.oauth).

Keys are known by their RFC 7638 thumbprint (the SHA-256 of their public members), not by their key
id: the same key published again under another `kid` is still refused.
"""

from __future__ import annotations

import base64
import binascii
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


_EC_SIZES = {"P-256": 32, "P-384": 48, "P-521": 66}  # bytes of a coordinate (RFC 7518 §6.2.1.2)


def thumbprint(jwk: dict) -> str | None:
    """A JWK's RFC 7638 thumbprint (SHA-256, base64url) of its public numbers written canonically,
    or None when it lacks a required member. Canonically: PyJWT reads an RSA number with leading
    zero bytes, or any member with `=` padding, as the same key, so the same key written so must
    get the same thumbprint.

    >>> thumbprint({"kty": "EC", "crv": "P-256", "x": "AA", "y": "AQ"}) == thumbprint(
    ...     {"kty": "EC", "crv": "P-256", "x": "A" * 43, "y": "A" * 42 + "E", "kid": "any"})
    True
    >>> thumbprint({"kty": "RSA", "e": "AQAB", "n": "AKk"}) == thumbprint({"kty": "RSA", "e": "AQAB==", "n": "qQ"})
    True
    """
    kty = jwk.get("kty")
    members = _MEMBERS.get(kty)
    if members is None or not all(isinstance(jwk.get(m), str) for m in members):
        return None
    canonical = {}
    for member in members:
        value = jwk[member]
        if member not in ("kty", "crv"):
            try:
                raw = base64.urlsafe_b64decode(value + "=" * (-len(value.rstrip("=")) % 4))
            except (binascii.Error, ValueError):
                return None
            if kty == "RSA":
                raw = raw.lstrip(b"\0") or b"\0"  # an integer: its minimal big-endian bytes
            elif (size := _EC_SIZES.get(jwk.get("crv", ""))) and len(raw.lstrip(b"\0")) <= size:
                raw = raw.lstrip(b"\0").rjust(size, b"\0")  # a coordinate: the curve's full length
            value = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        canonical[member] = value
    text = json.dumps(canonical, separators=(",", ":"), sort_keys=True)
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


def published_as(jwk: dict) -> str | None:
    """Where `jwk` was published for anyone to sign with, or None for a key of one's own."""
    found = thumbprint(jwk)
    return PUBLISHED.get(found) if found else None
