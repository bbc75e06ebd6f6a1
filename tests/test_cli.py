"""The `kg-mcp` command run as a real subprocess: load, call (in-process, --server-cmd, --url), info, serve."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyoxigraph as ox
import pytest
from click.testing import CliRunner

from conftest import free_port, wait_for_http
from kg_mcp.cli import main

RDFS_LABEL = ox.NamedNode("http://www.w3.org/2000/01/rdf-schema#label")
TOKEN = "cli-test-token-abcdefghijklmnopqrstuv"
FILM = "Catch Me If You Can"


def kg_mcp(*args: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kg_mcp", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else dict(os.environ),
    )


def ok(process: subprocess.CompletedProcess) -> str:
    assert process.returncode == 0, f"rc={process.returncode}\nstdout: {process.stdout}\nstderr: {process.stderr}"
    assert "Traceback" not in process.stderr
    return process.stdout


def failed(process: subprocess.CompletedProcess, rc: int | None = None) -> str:
    """The stderr of a command that had to fail cleanly: non-zero exit, a message, no traceback."""
    assert process.returncode != 0, process.stdout
    if rc is not None:
        assert process.returncode == rc, (process.returncode, process.stderr)
    assert "Traceback" not in process.stderr and "Traceback" not in process.stdout
    assert process.stderr.strip()
    return process.stderr


def info_counts(store: Path) -> dict[str, int]:
    out = ok(kg_mcp("info", "--store", str(store)))
    counts = {}
    for key in ("triples", "entities", "relations"):
        match = re.search(rf"^{key}: ([\d,]+)$", out, re.MULTILINE)
        assert match, out
        counts[key] = int(match.group(1).replace(",", ""))
    return counts


def default_graph_counts(store: Path) -> tuple[int, int]:
    """(all triples, rdfs:label triples) of the store's default graph, read with pyoxigraph directly."""
    db = ox.Store.read_only(str(store))
    try:
        total = sum(1 for _ in db.quads_for_pattern(None, None, None, ox.DefaultGraph()))
        labels = sum(1 for _ in db.quads_for_pattern(None, RDFS_LABEL, None, ox.DefaultGraph()))
    finally:
        del db
    return total, labels


def distinct_lines(path: Path) -> int:
    return len({line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()})


