"""kg-mcp as an OAuth 2.1 resource server, against a real OpenID provider (npm oidc-provider) on
loopback and a real `kg-mcp serve --oauth-issuer` subprocess, with the MCP SDK's own OAuth client.

The provider issues RFC 9068 JWT access tokens bound to the resource indicator; the server finds
its keys through its discovery document. Covered: discovery from the 401 (Protected Resource
Metadata), authorization code with PKCE signed in through the provider's forms, client credentials,
opaque tokens by introspection, the 403 scope challenge, and the tokens that must be refused
(another audience, expired, tampered, alg none, an HMAC made with the public key, an unknown key id,
times that are not numbers); a flood of forged opaque tokens counted against its address before the
issuer is asked; /metrics naming no one without its token; an issuer signing with a published
development key refused at start; then a key rotation.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from conftest import INITIALIZE, MCP_HEADERS, free_port, wait_for_http
from oidc import Memory, Provider, published_development_key, running_provider, sign_in, signing_key
from kg_mcp.errors import ConfigError
from kg_mcp.serving.auth import server_auth
from kg_mcp.serving.oauth import REFETCH_S
from kg_mcp.serving.published_keys import published_as

SECRET = "client-secret-" + "x" * 24
SERVER_SECRET = "kg-mcp-introspects-" + "y" * 20
METRICS_TOKEN = "metrics-scraper-" + "z" * 20
RATE_LIMIT = 40  # requests a minute per client (a subject, else an address)


ALL_SCOPES = "kg:read kg:sparql"
# What each machine client may have of kg-mcp (the provider's per-client grants for the resource).
MACHINES = {"reader-ci": "kg:read", "sparql-ci": ALL_SCOPES, "noread-ci": "kg:sparql", "short-ci": "kg:read",
            "opaque-ci": "kg:read", "kg-mcp": "kg:read"}


def machine(client_id: str) -> dict:
    return {
        "client_id": client_id,
        "client_secret": SERVER_SECRET if client_id == "kg-mcp" else SECRET,
        "grant_types": ["client_credentials"],
        "redirect_uris": [],
        "response_types": [],
        "scope": ALL_SCOPES,  # a client may ask for every scope kg-mcp lists, and gets its share
    }


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """The provider and a kg-mcp server (the demo KG, sparql on) that accepts its tokens."""
    work = tmp_path_factory.mktemp("oauth")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    resource = f"{base}/mcp"
    provider = Provider(
        work,
        {
            "keys": [signing_key()],
            "clients": [machine(name) for name in MACHINES],  # "kg-mcp": the server's own, to introspect
            "scope_by_client": MACHINES,
            "users": {
                "alice": {"password": "alice-pw", "scopes": ["kg:read", "kg:sparql"]},
                "bob": {"password": "bob-pw", "scopes": ["kg:read"]},
            },
            "resources": {
                resource: {"scope": ALL_SCOPES},
                f"{base}/other": {"scope": ALL_SCOPES},
            },
            "opaque_clients": ["opaque-ci"],
            "ttl_by_client": {"short-ci": 1},
        },
    )
    provider.start()
    audit = work / "audit.jsonl"
    env = {**os.environ, "KGSECRET": SERVER_SECRET, "KG_MCP_OAUTH_LEEWAY_S": "0", "KG_MCP_METRICS_TOKEN": METRICS_TOKEN}
    command = [
        "serve", "--transport", "http", "--port", str(port), "--enable-sparql", "--rate-limit", str(RATE_LIMIT),
        "--oauth-issuer", provider.issuer, "--public-url", resource,
        "--oauth-client-id", "kg-mcp", "--oauth-client-secret-env", "KGSECRET", "--audit-log", str(audit),
    ]
    log = open(work / "server.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "kg_mcp", *command], env=env, stdout=log, stderr=log)
    try:
        wait_for_http(base + "/", timeout=60)
        yield {"provider": provider, "base": base, "resource": resource, "audit": audit, "log": work / "server.log"}
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()
        provider.stop()


def initialize(team, token: str | None) -> httpx2.Response:
    headers = dict(MCP_HEADERS)
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.post(team["resource"], json=INITIALIZE, headers=headers, timeout=60)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer ...` header."""
    value = response.headers["www-authenticate"]
    assert value.startswith("Bearer ")
    params = {}
    for part in value[len("Bearer "):].split(", "):
        name, _, quoted = part.partition("=")
        params[name] = quoted.strip('"')
    return params


