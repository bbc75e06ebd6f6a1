"""A real OpenID provider for the tests: npm `oidc-provider` (OpenID certified) run by tests/js/oidc_provider.mjs
on a loopback port, configured with the clients, users, resources and signing keys a test gives it;
given no key, it signs with one it makes at start (never oidc-provider's published development key).
It counts the requests each of its endpoints is sent (GET /_test/counts).

It issues RFC 9068 JWT access tokens bound to the resource indicator (RFC 8707) by client credentials
and by authorization code with PKCE (sign-in and consent are HTML forms: `sign_in` fills them over
HTTP, as a browser would), opaque tokens for the clients named opaque, and answers introspection.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from kg_mcp.cli.remote import TokensInMemory

from conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "js" / "oidc_provider.mjs"
NODE_MODULES = ROOT / ".npm-tools" / "node_modules"


def signing_key() -> dict:
    """A fresh P-256 private JWK with a key id (the provider signs ES256 with it)."""
    private = ec.generate_private_key(ec.SECP256R1())
    jwk = jwt.algorithms.ECAlgorithm.to_jwk(private, as_dict=True)
    return {**jwk, "kid": uuid.uuid4().hex[:16], "use": "sig", "alg": "ES256"}


def published_development_key() -> dict:
    """oidc-provider's quick-start signing key (a private RSA JWK) as its npm package publishes it:
    what an issuer must never sign with, since anyone can."""
    text = (NODE_MODULES / "oidc-provider" / "lib" / "consts" / "dev_keystore.js").read_text()
    return dict(re.findall(r"(\w+): '([^']*)'", text))


def require_provider() -> tuple[str, Path]:
    """node, and the provider script placed beside .npm-tools' node_modules (where node finds packages)."""
    node = shutil.which("node")
    if node is None or not (NODE_MODULES / "oidc-provider").is_dir():
        pytest.fail("Node.js and npm's oidc-provider are needed: run `make install-test`")
    # Copied whole, then renamed, under a name of this process: another xdist worker may run its own.
    script = NODE_MODULES.parent / f".oidc_provider.{os.getpid()}.mjs"
    staged = script.with_suffix(".tmp")
    shutil.copy(SCRIPT, staged)
    os.replace(staged, script)
    return node, script


class Provider:
    """One provider process; `restart(keys=...)` starts it again on the same port (a key rotation)."""

    def __init__(self, workdir: Path, config: dict):
        self.node, self.script = require_provider()
        self.workdir = workdir
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.config = {**config, "port": self.port}
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        path = self.workdir / f"oidc-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(self.config))
        self.process = subprocess.Popen(
            [self.node, str(self.script), str(path)],
            cwd=ROOT / ".npm-tools",
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.process.stdout.readline()
        if not line.startswith("ready"):
            self.stop()
            pytest.fail(f"oidc-provider did not start: {line} {self.process.stderr.read()[-2000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restart(self, **changes) -> None:
        self.stop()
        self.config.update(changes)
        self.start()

    def client_credentials(self, client_id: str, secret: str, resource: str, scope: str | None = None) -> dict:
        """The token response of a client-credentials grant for `resource`."""
        data = {"grant_type": "client_credentials", "resource": resource}
        if scope:
            data["scope"] = scope
        response = httpx2.post(f"{self.issuer}/token", data=data, auth=(client_id, secret), timeout=60)
        assert response.status_code == 200, response.text
        return response.json()


@contextmanager
def running_provider(workdir: Path, config: dict):
    provider = Provider(workdir, config)
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


async def sign_in(authorization_url: str, user: str, password: str) -> tuple[str, str | None, str | None]:
    """Follow an authorization URL as a browser would, fill the sign-in and consent forms, and
    return the redirect back to the client: (redirect URL, code, state)."""
    async with httpx2.AsyncClient(follow_redirects=False, timeout=60) as browser:
        url, form = authorization_url, None
        for _ in range(20):
            response = await (browser.post(url, data=form) if form is not None else browser.get(url))
            form = None
            if response.status_code in (302, 303):
                location = urljoin(url, response.headers["location"])
                if not location.startswith(authorization_url.split("/auth")[0]):
                    query = parse_qs(urlsplit(location).query)
                    return location, query.get("code", [None])[0], query.get("state", [None])[0]
                url = location
                continue
            assert response.status_code == 200, response.text[:500]
            action = urljoin(url, response.text.split('action="', 1)[1].split('"', 1)[0])
            form = {"login": user, "password": password} if "/login" in action else {}
            url = action
    raise AssertionError("the sign-in never came back to the client")


# The SDK's token storage in memory, as `kg-mcp call` keeps tokens for one command.
Memory = TokensInMemory