@pytest.fixture(scope="module")
def small_kb(tmp_path_factory, data_dir) -> Path:
    """The first 2,000 lines of the MetaQA KB."""
    path = tmp_path_factory.mktemp("kb") / "small.txt"
    with open(data_dir / "metaqa" / "kb.txt", encoding="utf-8") as kb:
        path.write_text("".join(line for _, line in zip(range(2000), kb)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, small_kb) -> tuple[Path, str]:
    """A store made by a real `kg-mcp load` subprocess; yields (store, load's stderr)."""
    store = tmp_path_factory.mktemp("stores") / "small"
    loaded = kg_mcp("load", str(small_kb), "--store", str(store))
    ok(loaded)
    return store, loaded.stderr


def test_load_without_compaction_holds_the_same_triples(small_store, small_kb, tmp_path):
    # Compaction (the default) only rearranges the store's files; --no-optimize skips it.
    _, load_log = small_store
    loaded = kg_mcp("load", str(small_kb), "--store", str(tmp_path / "plain"), "--no-optimize")
    ok(loaded)
    held = re.compile(r"now holds ([\d,]+)")
    assert held.search(loaded.stderr)[1] == held.search(load_log)[1]


def test_load_then_find_and_search_on_a_fresh_store(small_store, small_kb):
    store, load_log = small_store
    assert store.is_dir()
    assert "LoadReport(" not in load_log  # a summary for people, not a repr
    held = re.search(r"now holds ([\d,]+)", load_log)
    assert held, load_log

    # A film of the first lines with its director, read from the input itself.
    film, _, director = next(
        line.split("|") for line in small_kb.read_text(encoding="utf-8").splitlines() if line.split("|")[1] == "directed_by"
    )
    found = json.loads(ok(kg_mcp("call", "--store", str(store), "--json", "find_entities", json.dumps({"name": film}))))
    film_id = next(e["id"] for e in found["entities"] if e["label"] == film)
    rows = ok(kg_mcp("call", "--store", str(store), "search", json.dumps({"entity": film_id, "direction": "outgoing"})))
    assert any("directed_by" in line and director in line for line in rows.splitlines()), rows

    # The triple count is the same whichever way it is read: info, the load summary, the store.
    total, labels = default_graph_counts(store)
    assert info_counts(store)["triples"] == total == int(held.group(1).replace(",", ""))
    assert total - labels == distinct_lines(small_kb)  # one triple per input line, plus the labels
    assert labels > 0


def test_call_find_entities_then_search_spielberg(metaqa_store_dir):
    """The issue's 'done when', from the command line."""
    store = str(metaqa_store_dir)
    found = ok(kg_mcp("call", "--store", store, "find_entities", json.dumps({"name": FILM})))
    ids = re.findall(r"\| (kg:\S+) \| " + re.escape(FILM) + r" \|", found)
    assert ids, found
    rows = ok(kg_mcp("call", "--store", store, "search", json.dumps({"entity": ids[0], "direction": "outgoing"})))
    assert any("directed_by" in line and "Steven Spielberg" in line for line in rows.splitlines()), rows

    structured = json.loads(ok(kg_mcp("call", "--store", store, "--json", "search", json.dumps({"entity": ids[0]}))))
    assert structured["entity"]["id"] == ids[0]
    assert {"property": "directed_by", "label": "Steven Spielberg"} in [
        {"property": r["property"], "label": r["value"]["label"]} for r in structured["rows"]
    ]


def test_the_budget_is_set_per_server(metaqa_store_dir):
    """--max-output-chars: a listing's page holds what fits and says how to read on."""
    asked = json.dumps({"entity": "kg:Steven_Spielberg", "direction": "incoming", "properties_to_filter_for": ["directed_by"]})
    whole = ok(kg_mcp("call", "--store", str(metaqa_store_dir), "search", asked))
    small = ok(kg_mcp("call", "--store", str(metaqa_store_dir), "--max-output-chars", "1000", "search", asked))
    assert "Next page" not in whole and len(small.strip()) <= 1000 < len(whole)
    assert re.search(r'Rows 1-\d+ of \d+ shown\. Next page: call again with the same arguments and cursor="[\w-]+"\.', small)


def test_info_counts_match_the_store(metaqa_store_dir, data_dir):
    counts = info_counts(metaqa_store_dir)
    total, labels = default_graph_counts(metaqa_store_dir)
    assert counts["triples"] == total
    assert total - labels == distinct_lines(data_dir / "metaqa" / "kb.txt")  # 129,413 KB lines
    assert counts["relations"] >= 9 and counts["entities"] > 40_000


def test_call_over_stdio_with_server_cmd(metaqa_store_dir):
    server_cmd = shlex.join([sys.executable, "-m", "kg_mcp", "serve", "--store", str(metaqa_store_dir)])
    out = ok(kg_mcp("call", "--server-cmd", server_cmd, "get_relations", json.dumps({"entity": "kg:Catch_Me_If_You_Can"})))
    assert "directed_by" in out and "starred_actors" in out

    missing = failed(kg_mcp("call", "--server-cmd", "/nonexistent/kg-mcp-server", "search", "{}"), rc=1)
    assert "nonexistent" in missing


def test_call_over_http_with_auth_token(metaqa_store_dir):
    port = free_port()
    env = dict(os.environ, KG_CLI_TOKEN=TOKEN)
    server = subprocess.Popen(
        [sys.executable, "-m", "kg_mcp", "serve", "--store", str(metaqa_store_dir), "--transport", "http",
         "--port", str(port), "--auth-token-env", "KG_CLI_TOKEN"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=30)
        args = ["search", json.dumps({"entity": "kg:Catch_Me_If_You_Can", "properties_to_filter_for": ["directed_by"]})]
        out = ok(kg_mcp("call", "--url", url, "--auth-token-env", "KG_CLI_TOKEN", *args, env=env))
        assert "Steven Spielberg" in out

        wrong = dict(os.environ, KG_CLI_TOKEN="w" * len(TOKEN))
        refused = kg_mcp("call", "--url", url, "--auth-token-env", "KG_CLI_TOKEN", *args, env=wrong)
        assert "Steven Spielberg" not in refused.stdout
        assert "HTTP 401" in failed(refused, rc=1)
        assert "w" * 12 not in refused.stderr  # no token echoed back
    finally:
        server.terminate()
        _, err = server.communicate(timeout=10)
    assert TOKEN not in err.decode()


def test_call_unreachable_url_is_a_clean_error():
    err = failed(kg_mcp("call", "--url", f"http://127.0.0.1:{free_port()}/mcp", "search", "{}"), rc=1)
    assert "cannot talk to the MCP server" in err


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]"])
def test_call_bad_json_arguments_exit_2(small_store, arguments):
    err = failed(kg_mcp("call", "--store", str(small_store[0]), "search", arguments), rc=2)
    assert "ARGUMENTS" in err and ("not JSON" in err or "JSON object" in err)


def test_call_tool_error_exit_1(small_store):
    process = kg_mcp("call", "--store", str(small_store[0]), "search", json.dumps({"entity": "kg:Nope_Nothing"}))
    assert process.returncode == 1, process.stderr
    assert "kg:Nope_Nothing" in process.stdout and "Hint:" in process.stdout
    assert "Traceback" not in process.stdout + process.stderr


def test_serve_missing_store_is_a_clean_error(tmp_path):
    missing = tmp_path / "nonexistent"
    err = failed(kg_mcp("serve", "--store", str(missing)))
    assert "No store at" in err and str(missing) in err and "kg-mcp load" in err
    assert not missing.exists()  # serving never creates a store


def test_serve_bad_token_setup_is_a_clean_error(small_store):
    store = str(small_store[0])
    env = {k: v for k, v in os.environ.items() if k != "KG_UNSET_TOKEN"}
    assert "KG_UNSET_TOKEN" in failed(kg_mcp("serve", "--store", store, "--transport", "http", "--auth-token-env", "KG_UNSET_TOKEN", env=env))
    short = dict(os.environ, KG_SHORT_TOKEN="short")
    assert "at least" in failed(kg_mcp("serve", "--store", store, "--transport", "http", "--auth-token-env", "KG_SHORT_TOKEN", env=short))


def test_failed_load_leaves_the_store_answering_the_same(tmp_path, small_kb):
    store = tmp_path / "store"
    ok(kg_mcp("load", str(small_kb), "--store", str(store)))
    question = ["call", "--store", str(store), "get_relations", json.dumps({"entity": "kg:Richard_Brooks"})]
    before = ok(kg_mcp(*question))
    counts_before = info_counts(store)

    lines = small_kb.read_text(encoding="utf-8").splitlines()
    bad_line = 1500
    lines[bad_line - 1] = "a line without any separator"
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines + ["Extra Film|directed_by|Someone New"]) + "\n", encoding="utf-8")
    err = failed(kg_mcp("load", str(bad), "--store", str(store)))
    assert f"{bad}:{bad_line}" in err, err
    assert "unchanged" in err

    assert ok(kg_mcp(*question)) == before
    assert info_counts(store) == counts_before
    missing = json.loads(ok(kg_mcp("call", "--store", str(store), "--json", "find_entities", json.dumps({"name": "Extra Film"}))))
    assert missing["entities"] == []


