"""`kg-mcp report` in-process: two real runs side by side, the table, the plots, the trace pages."""

from __future__ import annotations

import asyncio
import io

import pytest
from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select
from kg_mcp.agents.evaluation.html import trace_steps, write_report
from kg_mcp.agents.evaluation.runner import EvalPlan, run_eval
from kg_mcp.agents.evaluation.stores import KGTarget
from kg_mcp.agents.evaluation.summary import load_run, summarise, table
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.trace import read_trace
from PIL import Image
from test_eval_runner import gold_model


@pytest.fixture(scope="module")
def two_runs(metaqa, data_dir, tmp_path_factory):
    """A gold-path run priced as gpt-4o-mini on 1- and 2-hop questions, and a local model that abstains."""
    root = tmp_path_factory.mktemp("runs")
    one = load_benchmark("metaqa-1hop", data_dir)
    two = load_benchmark("metaqa-2hop", data_dir)
    questions = select(one.questions, limit=3) + select(two.questions, limit=3)
    kg = KGTarget(backend=metaqa)
    gold = EvalPlan(benchmark=two, questions=questions, agent="sog", model="openai:gpt-4o-mini", out=root / "gold", kg=kg)
    asyncio.run(run_eval(gold, gold_model(questions), progress=False))
    shy = EvalPlan(benchmark=two, questions=questions, agent="sog", model="openai:my-local-model", out=root / "shy", kg=kg)
    shy_model = ScriptedModel(lambda messages, tools: "I cannot tell. Final answer: {}", name="shy")
    asyncio.run(run_eval(shy, shy_model, progress=False))
    return [load_run(root / "gold"), load_run(root / "shy")], root


def test_table_puts_runs_side_by_side(two_runs):
    runs, _ = two_runs
    summaries = [summarise(r) for r in runs]
    text = table(summaries)
    rows = {line.split("  ")[0]: line.split() for line in text.splitlines()}
    assert rows["SoG Hits@1"][-2:] == ["100.0%", "0.0%"]
    assert rows["R2-KG coverage"][-2:] == ["100.0%", "0.0%"]
    assert rows["R2-KG hit rate (answered)"][-2:] == ["100.0%", "-"]  # nothing answered: no ratio
    assert rows["cost / answer (USD)"][-1] == "-" and rows["cost / answer (USD)"][-2] != "-"
    assert "no price known for openai:my-local-model: tokens only" in text
    assert "[1] sog · openai:gpt-4o-mini · metaqa-2hop" in text
    assert summaries[0]["by_hops"][1]["hits@1"] == 1.0 and summaries[0]["by_hops"][2]["n"] == 3
    assert "ARK-V1 reliability (1-H/log2 3)" not in rows  # no repeats, no reliability


def test_page_plots_and_trace_pages(two_runs, tmp_path):
    runs, root = two_runs
    summaries = [summarise(r) for r in runs]
    page, plots = write_report(runs, summaries, tmp_path / "report.html")
    for name, png in plots.items():
        image = Image.open(io.BytesIO(png)).convert("RGB")
        assert image.width > 300 and image.height > 200, name
        assert len(image.getcolors(maxcolors=1 << 20)) > 20, name  # axes, text and data, not blank
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 3
    assert html.count('href="') == 12  # six answers per run, each with its trace page
    assert (root / "gold" / "traces" / "1-hop-dev-0-r0.html").is_file()
    assert "abstained" in html and "correct" in html and "openai:my-local-model" in html


def test_trace_steps_follow_the_run(two_runs):
    runs, root = two_runs
    events = read_trace(root / "gold" / runs[0].records[3]["trace"])  # a 2-hop question
    steps = trace_steps(events)
    kinds = [s["kind"] for s in steps]
    assert kinds[0] == "start" and kinds[-1] == "final"
    assert kinds.count("request") == kinds.count("reply") == 3  # two searches, then the answer
    searches = [s for s in steps if s["kind"] == "tool" and s["title"] == "search"]
    assert len(searches) >= 2 and all(s["result"] and s["result"]["text"].startswith("search ") for s in searches)
    assert steps[-1]["answers"] == runs[0].records[3]["answers"]
    later = [s for s in steps if s["kind"] == "request"][1]
    assert [m["role"] for m in later["new"]] == ["tool"]  # only what is new since the last request