def audit_lines(team) -> list[dict]:
    return [json.loads(line) for line in team["audit"].read_text().splitlines()]


def test_discovery_starts_from_the_401(team):
    """No token: 401 pointing at the metadata, no error code; the metadata names the issuer and scopes."""
    response = initialize(team, None)
    assert response.status_code == 401
    params = challenge(response)
    assert "error" not in params
    metadata_url = params["resource_metadata"]
    assert metadata_url == team["base"] + "/.well-known/oauth-protected-resource/mcp"
    metadata = httpx2.get(metadata_url, timeout=60).json()
    assert metadata["resource"] == team["resource"]
    assert [s.rstrip("/") for s in metadata["authorization_servers"]] == [team["provider"].issuer]
    assert {"kg:read", "kg:sparql"} <= set(metadata["scopes_supported"])

    sent = initialize(team, "not-a-token-at-all")
    assert sent.status_code == 401
    assert challenge(sent)["error"] == "invalid_token"
    assert challenge(sent)["resource_metadata"] == metadata_url
    outcomes = [line["outcome"] for line in audit_lines(team) if line["kind"] == "http"]
    assert outcomes.count("401") >= 2


async def test_sdk_client_signs_in_with_authorization_code_and_pkce(team):
    """The SDK's OAuth client from nothing but the URL: discovery, registration, PKCE, sign-in, calls."""
    signed_in: dict = {}

    async def redirect(url: str) -> None:
        query = parse_qs(urlsplit(url).query)
        assert query["code_challenge_method"] == ["S256"] and query["resource"] == [team["resource"]]
        signed_in["redirect"], signed_in["code"], signed_in["state"] = await sign_in(url, "alice", "alice-pw")
        signed_in["iss"] = parse_qs(urlsplit(signed_in["redirect"]).query).get("iss", [None])[0]

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=signed_in["code"], state=signed_in["state"], iss=signed_in["iss"])

    storage = Memory()
    auth = OAuthClientProvider(
        team["resource"],
        OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"], client_name="pytest", grant_types=["authorization_code"]),
        storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
        async with Client(streamable_http_client(team["resource"], http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"search", "find_entities", "sparql"} <= tools  # alice holds kg:sparql
            found = await client.call_tool("find_entities", {"name": "Vincent van Gogh"})
            assert not found.is_error and found.structured_content["entities"]
            rows = await client.call_tool("sparql", {"query": "SELECT ?s WHERE { ?s ?p ?o } LIMIT 2"})
            assert not rows.is_error, rows.content
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["sub"] == "alice" and claims["aud"] == team["resource"]
    assert set(claims["scope"].split()) == {"kg:read", "kg:sparql"}
    calls = [line for line in audit_lines(team) if line["subject"] == "alice"]
    assert {("find_entities", "ok"), ("sparql", "ok")} <= {(line["name"], line["outcome"]) for line in calls}
    assert all(line["client_id"] == storage.client.client_id for line in calls)


async def test_machine_signs_in_with_client_credentials(team):
    """A script with client credentials; without kg:sparql the sparql tool is neither listed nor run."""
    auth = ClientCredentialsOAuthProvider(
        team["resource"], Memory(), "reader-ci", SECRET, scope="kg:read", issuer=team["provider"].issuer
    )
    async with httpx2.AsyncClient(auth=auth, timeout=60) as http:
        async with Client(streamable_http_client(team["resource"], http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert "search" in tools and "sparql" not in tools
            found = await client.call_tool("find_entities", {"name": "Vincent van Gogh"})
            assert not found.is_error
    token = team["provider"].client_credentials("reader-ci", SECRET, team["resource"], "kg:read")["access_token"]
    session = initialize(team, token)
    assert session.status_code == 200
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "sparql", "arguments": {"query": "ASK {}"}}}
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}", "Mcp-Session-Id": session.headers["mcp-session-id"]}
    refused = httpx2.post(team["resource"], json=call, headers=headers, timeout=60)
    assert refused.status_code == 403
    params = challenge(refused)
    assert params["error"] == "insufficient_scope" and params["scope"] == "kg:read kg:sparql"
    assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    lines = [line for line in audit_lines(team) if line["subject"] == "reader-ci"]
    assert ("find_entities", "ok") in {(line["name"], line["outcome"]) for line in lines}
    assert "403" in {line["outcome"] for line in lines}


def test_a_token_without_kg_read_gets_403(team):
    token = team["provider"].client_credentials("noread-ci", SECRET, team["resource"], "kg:sparql")["access_token"]
    response = initialize(team, token)
    assert response.status_code == 403
    assert challenge(response)["error"] == "insufficient_scope" and challenge(response)["scope"] == "kg:read"


def test_opaque_tokens_are_introspected(team):
    token = team["provider"].client_credentials("opaque-ci", SECRET, team["resource"], "kg:read")["access_token"]
    assert token.count(".") == 0
    assert initialize(team, token).status_code == 200
    assert initialize(team, token[:-2] + "xx").status_code == 401


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def test_tokens_that_must_be_refused(team):
    provider = team["provider"]
    good = provider.client_credentials("sparql-ci", SECRET, team["resource"], "kg:read kg:sparql")["access_token"]
    assert initialize(team, good).status_code == 200
    header, payload, signature = good.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))

    other = provider.client_credentials("sparql-ci", SECRET, team["base"] + "/other", "kg:read")["access_token"]
    tampered = ".".join([header, b64(json.dumps({**claims, "sub": "admin"}).encode()), signature])
    unsigned = ".".join([b64(b'{"alg":"none","typ":"at+jwt"}'), payload, ""])
    forger = signing_key()
    forged = jwt.encode(claims, jwt.PyJWK(forger).key, algorithm="ES256", headers={"kid": forger["kid"], "typ": "at+jwt"})
    public = jwt.PyJWK(provider.config["keys"][0]).key.public_key()
    pem = public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    # The old confusion attack: an HMAC keyed with the issuer's public key, which anyone has.
    hmac_header = b64(json.dumps({"alg": "HS256", "typ": "at+jwt", "kid": provider.config["keys"][0]["kid"]}).encode())
    signing_input = f"{hmac_header}.{payload}".encode()
    confused = f"{hmac_header}.{payload}.{b64(hmac.new(pem, signing_input, hashlib.sha256).digest())}"
    issuer_key = provider.config["keys"][0]

    def resigned(**changes) -> str:  # the claims changed and signed again with the issuer's own key
        headers = {"kid": issuer_key["kid"], "typ": "at+jwt"}
        return jwt.encode({**claims, **changes}, jwt.PyJWK(issuer_key).key, algorithm="ES256", headers=headers)

    assert initialize(team, resigned()).status_code == 200  # as issued, the signing is no reason to refuse
    short = provider.client_credentials("short-ci", SECRET, team["resource"], "kg:read")["access_token"]
    assert initialize(team, short).status_code == 200
    time.sleep(2.1)  # its one-second life is over (the server allows no leeway here)

    for name, token in {
        "another audience": other,
        "tampered": tampered,
        "alg none": unsigned,
        "unknown key": forged,
        "HMAC with the public key": confused,
        "expired": short,
        # Read as no expiry at all, a string exp would keep the token good for ever.
        "exp a numeric string": resigned(exp=str(claims["exp"])),
        "nbf a numeric string": resigned(nbf=str(claims["iat"])),
        "iat a numeric string": resigned(iat=str(claims["iat"])),
    }.items():
        response = initialize(team, token)
        assert response.status_code == 401, name
        assert challenge(response)["error"] == "invalid_token", name
    log = team["log"].read_text()
    assert good not in log and forged not in log  # no token is ever logged