def test_settings_read_from_a_shell_s_forms_and_a_bad_one_named_with_its_form(monkeypatch, tmp_path):
    """An environment file sourced by a shell loses its quotes (`["127.0.0.1"]` becomes `[127.0.0.1]`):
    every list and table setting reads that, commas and spaces; a value that does not read is named
    with the form it takes, never a traceback."""
    from kg_mcp.settings import Settings

    monkeypatch.setenv("KG_MCP_TRUSTED_PROXIES", "[127.0.0.1]")
    monkeypatch.setenv("KG_MCP_LANGUAGES", "en, de")
    monkeypatch.setenv("KG_MCP_PREFIXES", "ex=http://example.org/ wd=http://www.wikidata.org/entity/")
    monkeypatch.setenv("KG_MCP_ALLOWED_HOSTS", '["kg.example.org:443"]')
    read = Settings()
    assert read.trusted_proxies == ["127.0.0.1"] and read.languages == ["en", "de"]
    assert read.prefixes == {"ex": "http://example.org/", "wd": "http://www.wikidata.org/entity/"}
    assert read.allowed_hosts == ["kg.example.org:443"]

    monkeypatch.setenv("KG_MCP_SEARCH_K", "many")
    bad = CliRunner().invoke(main, ["info"])
    assert bad.exit_code == 1 and "KG_MCP_SEARCH_K is 'many'" in bad.output and "a whole number from 1 to 10000" in bad.output
    monkeypatch.delenv("KG_MCP_SEARCH_K")
    monkeypatch.setenv("KG_MCP_PREFIXES", "ex")
    bad = CliRunner().invoke(main, ["info"])
    assert bad.exit_code == 1 and "KG_MCP_PREFIXES" in bad.output and "NAME=IRI pairs" in bad.output
    monkeypatch.delenv("KG_MCP_PREFIXES")
    # Read deep inside a load, not by the command: named all the same, and nothing loaded.
    monkeypatch.setenv("KG_MCP_WARM_NAME_INDEX", "perhaps")
    source = tmp_path / "one.nt"
    source.write_text('<http://example.org/a> <http://www.w3.org/2000/01/rdf-schema#label> "a" .\n')
    bad = CliRunner().invoke(main, ["load", str(source), "--store", str(tmp_path / "store")])
    assert bad.exit_code == 1 and "KG_MCP_WARM_NAME_INDEX is 'perhaps'" in bad.output and "true or false" in bad.output
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").glob("*.sst"))
    monkeypatch.delenv("KG_MCP_WARM_NAME_INDEX")

    # The sign-in settings are read from the environment too (an environment file's).
    monkeypatch.setenv("KG_MCP_OAUTH_ISSUER", "http://login.example.org/realms/team")
    bad = CliRunner().invoke(main, ["serve", "--transport", "http"])
    assert bad.exit_code == 1 and "must be reached over https" in bad.output
    monkeypatch.setenv("KG_MCP_OAUTH_ISSUER", "https://login.example.org/realms/team")
    bad = CliRunner().invoke(main, ["serve", "--transport", "http"])
    assert bad.exit_code == 1 and "needs --public-url (KG_MCP_PUBLIC_URL)" in bad.output
    assert "Traceback" not in bad.output
