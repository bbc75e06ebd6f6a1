"""What checking a caller costs per request: each verifier's `verify_token`, against the one shared
token's constant-time compare measured in the same run.

    python -m bench.auth_checks [--calls N]

The OAuth verifier reads a real issuer's metadata and keys over loopback HTTP (a small server in
this process serving a discovery document and a JWKS); its keys are then held, so "first sight" is
the signature and claim checks of a token not seen before, and "again" the same token on a later
request (checked tokens are remembered for up to 60 s). Named tokens: a file of 10 and of 1,000.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from bench.common import free_port
from kg_mcp.serving.auth import StaticTokenVerifier
from kg_mcp.serving.oauth import OAuthVerifier
from kg_mcp.serving.tokens import NamedTokens, new_token

RESOURCE = "http://127.0.0.1:8000/mcp"


def issuer_server(port: int, keys: list[dict]) -> ThreadingHTTPServer:
    issuer = f"http://127.0.0.1:{port}"
    documents = {
        "/.well-known/oauth-authorization-server": {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"},
        "/jwks": {"keys": keys},
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(documents.get(self.path)).encode()
            self.send_response(200 if self.path in documents else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def signed(private, alg: str, kid: str, issuer: str) -> str:
    now = int(time.time())
    claims = {"iss": issuer, "aud": RESOURCE, "sub": "alice", "client_id": "bench", "scope": "kg:read",
              "iat": now, "exp": now + 3600}
    return jwt.encode(claims, private, algorithm=alg, headers={"kid": kid, "typ": "at+jwt"})


class Uncached:
    """The verifier's full check (keys held, signature and claims), as for a token not seen before."""

    def __init__(self, verifier: OAuthVerifier):
        self.verifier = verifier

    async def verify_token(self, token: str):
        return await self.verifier._verify_jwt(token)


async def per_call_us(verifier, token: str, calls: int) -> float:
    assert await verifier.verify_token(token) is not None  # warm: keys fetched, file read
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(calls):
            await verifier.verify_token(token)
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(samples)


async def measure(calls: int) -> list[tuple[str, float]]:
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    ec_key, rsa_key = ec.generate_private_key(ec.SECP256R1()), rsa.generate_private_key(65537, 2048)
    keys = [
        {**jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True), "kid": "ec", "use": "sig"},
        {**jwt.algorithms.RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True), "kid": "rsa", "use": "sig"},
    ]
    server = issuer_server(port, keys)
    shared = "shared-token-" + "x" * 30
    rows = [("shared token (baseline)", await per_call_us(StaticTokenVerifier(shared), shared, calls))]
    with tempfile.TemporaryDirectory() as work:
        for count in (10, 1000):
            made = [new_token(f"job{i}", ["kg:read"]) for i in range(count)]
            path = Path(work) / f"tokens{count}.toml"
            path.write_text("\n".join(table for _, table in made))
            rows.append((f"named tokens, a file of {count}", await per_call_us(NamedTokens(path), made[-1][0], calls)))
    oauth = OAuthVerifier(issuer, RESOURCE)
    for alg, private, kid in (("ES256", ec_key, "ec"), ("RS256", rsa_key, "rsa")):
        token = signed(private, alg, kid, issuer)
        rows.append((f"OAuth JWT {alg}, first sight", await per_call_us(Uncached(oauth), token, calls // 4)))
        rows.append((f"OAuth JWT {alg}, again", await per_call_us(oauth, token, calls)))
    server.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rows = asyncio.run(measure(args.calls))
    baseline = rows[0][1]
    print(f"{'verifier':34} {'µs per token':>13} {'ratio':>8}")
    for name, us in rows:
        print(f"{name:34} {us:13.1f} {us / baseline:8.1f}")


if __name__ == "__main__":
    main()