def introspections(provider) -> int:
    """How many introspection requests the provider has been sent."""
    return httpx2.get(f"{provider.issuer}/_test/counts", timeout=60).json().get("/token/introspection", 0)


def from_address(address: str) -> httpx2.AsyncClient:
    """An HTTP client whose connections leave from another loopback address: another client to the server."""
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address), timeout=60)


async def initialize_from(http: httpx2.AsyncClient, team, token: str) -> httpx2.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return await http.post(team["resource"], json=INITIALIZE, headers=headers)


async def test_forged_opaque_tokens_spend_their_own_addresss_requests_only(team):
    """One address sends three times its rate limit of made-up opaque tokens at once: the issuer is
    asked about no more of them than the address's bucket holds, the rest are answered 429 before
    anything is asked, and a signed-in caller's token (answered before) still passes from that very
    address. A forged token sent again, or ten times at once, is answered from memory: the issuer is
    asked once."""
    provider = team["provider"]
    good = provider.client_credentials("reader-ci", SECRET, team["resource"], "kg:read")["access_token"]
    assert initialize(team, good).status_code == 200  # checked once, from 127.0.0.1
    asked = introspections(provider)
    forged = [secrets.token_urlsafe(32) for _ in range(3 * RATE_LIMIT)]
    started = time.monotonic()
    async with from_address("127.0.0.2") as http:
        answers = await asyncio.gather(*(initialize_from(http, team, token) for token in forged))
        elapsed = time.monotonic() - started
        bystander = await initialize_from(http, team, good)
    statuses = [answer.status_code for answer in answers]
    spent = introspections(provider) - asked
    assert set(statuses) == {401, 429}
    assert statuses.count(401) == spent  # each forged token let through was asked about once, no other
    assert spent <= RATE_LIMIT + math.ceil(RATE_LIMIT / 60 * elapsed)  # the bucket, and what refilled meanwhile
    assert all(a.headers["retry-after"] for a in answers if a.status_code == 429)
    assert "Too many requests" in next(a for a in answers if a.status_code == 429).json()["message"]
    assert bystander.status_code == 200

    refused_before = forged[statuses.index(401)]
    fresh = secrets.token_urlsafe(32)
    asked = introspections(provider)
    async with from_address("127.0.0.3") as http:
        again = await asyncio.gather(*(initialize_from(http, team, refused_before) for _ in range(10)))
        together = await asyncio.gather(*(initialize_from(http, team, fresh) for _ in range(10)))
    assert {a.status_code for a in again + together} == {401}
    assert introspections(provider) - asked == 1  # the fresh token, once for its ten requests


