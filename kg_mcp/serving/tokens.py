"""Named static tokens for scripts and CI (`--tokens FILE`), and the verifiers chained together.

The file is TOML, one table per token; the file holds only each token's SHA-256, never the token:

    [tokens.nightly-eval]
    sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
    scopes = ["kg:read", "graph:movies"]

The table's name is the caller's identity (the subject of audit lines and per-caller state). The
file is read again when it changes (looked at no more than once a second), so removing a table
revokes that token without a restart; a file that no longer parses keeps the last good one in
force and says so in the log. `kg-mcp token NAME` makes a token and prints its table.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from mcp.server.auth.provider import AccessToken

from kg_mcp.errors import ConfigError
from kg_mcp.serving import scopes as scope_names
from kg_mcp.settings import read_toml_file

log = logging.getLogger(__name__)

RECHECK_S = 1.0
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,100}")


@dataclass(frozen=True)
class NamedToken:
    name: str
    digest: bytes  # SHA-256 of the token
    scopes: tuple[str, ...]


def read_tokens_file(path: Path) -> list[NamedToken]:
    """The tokens of `path`, or a ConfigError that says which table is wrong and how."""
    document = read_toml_file(path, "tokens file")
    unknown = set(document) - {"tokens"}
    if unknown:
        raise ConfigError(f"The tokens file {path} has {', '.join(sorted(unknown))}: only [tokens.NAME] tables belong there.")
    tables = document.get("tokens", {})
    if not isinstance(tables, dict):
        raise ConfigError(f"The tokens file {path}: write each token as a table [tokens.NAME].")
    tokens, seen = [], {}
    for name, table in tables.items():
        where = f"The tokens file {path}, [tokens.{name}]"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{where}: a name is 1-100 letters, digits and . _ @ -")
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: give sha256 and scopes.")
        extra = set(table) - {"sha256", "scopes"}
        if extra:
            raise ConfigError(f"{where} has {', '.join(sorted(extra))}: a table holds sha256 and scopes only.")
        digest = table.get("sha256")
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest.lower()):
            raise ConfigError(
                f"{where}: sha256 must be the token's SHA-256 in 64 hex digits (kg-mcp token {name} makes one)."
            )
        granted = table.get("scopes", [scope_names.READ])
        if not isinstance(granted, list) or not all(isinstance(s, str) and s for s in granted):
            raise ConfigError(f'{where}: scopes is a list of strings, e.g. ["kg:read"].')
        if digest.lower() in seen:
            raise ConfigError(f"{where} has the same token as [tokens.{seen[digest.lower()]}].")
        seen[digest.lower()] = name
        tokens.append(NamedToken(name, bytes.fromhex(digest), tuple(granted)))
    return tokens


class NamedTokens:
    """The SDK's TokenVerifier over a tokens file, read again when it changes."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._tokens = read_tokens_file(self.path)
        self._stamp = self._file_stamp()
        self._checked = time.monotonic()
        log.info("tokens file %s: %d tokens", self.path, len(self._tokens))

    def __repr__(self) -> str:
        return f"NamedTokens({str(self.path)!r})"

    @property
    def _tokens(self) -> list[NamedToken]:
        return list(self._by_digest.values())

    @_tokens.setter
    def _tokens(self, tokens: list[NamedToken]) -> None:
        self._by_digest = {named.digest: named for named in tokens}

    async def verify_token(self, token: str) -> AccessToken | None:
        found = self._find(token)
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.name, scopes=list(found.scopes), subject=found.name)

    def knows(self, token: str) -> bool:
        return self._find(token) is not None

    def _find(self, token: str) -> NamedToken | None:
        self._reload_if_changed()
        # Looked up by the token's SHA-256: how long the lookup takes can tell at most something of a
        # digest, from which no token can be worked back; the match is confirmed in constant time.
        digest = hashlib.sha256(token.encode()).digest()
        found = self._by_digest.get(digest)
        if found is None or not hmac.compare_digest(digest, found.digest):
            return None
        return found

    def _file_stamp(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _reload_if_changed(self) -> None:
        now = time.monotonic()
        if now - self._checked < RECHECK_S:
            return
        self._checked = now
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        if stamp is None:
            log.error("tokens file %s is gone: no named token is accepted until it is back", self.path)
            self._tokens = []
            return
        try:
            self._tokens = read_tokens_file(self.path)
        except ConfigError as e:
            log.error("%s Keeping the tokens read before.", e)
            return
        log.info("tokens file %s read again: %d tokens", self.path, len(self._tokens))


class FirstOf:
    """Tries verifiers in order; the first that knows the token answers."""

    def __init__(self, verifiers: list):
        self.verifiers = verifiers

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None

    def needs_issuer(self, token: str) -> bool:
        """Whether the issuer would be asked about `token`: none of the verifiers tried before the
        OAuth one (kg_mcp.serving.oauth) knows it, and that one would ask."""
        for verifier in self.verifiers:
            if hasattr(verifier, "needs_issuer"):
                return verifier.needs_issuer(token)
            if verifier.knows(token):
                return False
        return False

    def __repr__(self) -> str:
        return f"FirstOf({self.verifiers!r})"


def new_token(name: str, scopes: list[str]) -> tuple[str, str]:
    """A fresh token and the TOML table that admits it (its SHA-256, never the token itself)."""
    if not _NAME.fullmatch(name):
        raise ConfigError("A token's name is 1-100 letters, digits and . _ @ -")
    token = secrets.token_urlsafe(32)
    digest = hashlib.sha256(token.encode()).hexdigest()
    listed = ", ".join(f'"{s}"' for s in scopes)
    return token, f'[tokens.{name}]\nsha256 = "{digest}"\nscopes = [{listed}]\n'
