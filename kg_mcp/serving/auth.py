"""Bearer-token auth for the HTTP transports: one shared token, from an environment variable or a file."""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from kg_mcp.errors import ConfigError

MIN_TOKEN_LENGTH = 16


class StaticTokenVerifier:
    """Accepts exactly one token, compared in constant time; the token is never logged."""

    def __init__(self, token: str):
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigError(f"The auth token must be at least {MIN_TOKEN_LENGTH} characters long.")
        self._token = token.encode()

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token):
            return AccessToken(token=token, client_id="kg-mcp-client", scopes=[])
        return None

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
