"""`kg-mcp eval` end to end: a subprocess, the model behind an OpenAI-compatible base URL (a loopback
server speaking the Chat Completions JSON to the real openai SDK, answering with a gold-path policy),
killed with SIGKILL in the middle of a run and started again; then `kg-mcp report`, whose page a
real headless Chromium renders to a PNG. The model is scripted: this checks the plumbing, not accuracy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from kg_mcp.agents.evaluation.benchmarks import load_benchmark
from kg_mcp.agents.evaluation.prices import PRICES
from kg_mcp.agents.models.base import ToolSpec, Usage
from PIL import Image
from providers import FakeProvider, error
from test_sog import gold_path_policy

QUESTIONS = 6
HOLD_AT = 3  # the fourth question is in flight when the run is killed
PLOT_BLUE = (31, 119, 180)  # matplotlib's first colour: the report's plots


class GoldProvider:
    """A provider policy: each question's gold path walked, token usage reported; it can hold one question."""

    def __init__(self, questions, hold: str | None = None):
        self.paths = {q.text: list(q.gold_path) for q in questions}
        self.hold = hold
        self.reached, self.release = threading.Event(), threading.Event()
        self.asked: list[str] = []

    def __call__(self, request):
        messages = request.messages()
        text = next(t for t in self.paths if messages[1].content.startswith(f"Question: {t} "))
        self.asked.append(text)
        if text == self.hold:
            self.reached.set()
            self.release.wait(60)
            return error(400, "this run was killed")
        reply = gold_path_policy(self.paths[text])(messages, [ToolSpec(n, "", {}) for n in request.tool_names()])
        reply.usage = Usage(100 + sum(len(m.content) for m in messages) // 4, 20, 1)
        return reply


def eval_command(base_url: str, store: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "kg_mcp", "eval", "--benchmark", "metaqa-2hop", "--limit", str(QUESTIONS),
            "--agent", "sog", "--model", "openai:gpt-4o-mini", "--base-url", base_url, "--store", str(store), "--out", str(out)]


def environment() -> dict[str, str]:
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key")
    env.pop("OPENAI_BASE_URL", None)
    return env


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory, metaqa_store_dir, data_dir):
    """Run, kill with SIGKILL while the fourth question is with the model, run again."""
    out = tmp_path_factory.mktemp("eval") / "run"
    questions = load_benchmark("metaqa-2hop", data_dir).questions[:QUESTIONS]
    first = GoldProvider(questions, hold=questions[HOLD_AT].text)
    with FakeProvider(first) as fake:
        process = subprocess.Popen(eval_command(fake.base_url_openai, metaqa_store_dir, out), env=environment(),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            reached = first.reached.wait(90)
            lines_at_kill = (out / "results.jsonl").read_text().splitlines() if reached else []
            process.send_signal(signal.SIGKILL)
            process.wait(30)
        finally:
            first.release.set()
            if process.poll() is None:
                process.kill()
        stderr_first = process.stderr.read()
    second = GoldProvider(questions)
    with FakeProvider(second) as fake:
        done = subprocess.run(eval_command(fake.base_url_openai, metaqa_store_dir, out), env=environment(),
                              capture_output=True, text=True, timeout=120, check=False)
    return {"out": out, "questions": questions, "reached": reached, "lines_at_kill": lines_at_kill,
            "returncode_first": process.returncode, "stderr_first": stderr_first, "first": first, "second": second,
            "done": done}


def test_a_killed_run_resumes_without_doing_any_question_twice(killed_and_resumed):
    run = killed_and_resumed
    questions, out = run["questions"], run["out"]
    assert run["reached"], run["stderr_first"][-2000:]
    assert run["returncode_first"] == -signal.SIGKILL
    assert [json.loads(line)["question_id"] for line in run["lines_at_kill"]] == [q.id for q in questions[:HOLD_AT]]
    done = run["done"]
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ids = [r["question_id"] for r in records]
    assert sorted(ids) == sorted(q.id for q in questions) and len(ids) == len(set(ids)) == QUESTIONS
    # the second start asked the model only about the questions not done before the kill
    assert set(run["second"].asked) == {q.text for q in questions[HOLD_AT:]}
    assert set(run["first"].asked) == {q.text for q in questions[: HOLD_AT + 1]}
    gold = {q.id: set(q.answers) for q in questions}
    for r in records:
        assert set(r["answers"]) == gold[r["question_id"]] and r["correct"]
        assert r["usage"]["model"]["requests"] == 3 and r["turns"] == 3  # two hops, then the answer
        assert r["cost_usd"] == pytest.approx(PRICES["gpt-4o-mini"].cost(r["tokens_in"], r["tokens_out"]))
        assert (out / r["trace"]).is_file()
    assert "SoG Hits@1" in done.stdout and "100.0%" in done.stdout
    assert f"3 answered now, 3 already done, 0 failed of {QUESTIONS}" in done.stdout
    assert "metaqa-2hop sog" in done.stderr  # the progress bar


@pytest.fixture(scope="module")
def report_page(killed_and_resumed, tmp_path_factory):
    out = killed_and_resumed["out"]
    html = tmp_path_factory.mktemp("report") / "page.html"
    shown = subprocess.run([sys.executable, "-m", "kg_mcp", "report", str(out), "--html", str(html)],
                           capture_output=True, text=True, timeout=120, check=False)
    return shown, html


def test_report_prints_the_table_and_writes_the_page(report_page, killed_and_resumed):
    shown, html = report_page
    assert shown.returncode == 0, shown.stderr[-2000:]
    rows = {line.split("  ")[0]: line for line in shown.stdout.splitlines()}
    assert rows["SoG Hits@1"].split()[-1] == "100.0%"
    assert rows["questions"].split()[-1] == str(QUESTIONS)
    assert "cost / answer (USD)" in rows and "latency / answer, mean (s)" in rows
    page = html.read_text()
    links = [line.split('href="')[1].split('"')[0] for line in page.splitlines() if 'href="' in line]
    assert len(links) == QUESTIONS
    for link in links:  # each trace page replays the walk: question, search calls and outputs, final answer
        trace_page = (html.parent / link).resolve()
        text = trace_page.read_text()
        assert "Question (sog)" in text and "search" in text and "Final answer" in text
        assert "| property | propertyLabel | value | valueLabel |" in text


def test_report_page_renders_in_headless_chromium(report_page, tmp_path):
    _, html = report_page
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)")
    png = tmp_path / "report.png"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={png}", "--window-size=1200,2000", html.as_uri()],
        capture_output=True, timeout=120, check=True,
    )
    image = Image.open(png).convert("RGB")
    assert image.size == (1200, 2000)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200  # text, tables and plots, not a blank page
    blue = sum(count for count, rgb in colours if all(abs(a - b) < 12 for a, b in zip(rgb, PLOT_BLUE)))
    assert blue > 100  # the plots' markers and bars were decoded and drawn by the browser
