"""The team deployment as deploy/ ships it and docs/team/deploy.md and signin.md set it up, run for
real (bench/team_rig.py): nginx from deploy/nginx/kg-mcp.conf (only its ports and certificate paths
replaced) ending TLS with a certificate of the team's own CA; replicas as deploy/systemd/kg-mcp@.service
starts them, with deploy/kg-mcp.env read as systemd reads it and as a shell sources it, each opening
one store read-only; Debian's Redis; and an OpenID provider (npm oidc-provider, tests/oidc.py).

The issue's done-when, shortened (bench/team.py runs the 40 s load): a person signs in with the MCP
SDK's OAuth client from nothing but the public URL; a caller granted two graphs finds names on its
first lookup; a script signs in with client credentials through `kg-mcp call`; six clients of mixed
calls lose nothing while one replica is SIGKILLed; a replica stopped either way leaves no process.
"""

from __future__ import annotations

import asyncio
import gc
import json
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata

from bench.env_file import shell_environment, systemd_environment
from bench.team import TRAVERSALS, reference_traversals, run_load, traverse
from bench.team_rig import (SHIPPED_ENV, SHIPPED_NGINX, SHIPPED_UNIT, Team, nginx_prefix, shipped_config_for,
                            shipped_env_for, tool_counts)
from conftest import free_port
from kg_mcp.cli import main
from kg_mcp.serving.tokens import new_token
from oidc import Memory, running_provider, sign_in, signing_key

LOAD_S, KILL_AT_S = 10.0, 3.0
DEPLOY_DOC = Path(__file__).resolve().parents[1] / "docs" / "team" / "deploy.md"
MOVIES, PEOPLE = "http://example.org/graph/movies", "http://example.org/graph/people"
SCOPES = "kg:read kg:sparql graph:movies graph:people"
NIGHTLY_SECRET = "nightly-secret-" + "n" * 24


def test_the_shipped_nginx_config_passes_nginx_t(tmp_path):
    import trustme

    cert = trustme.CA().issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "c.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "k.pem"))
    text = shipped_config_for([9001, 9002], 9443, 9080, tmp_path / "c.pem", tmp_path / "k.pem")
    assert text.count("server 127.0.0.1:") == 2 and "listen 127.0.0.1:9443 ssl;" in text
    check = nginx_prefix(tmp_path / "nginx", text)
    assert check.returncode == 0 and "test is successful" in check.stderr, check.stderr
    broken = nginx_prefix(tmp_path / "broken", text.replace("proxy_buffering off;", "proxy_buffering of;"))
    assert broken.returncode != 0  # nginx -t does read what it is given
    shipped = SHIPPED_NGINX.read_text()
    for directive in ("proxy_buffering off;", "non_idempotent", "proxy_set_header X-Request-ID $request_id;",
                      "client_max_body_size 256k;", "client_header_timeout 10s;", "limit_conn kg_mcp_connections 256;"):
        assert directive in shipped


def test_the_env_file_reads_alike_sourced_and_as_systemd_reads_it(tmp_path):
    """deploy/kg-mcp.env as shipped and as the team test fills it gives the same variables to systemd
    and to a shell; the form that broke when sourced (a JSON list) does differ, and kg-mcp reads both."""
    from kg_mcp.settings import words

    shipped = systemd_environment(SHIPPED_ENV)
    assert shipped == shell_environment(SHIPPED_ENV)
    assert shipped["KG_MCP_TRUSTED_PROXIES"] == "127.0.0.1" and shipped["KG_MCP_AUTH_TOKEN_FILE"] == "/etc/kg-mcp/token"
    filled = tmp_path / "filled.env"
    filled.write_text(shipped_env_for({"KG_MCP_OAUTH_ISSUER": "https://login.example.org/realms/team",
                                       "KG_MCP_AUTH_TOKEN_FILE": None, "KG_MCP_AUDIT_LOG": "journald"}))
    read = systemd_environment(filled)
    assert read == shell_environment(filled) and "KG_MCP_AUTH_TOKEN_FILE" not in read
    assert read["KG_MCP_OAUTH_ISSUER"] == "https://login.example.org/realms/team" and read["KG_MCP_AUDIT_LOG"] == "journald"
    old = tmp_path / "old.env"
    old.write_text('KG_MCP_TRUSTED_PROXIES=["127.0.0.1"]\n')
    as_systemd, as_shell = systemd_environment(old)["KG_MCP_TRUSTED_PROXIES"], shell_environment(old)["KG_MCP_TRUSTED_PROXIES"]
    assert (as_systemd, as_shell) == ('["127.0.0.1"]', "[127.0.0.1]")
    assert words(as_systemd) == words(as_shell) == ["127.0.0.1"]