async def test_metrics_name_no_subject_without_their_own_token(team):
    token = team["provider"].client_credentials("reader-ci", SECRET, team["resource"], "kg:read")["access_token"]
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(team["resource"], http_client=http)) as client:
            assert not (await client.call_tool("find_entities", {"name": "Vincent van Gogh"})).is_error
    metrics = team["base"] + "/metrics"
    for refused in (httpx2.get(metrics, timeout=60), httpx2.get(metrics, headers={"Authorization": f"Bearer {token}"})):
        assert refused.status_code == 401 and "reader-ci" not in refused.text
        assert refused.json()["error_description"] == "/metrics needs its own token (KG_MCP_METRICS_TOKEN)."
    shown = httpx2.get(metrics, headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=60)
    assert shown.status_code == 200
    assert re.search(r'^kg_mcp_caller_tool_calls_total\{caller="reader-ci",outcome="ok"\} [1-9]', shown.text, re.M)


def test_an_issuer_signing_with_a_published_key_is_refused_at_start(tmp_path):
    """oidc-provider's quick-start key, even published under a key id of the issuer's own, stops the
    server before it serves; the test provider given no key makes one of its own, which is trusted."""
    resource = "http://127.0.0.1:9/mcp"
    config = {"clients": [machine("reader-ci")], "users": {}, "resources": {resource: {"scope": ALL_SCOPES}}}
    renamed = {**published_development_key(), "kid": "our-very-own-key"}
    with running_provider(tmp_path, {**config, "keys": [renamed], "alg": "RS256"}) as careless:
        with pytest.raises(ConfigError) as refused:
            server_auth(issuer=careless.issuer, public_url=resource)
    assert "quick-start development key" in str(refused.value) and "its `jwks` option" in str(refused.value)
    with running_provider(tmp_path, config) as own:
        keys = httpx2.get(f"{own.issuer}/jwks", timeout=60).json()["keys"]
        assert len(keys) == 1 and published_as(keys[0]) is None
        token = own.client_credentials("reader-ci", SECRET, resource, "kg:read")["access_token"]
        auth = server_auth(issuer=own.issuer, public_url=resource)
        assert jwt.get_unverified_header(token)["kid"] == keys[0]["kid"]
        assert asyncio.run(auth.verifier.verify_token(token)).subject == "reader-ci"


