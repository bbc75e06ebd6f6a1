"""Named tokens (`--tokens FILE`) beside the one shared token, and the audit log, through a real
`kg-mcp serve` subprocess and the SDK's client: each token is its caller, a token removed from the
file stops working without a restart, and every call is one audit line naming its caller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import free_port, wait_for_http
from kg_mcp.cli import main
from kg_mcp.errors import ConfigError
from kg_mcp.serving.audit import AuditLog
from kg_mcp.serving.audit_trail import audit_lines, summarise
from kg_mcp.calls.caller import Caller
from kg_mcp.serving.tokens import RECHECK_S, new_token, read_tokens_file

SHARED = "shared-team-token-" + "s" * 20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    work = tmp_path_factory.mktemp("tokens")
    tokens = {name: new_token(name, scopes) for name, scopes in
              {"nightly": ["kg:read"], "analyst": ["kg:read", "kg:sparql"], "leaver": ["kg:read"]}.items()}
    tokens_file = work / "tokens.toml"
    tokens_file.write_text("\n".join(table for _, table in tokens.values()))
    port = free_port()
    audit = work / "audit.jsonl"
    command = [sys.executable, "-m", "kg_mcp", "serve", "--transport", "http", "--port", str(port), "--enable-sparql",
               "--tokens", str(tokens_file), "--auth-token-env", "KGTOK", "--audit-log", str(audit)]
    log = open(work / "server.log", "w")
    process = subprocess.Popen(command, env={**os.environ, "KGTOK": SHARED}, stdout=log, stderr=log)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=60)
        yield {"url": f"http://127.0.0.1:{port}/mcp", "tokens": {n: t for n, (t, _) in tokens.items()},
               "tables": {n: table for n, (_, table) in tokens.items()}, "file": tokens_file, "audit": audit,
               "log": work / "server.log"}
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()


async def tools_and_call(url: str, token: str) -> tuple[set[str], bool]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("find_entities", {"name": "Vincent van Gogh"})
            return tools, not found.is_error


def status(url: str, token: str) -> int:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    return httpx2.post(url, json=body, headers=headers, timeout=60).status_code


async def test_each_named_token_is_its_caller_and_the_shared_token_still_works(server):
    tools, ok = await tools_and_call(server["url"], server["tokens"]["nightly"])
    assert ok and "search" in tools and "sparql" not in tools
    tools, ok = await tools_and_call(server["url"], server["tokens"]["analyst"])
    assert ok and "sparql" in tools
    tools, ok = await tools_and_call(server["url"], SHARED)
    assert ok and "sparql" in tools  # the one shared token grants every scope
    lines = audit_lines(server["audit"])
    found = {(line["subject"], line["name"]) for line in lines if line["kind"] == "tool"}
    assert {("nightly", "find_entities"), ("analyst", "find_entities"), (None, "find_entities")} <= found
    shared = [line for line in audit_lines(server["audit"]) if line["kind"] == "tool" and line["subject"] is None]
    assert shared[0]["caller"] == "addr:127.0.0.1"
    text = server["audit"].read_text() + server["log"].read_text()
    assert not any(token in text for token in [SHARED, *server["tokens"].values()])  # never a token


def test_a_token_removed_from_the_file_stops_at_once_and_a_new_one_starts(server):
    assert status(server["url"], server["tokens"]["leaver"]) == 200
    fresh, table = new_token("newcomer", ["kg:read"])
    assert status(server["url"], fresh) == 401
    kept = [server["tables"][name] for name in ("nightly", "analyst")]  # the other tests' callers stay
    server["file"].write_text("\n".join([*kept, table]))  # leaver revoked, newcomer added
    time.sleep(RECHECK_S + 0.1)
    assert status(server["url"], server["tokens"]["leaver"]) == 401
    assert status(server["url"], fresh) == 200
    server["file"].write_text("[tokens.broken\n")  # a bad edit keeps the last good file in force
    time.sleep(RECHECK_S + 0.1)
    assert status(server["url"], fresh) == 200
    assert "not valid TOML" in server["log"].read_text()
    server["file"].write_text("\n".join([*kept, table]))


async def test_kg_mcp_audit_summarises_per_subject_and_tool(server):
    # Its own calls: the tests of this file may run on other workers, each with its own server.
    _, ok = await tools_and_call(server["url"], server["tokens"]["nightly"])
    assert ok and status(server["url"], "no-such-token-" + "n" * 20) == 401
    result = CliRunner().invoke(main, ["audit", str(server["audit"]), "--json"])
    assert result.exit_code == 0, result.output
    table = {(row["subject"], row["name"]): row for row in json.loads(result.output)}
    assert table[("nightly", "find_entities")]["calls"] >= 1
    assert table[("nightly", "find_entities")]["errors"] == 0
    assert any(name == "(401)" for _, name in table)  # the unknown token's refusal
    text = CliRunner().invoke(main, ["audit", str(server["audit"])]).output
    assert "nightly" in text and "find_entities" in text and "calls," in text


def test_the_audit_log_rotates_and_is_read_whole(tmp_path):
    log = AuditLog(tmp_path / "audit.jsonl", max_bytes=2000, backups=3)
    caller = Caller("sub:alice", "alice", "cli")
    for i in range(40):
        log.call(caller, "tool", "search", {"entity": f"Q{i}", "secret": "x"}, "ok", rows=i, ms=1.0)
    log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2", "audit.jsonl.3"]
    assert all(p.stat().st_size <= 2000 for p in tmp_path.iterdir())
    lines = list(audit_lines(tmp_path / "audit.jsonl"))
    assert [line["rows"] for line in lines] == list(range(40 - len(lines), 40))  # oldest first, the rest rotated out
    assert "secret" not in (tmp_path / "audit.jsonl").read_text()  # arguments only as size and digest
    assert summarise(lines)[0]["calls"] == len(lines)


def test_a_bad_tokens_file_is_refused_in_our_words(tmp_path):
    path = tmp_path / "tokens.toml"
    path.write_text('[tokens.ci]\nsha256 = "abc"\n')
    with pytest.raises(ConfigError, match="64 hex digits"):
        read_tokens_file(path)
    path.write_text('[tokens.ci]\nsha256 = "' + "a" * 64 + '"\nscope = ["kg:read"]\n')
    with pytest.raises(ConfigError, match="sha256 and scopes only"):
        read_tokens_file(path)


def test_kg_mcp_audit_merges_every_replica_s_log_by_time(tmp_path):
    """Each replica writes its own log; `kg-mcp audit` reads them all (files, a folder, a pattern,
    stdin) as one trail in time order, each log with its rotated files."""
    folder = tmp_path / "logs"
    folder.mkdir()
    logs = [AuditLog(folder / f"audit-800{i}.jsonl", max_bytes=1500, backups=5) for i in range(3)]
    for n in range(30):  # calls spread over the replicas, as nginx spreads them
        logs[n % 3].call(Caller(f"sub:user{n % 4}", f"user{n % 4}", "cli"), "tool", "search", {"n": n}, "ok", rows=n, ms=1.0)
        time.sleep(0.002)  # a distinct millisecond each
    for log in logs:
        log.close()
    assert any(p.suffix == ".1" for p in folder.iterdir())  # some were rotated

    def trail(*sources: str, stdin: str | None = None) -> list[dict]:
        result = CliRunner().invoke(main, ["audit", *sources, "--lines"], input=stdin)
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.output.splitlines()]

    merged = trail(str(folder))
    assert [line["rows"] for line in merged] == list(range(30))  # every call, in the order made
    assert trail(str(folder / "audit-*.jsonl")) == merged
    assert trail(*(str(folder / f"audit-800{i}.jsonl") for i in range(3))) == merged
    piped = (folder / "audit-8001.jsonl").read_text()  # as `journalctl ... -o cat` would pipe lines in
    from_pipe = [json.loads(line) for line in piped.splitlines()]
    expected = [m for m in merged if m["rows"] % 3 == 0 or m in from_pipe]
    assert trail(str(folder / "audit-8000.jsonl"), "-", stdin=piped) == expected
    summary = json.loads(CliRunner().invoke(main, ["audit", str(folder), "--json"]).output)
    assert sum(row["calls"] for row in summary) == 30 and {row["subject"] for row in summary} == {f"user{i}" for i in range(4)}
    missing = CliRunner().invoke(main, ["audit", str(tmp_path / "none-*.jsonl")])
    assert missing.exit_code == 1 and "No audit log at" in missing.output


def test_audit_lines_go_to_a_stream_or_the_journal_as_json(tmp_path):
    """--audit-log stderr / stdout / journald: the same JSON lines where a log shipper reads them; the
    journal gets each by its native protocol (a datagram of FIELD=value lines) on its socket."""
    import io
    import logging
    import socket

    from kg_mcp.serving.audit import JournalHandler, open_audit

    stream = io.StringIO()
    log = AuditLog(handler=logging.StreamHandler(stream), name="test")
    log.call(Caller("sub:alice", "alice", "cli"), "tool", "search", {"entity": "x"}, "ok", rows=2, ms=1.5)
    line = json.loads(stream.getvalue())
    assert line["subject"] == "alice" and line["name"] == "search" and line["rows"] == 2

    journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    journal.bind(str(tmp_path / "journal.socket"))
    try:
        log = AuditLog(handler=JournalHandler(str(tmp_path / "journal.socket")), name="journal")
        log.call(Caller("sub:bob\nx", "bob\nx", "cli"), "tool", "follow", {}, "tool_error", ms=2.0)
        datagram = journal.recv(65536)
        journal.close()  # the journal restarts: a new socket at the same path gets the next line
        (tmp_path / "journal.socket").unlink()
        journal = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        journal.bind(str(tmp_path / "journal.socket"))
        journal.settimeout(5)
        log.call(Caller("sub:bob", "bob", "cli"), "tool", "search", {}, "ok", ms=1.0)
        assert b"KG_MCP_NAME=search" in journal.recv(65536)
        log.close()
    finally:
        journal.close()
    fields = dict(part.split(b"=", 1) for part in datagram.split(b"\n") if b"=" in part and not part.startswith(b"KG_MCP_SUBJECT"))
    assert fields[b"SYSLOG_IDENTIFIER"] == b"kg-mcp-audit" and fields[b"KG_MCP_OUTCOME"] == b"tool_error"
    assert json.loads(fields[b"MESSAGE"])["name"] == "follow"
    subject = datagram.index(b"KG_MCP_SUBJECT\n")  # a value with a newline goes by its length
    assert datagram[subject + 15: subject + 23] == (5).to_bytes(8, "little") and datagram[subject + 23: subject + 28] == b"bob\nx"

    with pytest.raises(ConfigError, match="stdout carries the protocol"):
        open_audit("stdout", transport="stdio")
    with pytest.raises(ConfigError, match="no systemd journal"):
        JournalHandler(str(tmp_path / "no-journal.socket"))