def test_the_unit_passes_systemd_analyze_and_may_write_where_the_audit_log_goes(tmp_path):
    """systemd's own check of deploy/systemd/kg-mcp@.service (the command put where this machine has
    one); and under ProtectSystem=strict, the folder of the unit's audit log is one it may write."""
    text = SHIPPED_UNIT.read_text()
    unit = tmp_path / "kg-mcp@8001.service"
    unit.write_text(text.replace("/opt/kg-mcp/.venv/bin/kg-mcp", str(Path(sys.executable).resolve())))
    checked = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    broken = tmp_path / "broken@8001.service"
    broken.write_text(unit.read_text().replace("ReadOnlyPaths=", "ReadOnlyPahts="))
    assert "Unknown key" in subprocess.run(["systemd-analyze", "verify", str(broken)], capture_output=True, text=True).stderr
    assert "ProtectSystem=strict" in text
    audit = re.search(r"^Environment=KG_MCP_AUDIT_LOG=(\S+)$", text, re.M).group(1)
    writable = re.search(r"^ReadWritePaths=(.*)$", text, re.M).group(1).split()
    assert str(Path(audit).parent) in writable and "LogsDirectory=kg-mcp" in text


def test_the_docs_certificate_commands_make_a_team_ca_that_nginx_serves_and_clients_trust(tmp_path):
    """docs/team/deploy.md step 4, its openssl commands run as written (in this test's folder): nginx
    takes the certificate with the shipped config, and a client trusting the team's CA connects to
    kg.example.org over TLS with it."""
    steps = re.search(r"\*\*4\. Certificates\.\*\*.*?```bash\n(.*?)```", DEPLOY_DOC.read_text(), re.S).group(1)
    assert steps.startswith("cd /etc/kg-mcp && mkdir -p tls && cd tls\n")
    made = subprocess.run(["bash", "-e", "-c", steps.replace("cd /etc/kg-mcp && mkdir -p tls && cd tls", "")],
                          cwd=tmp_path, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    site = shipped_config_for([9001], 9443, 9080, tmp_path / "fullchain.pem", tmp_path / "privkey.pem")
    check = nginx_prefix(tmp_path / "nginx", site)
    assert check.returncode == 0 and "test is successful" in check.stderr, check.stderr

    server_side = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_side.load_cert_chain(tmp_path / "fullchain.pem", tmp_path / "privkey.pem")
    client_side = ssl.create_default_context(cafile=str(tmp_path / "team-ca.pem"))
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=lambda: server_side.wrap_socket(theirs, server_side=True).close())
    served.start()
    with client_side.wrap_socket(ours, server_hostname="kg.example.org") as tls:
        assert tls.getpeercert()["subjectAltName"] == (("DNS", "kg.example.org"),)
    served.join(10)
    with pytest.raises(ssl.SSLCertVerificationError):  # and a client that does not trust the CA refuses it
        ours, theirs = socket.socketpair()
        threading.Thread(target=lambda: _quietly(lambda: server_side.wrap_socket(theirs, server_side=True))).start()
        ssl.create_default_context().wrap_socket(ours, server_hostname="kg.example.org")