def test_a_rotated_key_is_fetched_on_its_first_token(team):
    """The provider starts signing with a new key: the server, holding the old key set, fetches it
    again on the first token naming the new key. Last in the file: it restarts the provider."""
    provider = team["provider"]
    old = provider.config["keys"]
    new = signing_key()
    assert initialize(team, provider.client_credentials("reader-ci", SECRET, team["resource"], "kg:read")["access_token"]).status_code == 200
    provider.restart(keys=[new, *old])  # the first key signs
    token = provider.client_credentials("reader-ci", SECRET, team["resource"], "kg:read")["access_token"]
    assert jwt.get_unverified_header(token)["kid"] == new["kid"]
    time.sleep(REFETCH_S)  # key sets are fetched again at most this often
    assert initialize(team, token).status_code == 200


def test_an_issuer_must_be_https_unless_on_loopback():
    from click.testing import CliRunner

    from kg_mcp.cli import main

    args = ["serve", "--transport", "http", "--public-url", "https://kg.example.org/mcp", "--oauth-issuer"]
    refused = CliRunner().invoke(main, [*args, "http://login.example.org"])
    assert refused.exit_code != 0 and "must be reached over https" in refused.output
    missing = CliRunner().invoke(main, ["serve", "--transport", "http", "--oauth-issuer", "https://login.example.org"])
    assert missing.exit_code != 0 and "needs --public-url" in missing.output


def test_an_issuers_keys_and_introspection_must_be_https_too():
    """Its metadata may name other hosts for its keys and its introspection: plain http there would
    let anyone on the way hand kg-mcp signing keys, or read the client secret."""
    from kg_mcp.serving.issuer import IssuerUnreachable, read_metadata

    issuer = "https://login.example.org/realms/team"
    good = read_metadata(issuer, issuer, {"issuer": issuer, "jwks_uri": "https://keys.example.org/jwks",
                                          "introspection_endpoint": "http://127.0.0.1:9000/introspect"})
    assert good.jwks_uri == "https://keys.example.org/jwks"
    for name in ("jwks_uri", "introspection_endpoint"):
        with pytest.raises(IssuerUnreachable, match=name):
            read_metadata(issuer, issuer, {"issuer": issuer, name: "http://keys.example.org/x"})


def test_an_issuer_that_stops_answering_is_asked_for_keys_once_per_interval(tmp_path, caplog):
    """With the issuer down, tokens naming key ids the server does not hold ask it for its key set
    once every REFETCH_S at most, not once each; a token signed with a key held is still checked."""
    import logging

    resource = "http://127.0.0.1:9/mcp"
    config = {"clients": [machine("reader-ci")], "users": {}, "resources": {resource: {"scope": ALL_SCOPES}}}
    stranger = signing_key()
    stranger_pem = jwt.algorithms.ECAlgorithm.from_jwk(json.dumps(stranger))

    async def check(verifier, tokens):
        return [await verifier.verify_token(t) for t in tokens]

    with running_provider(tmp_path, config) as provider:
        good = provider.client_credentials("reader-ci", SECRET, resource, "kg:read")["access_token"]
        verifier = server_auth(issuer=provider.issuer, public_url=resource).verifier
        claims = jwt.decode(good, options={"verify_signature": False})
        made_up = [jwt.encode(claims, stranger_pem, algorithm="ES256", headers={"kid": f"made-up-{i}"}) for i in range(20)]
        provider.stop()
        time.sleep(REFETCH_S)  # past the interval since the keys were fetched at start
        with caplog.at_level(logging.ERROR, logger="kg_mcp.serving.oauth"):
            checked = asyncio.run(check(verifier, [good, *made_up, good]))
    assert checked[0].subject == checked[-1].subject == "reader-ci" and not any(checked[1:-1])
    asked = [r for r in caplog.records if "keeping the signing keys held" in r.getMessage()]
    assert len(asked) == 1, [r.getMessage() for r in caplog.records]


