"""`kg-mcp ask` for people: progress on stderr (a spinner on a terminal, a line per tool call with
its row count), `--quiet` for none, and stdout with the answer only. A real subprocess against the
demo KG and the loopback OpenAI-compatible provider, its stderr a pipe or a real pseudo-terminal."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

from kg_mcp.cli.progress import row_count
from providers import FakeProvider
from test_ask_e2e import over_the_wire
from test_sog import gold_path_policy

QUESTION = "Where was Vincent van Gogh born?"


def ask(*extra: str, stderr=subprocess.PIPE, tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")} | {"OPENAI_API_KEY": "sk-test"}
    with FakeProvider(over_the_wire(gold_path_policy(["wdt:P19"]))) as fake:
        done = subprocess.run(
            [sys.executable, "-m", "kg_mcp", "ask", QUESTION, "--topic", "Vincent van Gogh", "--model", "openai:scripted",
             "--base-url", fake.base_url_openai, "--trace", str(tmp_path / "t.jsonl"), *extra],
            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, timeout=120,
        )
    assert done.returncode == 0, done.stderr
    return done


def test_progress_lines_on_stderr_and_the_answer_alone_on_stdout(tmp_path):
    done = ask(tmp_path=tmp_path)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("  find_entities(name=Vincent van Gogh, limit=1) -> 1 row (")  # the topic, looked up
    assert lines[1] == "model turn 1: 1 tool call"
    assert lines[2].startswith('  search(entity=wd:Q5582, direction=outgoing, properties_to_filter_for=["wdt:P19"]) -> 1 row (')
    assert lines[3] == "model turn 2: replied" and len(lines) == 4
    assert done.stdout.startswith("Answer: ") and "model turn 1" not in done.stdout and "row (" not in done.stdout
    assert "\nPath:\n  " in done.stdout


def test_quiet_and_json_leave_stderr_empty_and_stdout_parseable(tmp_path):
    import json

    done = ask("--quiet", "--json", tmp_path=tmp_path)
    assert done.stderr == ""
    assert json.loads(done.stdout)["answers"]


def test_a_spinner_on_a_terminal(tmp_path):
    leader, follower = pty.openpty()
    try:
        done = ask(stderr=follower, tmp_path=tmp_path)
        os.close(follower)
        follower = None
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: all was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower is not None:
            os.close(follower)
        os.close(leader)
    text = seen.decode()
    assert "\r⠋ scripted is thinking (turn 1) " in text and "is thinking (turn 2) " in text
    assert "\r\x1b[K" in text  # the spinner clears its line before the next output
    assert "search(entity=wd:Q5582" in text and "model turn 1" not in text
    assert done.stdout.startswith("Answer: ") and "⠋" not in done.stdout


def test_row_counts():
    assert row_count({"total": 7, "rows": [1]}) == 7
    assert row_count({"entity": {}, "relations": [{"total": 2}, {"total": 3}]}) == 5
    assert row_count({"name": "x", "entities": [{"id": 1}, {"id": 2}]}) == 2
    assert row_count(None) is None