def test_cacert_adds_the_team_ca_to_the_system_s_cas(tmp_path, monkeypatch):
    """`kg-mcp call --cacert team-ca.pem` trusts the team's CA beside the system's, not instead of
    them: the server's certificate may come from the team's CA and the issuer's from a public one.
    A stand-in public CA is made the system's with SSL_CERT_FILE, which OpenSSL's defaults read."""
    import trustme

    from kg_mcp.cli.remote import Remote

    team, public, stranger = trustme.CA(), trustme.CA(), trustme.CA()
    team.cert_pem.write_to_path(str(tmp_path / "team-ca.pem"))
    public.cert_pem.write_to_path(str(tmp_path / "system.pem"))
    (tmp_path / "no-certs").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "system.pem"))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-certs"))
    context = Remote("https://kg.example.org/mcp", cacert=str(tmp_path / "team-ca.pem")).verify()
    assert _handshake(context, team, "kg.example.org") == (("DNS", "kg.example.org"),)  # the server
    assert _handshake(context, public, "login.example.org") == (("DNS", "login.example.org"),)  # its issuer
    with pytest.raises(ssl.SSLCertVerificationError):  # verification is still on
        _handshake(context, stranger, "kg.example.org")


def _handshake(client: ssl.SSLContext, ca, name: str):
    """The subjectAltName a client with `client` accepts from a server whose certificate for `name`
    `ca` issued, over a socket pair (no network)."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(name).configure_cert(server)
    ours, theirs = socket.socketpair()
    served = threading.Thread(target=lambda: _quietly(lambda: server.wrap_socket(theirs, server_side=True).close()))
    served.start()
    try:
        with client.wrap_socket(ours, server_hostname=name) as tls:
            return tls.getpeercert()["subjectAltName"]
    finally:
        ours.close()
        served.join(10)
        theirs.close()


def _quietly(action) -> None:
    try:
        action()
    except (ssl.SSLError, OSError):
        pass


@pytest.fixture(scope="module")
def team_store(tmp_path_factory, data_dir):
    """The store as docs/team/signin.md makes one: films (MetaQA) and people (PathQuestion) each in
    a named graph (`kg-mcp load --graph`), then the name index of every set of graphs the access file
    can grant (`kg-mcp index --graph-access`), before any replica opens it read-only. The films are
    MetaQA's triples around the topics the load below calls on (its every path starts there), a
    twentieth of the KB, which keeps the store's making to seconds."""
    work = tmp_path_factory.mktemp("team-store")
    store = work / "kg" / "store"
    access = work / "access.toml"
    access.write_text(f'[scopes]\n"graph:movies" = ["{MOVIES}"]\n"graph:people" = ["{PEOPLE}"]\n')
    films = work / "films.txt"
    films.write_text(around(data_dir / "metaqa" / "kb.txt", {"Catch Me If You Can", "Forrest Gump", "Steven Spielberg",
                                                             "Tom Hanks"}))
    runner = CliRunner()
    for source, graph in ((films, MOVIES), (data_dir / "pathquestion" / "2H-kb.txt", PEOPLE)):
        loaded = runner.invoke(main, ["load", str(source), "--store", str(store), "--graph", graph])
        assert loaded.exit_code == 0, loaded.output
        assert re.search(rf"name index of <{graph}>: [1-9][\d,]* names", loaded.output), loaded.output
    indexed = runner.invoke(main, ["index", "--store", str(store), "--graph-access", str(access)])
    assert indexed.exit_code == 0, indexed.output
    assert re.search(rf"name index of {MOVIES}, {PEOPLE}: [1-9][\d,]* names", indexed.output), indexed.output
    return store, access


def around(kb: Path, topics: set[str]) -> str:
    """The lines of a MetaQA KB (`head|relation|tail`) that touch the topics or a neighbour of one."""
    lines = kb.read_text(encoding="utf-8").splitlines()
    near = set(topics)
    for line in lines:
        head, _, tail = line.split("|")
        if head in topics or tail in topics:
            near |= {head, tail}
    return "".join(line + "\n" for line in lines if line.split("|")[0] in near or line.split("|")[2] in near)