def test_kg_mcp_call_checks_the_issuer_a_server_names_before_sending_a_secret_there():
    """`kg-mcp call --client-id` without --issuer takes the issuer from the server's Protected
    Resource Metadata: metadata describing another resource, or an issuer over plain http, is
    refused before the client's secret goes anywhere (RFC 9728 §3.3)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from click.testing import CliRunner

    from kg_mcp.cli import main

    served = {"resource": "", "issuer": ""}

    class Server(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):  # the MCP endpoint: sign in first
            self.send_response(401)
            prm = f"http://127.0.0.1:{self.server.server_port}/.well-known/oauth-protected-resource/mcp"
            self.send_header("WWW-Authenticate", f'Bearer resource_metadata="{prm}"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self):
            body = json.dumps({"resource": served["resource"], "authorization_servers": [served["issuer"]]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_port}/mcp"
    args = ["call", "--url", url, "--client-id", "nightly", "--client-secret-env", "NIGHTLY", "find_entities", "{}"]
    try:
        for resource, issuer, said in [
            ("https://elsewhere.example.org/mcp", "https://login.example.org", "not " + url),
            (url, "http://login.example.org", "not an https URL"),
        ]:
            served.update(resource=resource, issuer=issuer)
            result = CliRunner(env={"NIGHTLY": SECRET}).invoke(main, args)
            assert result.exit_code != 0 and said in result.output and "--issuer" in result.output, result.output
    finally:
        httpd.shutdown()


def test_a_published_key_is_known_however_its_numbers_are_written():
    """The thumbprint is RFC 7638's (its own example key), and the published development key written
    with a leading zero byte or with padding, which PyJWT reads as the same key, is still refused."""
    from kg_mcp.serving.published_keys import thumbprint

    example = {"kty": "RSA", "e": "AQAB", "n": (
        "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjB"
        "ZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8"
        "KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_x"
        "BniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw")}
    assert thumbprint(example) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
    dev = {k: v for k, v in published_development_key().items() if k in ("kty", "n", "e", "kid")}
    zero = base64.urlsafe_b64encode(b"\0" + base64.urlsafe_b64decode(dev["n"] + "==")).rstrip(b"=").decode()
    for written in ({**dev, "n": zero}, {**dev, "n": dev["n"] + "==", "e": dev["e"] + "="}):
        assert jwt.PyJWK(written, algorithm="RS256").key.public_numbers() == jwt.PyJWK(dev, algorithm="RS256").key.public_numbers()
        assert published_as(written) is not None


def test_an_issuer_that_never_answers_holds_the_start_once(monkeypatch):
    """The key check at start waits START_TIMEOUT_S in all, not per request: an issuer that takes the
    connection and never answers gets one request, not one for each place its metadata may be."""
    import socket
    import threading

    from kg_mcp.serving import issuer as issuer_module

    monkeypatch.setattr(issuer_module, "START_TIMEOUT_S", 1.0)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted = []

    def hold():
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            accepted.append(connection)  # read nothing, answer nothing

    threading.Thread(target=hold, daemon=True).start()
    try:
        assert issuer_module.fetch_at_start(f"http://127.0.0.1:{listener.getsockname()[1]}") is None
        assert len(accepted) == 1
    finally:
        listener.close()
        for connection in accepted:
            connection.close()