async def alice_signs_in(url: str, ca_file) -> dict:
    """The MCP SDK's OAuth client given nothing but the public URL: the 401 through nginx names the
    metadata, the metadata the issuer; it registers, signs Alice in with PKCE, then calls."""
    seen: dict = {}

    async def redirect(authorization_url: str) -> None:
        seen["redirect"], seen["code"], seen["state"] = await sign_in(authorization_url, "alice", "alice-pw")
        seen["iss"] = parse_qs(urlsplit(seen["redirect"]).query).get("iss", [None])[0]

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=seen["code"], state=seen["state"], iss=seen["iss"])

    storage = Memory()
    auth = OAuthClientProvider(
        url, OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"], client_name="alice's client",
                                 grant_types=["authorization_code"]),
        storage, redirect_handler=redirect, callback_handler=callback)
    async with httpx2.AsyncClient(auth=auth, verify=ssl.create_default_context(cafile=str(ca_file)), timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            seen["first"] = (await client.call_tool("find_entities", {"name": "Ludwig II of Bavaria"})).structured_content
            seen["film"] = (await client.call_tool("find_entities", {"name": "Catch Me If You Can"})).structured_content
            seen["stats"] = json.loads((await client.read_resource("kg://stats")).contents[0].text)
    seen["scopes"] = set(storage.tokens.scope.split())
    return seen


def kg_mcp_call(team: Team, *options: str, env: dict | None = None):
    arguments = json.dumps({"name": "Ludwig II of Bavaria"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        result = CliRunner(env=env).invoke(main, ["call", "--url", team.url, "--cacert", str(team.ca_file), *options,
                                                  "--json", "find_entities", arguments])
        gc.collect()
    # the command closes the connections it opened, whatever the server answered
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []
    return result


@pytest.mark.timeout(400)  # a bound on hanging: three replicas' start, a sign-in, 10 s of load, two stops
def test_the_team_as_the_docs_set_it_up(team_store, tmp_path):
    store, access = team_store
    https_port = free_port()
    url = f"https://127.0.0.1:{https_port}/mcp"
    tokens = {"load": new_token("load", ["kg:read", "kg:all-graphs"]), "noread": new_token("noread", ["graph:people"])}
    (tmp_path / "tokens.toml").write_text("\n".join(table for _, table in tokens.values()))
    nightly = {"client_id": "nightly", "client_secret": NIGHTLY_SECRET, "grant_types": ["client_credentials"],
               "redirect_uris": [], "response_types": [], "scope": "kg:read graph:people"}  # what it holds
    provider_config = {"keys": [signing_key()], "clients": [nightly], "resources": {url: {"scope": SCOPES}},
                       "users": {"alice": {"password": "alice-pw", "scopes": ["kg:read", "graph:movies", "graph:people"]}}}
    expected = asyncio.run(reference_traversals(store))
    with running_provider(tmp_path, provider_config) as provider:
        settings = {  # signing in, as docs/team/signin.md has it; the shared token removed
            "KG_MCP_AUTH_TOKEN_FILE": None, "KG_MCP_OAUTH_ISSUER": provider.issuer,
            "KG_MCP_TOKENS": str(tmp_path / "tokens.toml"), "KG_MCP_GRAPH_ACCESS": str(access),
            "KG_MCP_RATE_LIMIT": "0",  # the six load clients below are one caller, far past 600 a minute
        }
        with Team(store, tmp_path / "team", 3, settings=settings, https_port=https_port) as team:
            assert systemd_environment(team.env_file) == shell_environment(team.env_file)

            alice = asyncio.run(alice_signs_in(team.url, team.ca_file))
            # Her client asked for every scope listed (kg:sparql too): she is granted those she holds.
            assert alice["scopes"] - {"openid", "offline_access"} == {"kg:read", "graph:movies", "graph:people"}
            # Two graphs granted: their name index, built before the replicas opened the store read-only.
            assert alice["first"]["method"] == "name index", alice["first"]
            assert alice["first"]["entities"][0]["id"] == "kg:ludwig_ii_of_bavaria"
            assert alice["film"]["entities"][0]["id"] == "kg:Catch_Me_If_You_Can"
            assert "location" not in alice["stats"] and alice["stats"]["triples"] > 0

            greedy = kg_mcp_call(team, "--client-id", "nightly", "--client-secret-env", "NIGHTLY",
                                 env={"NIGHTLY": NIGHTLY_SECRET})
            assert greedy.exit_code == 1 and "invalid_scope" in greedy.output and "--scope" in greedy.output, greedy.output
            modest = kg_mcp_call(team, "--client-id", "nightly", "--client-secret-env", "NIGHTLY", "--scope", "kg:read",
                                 "--scope", "graph:people", env={"NIGHTLY": NIGHTLY_SECRET})
            assert modest.exit_code == 0, modest.output
            assert json.loads(modest.output)["entities"][0]["id"] == "kg:ludwig_ii_of_bavaria"
            refused = kg_mcp_call(team, "--auth-token-env", "NOREAD", env={"NOREAD": tokens["noread"][0]})
            assert refused.exit_code == 1 and "HTTP 403, insufficient_scope" in refused.output, refused.output
            assert "lacks a scope of: kg:read" in refused.output

            moved = httpx2.get(f"http://127.0.0.1:{team.http_port}/mcp?x=1", timeout=30)
            assert moved.status_code == 308 and moved.headers["location"] == f"https://127.0.0.1:{https_port}/mcp?x=1"

            async def killer():
                await asyncio.sleep(KILL_AT_S)
                team.kill(1)

            tally = asyncio.run(run_load(team.url, team.ca_file, 6, LOAD_S, killer, legacy=1, token=tokens["load"][0]))
            assert tally.failures == []
            assert tally.calls > 100 and len(tally.traversals) >= 6, tally.calls
            assert {which for which, _ in tally.traversals} == set(range(len(TRAVERSALS)))
            for which, steps in tally.traversals:
                assert steps == expected[which]
                assert steps[1]["path"][0] == steps[0]["entity"]  # the second step hangs under the topic

            lines = team.access_log()
            served_by = {addr for _, _, addrs, _, _ in lines for addr in addrs.split(", ") if addr != "-"}
            assert len(served_by) == 3  # nginx spread the calls over every replica
            retried = [line for line in lines if ", " in line[2]]
            assert retried and all(line[1] == "200" for line in retried)  # sent again, answered by another
            # 202: the legacy client's notifications; 401: the sign-ins' first requests, 403 the token
            # without kg:read; 308: the plain-HTTP request redirected by nginx itself
            assert {line[1] for line in lines} <= {"200", "202", "401", "403", "308"}

            for i in (0, 2):
                assert team.get(i, "/healthz")[0] == 200
                status, body = team.get(i, "/readyz")
                assert status == 200 and json.loads(body) == {"ready": True, "checks": {"store": "ok", "redis": "ok"}}
                status, metrics = team.get(i, "/metrics")
                counts = tool_counts(metrics)
                assert status == 200 and counts[("kgr_search", "ok")] > 0 and counts[("find_entities", "ok")] > 0
                assert re.search(r'^kg_mcp_tool_call_seconds_count\{tool="verify"\} [1-9]', metrics, re.M)
                assert "kg_mcp_open_sessions 0.0" in metrics  # stateless: no session anywhere
                assert "kg_mcp_worker_processes 2.0" in metrics  # KG_MCP_WORKER_PROCESSES of the env file

            # Stopped either way, a replica leaves nothing running: its workers, their fork server,
            # all of its process group.
            team.kill(2, signal.SIGTERM)
            assert team.leftovers(1) == {} and team.leftovers(2) == {}

            # One audit trail: every replica's log (deploy/systemd/kg-mcp@.service writes one each) merged by time.
            trail = CliRunner().invoke(main, ["audit", str(team.work / "log"), "--lines"])
            assert trail.exit_code == 0, trail.output
            entries = [json.loads(line) for line in trail.output.splitlines()]
            assert [e["time"] for e in entries] == sorted(e["time"] for e in entries)
            assert {"alice", "nightly", "load"} <= {e["subject"] for e in entries}
            assert len(list((team.work / "log").iterdir())) == 3


@pytest.mark.timeout(300)  # a bound on hanging: a replica's start (with its worker processes) and Redis twice
def test_a_retry_is_answered_once_and_redis_down_fails_only_kgr_search(metaqa_store_dir, tmp_path):
    with Team(metaqa_store_dir, tmp_path / "team", 1) as team:
        replica = team.replica_url(0, "/mcp")
        signed = {"Authorization": f"Bearer {team.token}"}  # the shared token of the shipped env file

        def client() -> Client:
            return Client(streamable_http_client(replica, http_client=httpx2.AsyncClient(headers=signed, timeout=60)))

        async def as_request(request_id: str, tool: str, arguments: dict) -> dict:
            # What nginx sends a replica: the same X-Request-ID on every try of one client request.
            async with httpx2.AsyncClient(headers={"X-Request-ID": request_id, **signed}, timeout=60) as http:
                async with Client(streamable_http_client(replica, http_client=http)) as client:
                    result = await client.call_tool(tool, arguments)
                    assert not result.is_error, result.content[0].text
                    return result.structured_content

        async def retries():
            topic, question = TRAVERSALS[0]
            await as_request("r1", "kgr_search", {"entity": topic, "question": question, "session": "s"})
            first = await as_request("r2", "kgr_search", {"backtrack": True, "session": "s"})
            again = await as_request("r2", "kgr_search", {"backtrack": True, "session": "s"})
            after = await as_request("r3", "kgr_search", {"backtrack": True, "session": "s"})
            return first, again, after

        first, again, after = asyncio.run(retries())
        assert again == first  # the retry moved nothing
        assert after["entity"] != first["entity"] and after["backtracked_from"] == first["entity"]

        team.stop_redis()

        async def without_redis():
            async with client() as session:
                kept = await session.call_tool("kgr_search", {"entity": TRAVERSALS[0][0], "session": "t"})
                light = await session.call_tool("find_entities", {"name": "Tom Hanks"})
                long = await session.call_tool("follow", {"entity": "kg:Tom_Hanks", "path": ["~starred_actors"]})
                fresh = await session.call_tool("kgr_search", {"entity": TRAVERSALS[0][0]})  # no session: nothing kept
                return kept, light, long, fresh

        kept, light, long, fresh = asyncio.run(without_redis())
        assert kept.is_error and f"The shared store (Redis at {team.redis_url}) did not answer" in kept.content[0].text
        assert not light.is_error and not long.is_error and not fresh.is_error
        status, body = team.get(0, "/readyz")
        assert status == 503 and json.loads(body)["checks"]["store"] == "ok"
        assert json.loads(body)["checks"]["redis"].startswith("SharedStateError")
        assert re.search(r'^kg_mcp_shared_state_errors_total\{use="traversal"\} [1-9]', team.get(0, "/metrics")[1], re.M)

        team.start_redis()
        time.sleep(1.2)  # past the pause after a failure before Redis is tried again

        async def back():
            async with client() as session:
                return await traverse(session, 1)

        steps = asyncio.run(back())
        assert all(steps) and steps[1]["path"][0] == steps[0]["entity"]
        assert team.get(0, "/readyz")[0] == 200


def test_nginx_is_installed_by_make_install_test():
    text = subprocess.run(["make", "-n", "install-test"], capture_output=True, text=True, cwd=SHIPPED_NGINX.parents[2]).stdout
    assert "nginx" in text and "redis-server" in text and "systemd-analyze" in text


def test_a_head_with_a_length_waits_for_its_body_and_a_streams_does_not():
    """A replica killed between a JSON answer's head and its body left nginx a head it had already
    passed on, so the call could not be retried (seen once in a full run of the test above)."""
    from kg_mcp.serving.whole_responses import WholeResponses

    async def answer(headers):
        sent, body_ready = [], asyncio.Event()

        async def send(message):
            sent.append(message["type"])

        async def app(scope, receive, send):
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await body_ready.wait()
            await send({"type": "http.response.body", "body": b"{}"})

        call = asyncio.create_task(WholeResponses(app)({"type": "http"}, None, send))
        await asyncio.sleep(0.01)
        before_body = list(sent)
        body_ready.set()
        await call
        return before_body, sent

    json_head = [(b"content-type", b"application/json"), (b"content-length", b"2")]
    assert asyncio.run(answer(json_head)) == ([], ["http.response.start", "http.response.body"])
    stream_head = [(b"content-type", b"text/event-stream")]
    assert asyncio.run(answer(stream_head)) == (["http.response.start"], ["http.response.start", "http.response.body"])


def test_what_a_turn_writes_reaches_the_socket_in_one_write():
    """uvicorn writes a response's head and its body apart: two send() calls, and a replica killed
    between them left nginx a head without its body (seen once in a few hundred kills of the test
    above). Through OneWritePerTurn, what one turn of the event loop writes is one write of the
    socket's transport, at the end of the turn; a close sends what was written before it."""
    from kg_mcp.serving.whole_responses import OneWritePerTurn

    head, body = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", b"{}"

    async def run():
        ours, theirs = socket.socketpair()
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
        writes, socket_write = [], transport.write
        transport.write = lambda data: (writes.append(bytes(data)), socket_write(data))  # the real transport's calls, recorded
        one = OneWritePerTurn(transport)
        one.write(head)
        one.write(body)
        one.write(b"")
        assert writes == [] and one.get_write_buffer_size() == len(head + body)
        await asyncio.sleep(0)
        assert writes == [head + body]
        one.write(b"data: 1\n\n")
        one.close()
        assert writes == [head + body, b"data: 1\n\n"]
        while not ours.fileno() == -1:  # the transport closes its socket in a later turn
            await asyncio.sleep(0.01)
        theirs.settimeout(5)
        received = b""
        while chunk := theirs.recv(4096):
            received += chunk
        theirs.close()
        return received

    assert asyncio.run(run()) == head + body + b"data: 1\n\n"


def test_past_the_high_water_mark_what_a_turn_writes_goes_at_once():
    """A large body written in one turn is not held past the transport's high-water mark, so the
    transport's flow control pauses the writer as it would without the wrapper; an EOF written
    after data follows the data."""
    from kg_mcp.serving.whole_responses import OneWritePerTurn

    async def run():
        ours, theirs = socket.socketpair()
        transport, _ = await asyncio.get_running_loop().connect_accepted_socket(asyncio.Protocol, ours)
        transport.set_write_buffer_limits(high=64 * 1024)
        writes, socket_write = [], transport.write
        transport.write = lambda data: (writes.append(len(data)), socket_write(data))
        one = OneWritePerTurn(transport)
        for _ in range(20):
            one.write(b"x" * 16 * 1024)  # 320 KB in one turn
        assert writes and max(writes) <= 64 * 1024 + 16 * 1024 and one.get_write_buffer_size() >= 0
        one.write(b"end")
        one.write_eof()
        theirs.settimeout(5)
        received = b""
        while chunk := await asyncio.get_running_loop().run_in_executor(None, theirs.recv, 1 << 20):
            received += chunk
        one.close()
        theirs.close()
        return received

    assert asyncio.run(run()) == b"x" * 20 * 16 * 1024 + b"end"
