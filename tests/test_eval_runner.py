"""The evaluation runner in-process: scripted models (real `Model`s) over the real MetaQA store via MCP.

These check the bookkeeping (each answer once, resume, failures retried, traces, cost, metrics),
not any model's accuracy.
"""

from __future__ import annotations

import itertools
import json

import pytest
from kg_mcp.agents.evaluation.benchmarks import Question, load_benchmark, select
from kg_mcp.agents.evaluation.html import write_report
from kg_mcp.agents.evaluation.prices import PRICES
from kg_mcp.agents.evaluation.rundir import RunDir
from kg_mcp.agents.evaluation.runner import GIVE_UP_AFTER, EvalPlan, run_eval
from kg_mcp.agents.evaluation.stores import KGTarget
from kg_mcp.agents.evaluation.summary import load_run, summarise
from kg_mcp.agents.models import ModelError
from kg_mcp.agents.models.base import Reply
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.trace import read_trace
from test_ark import Follower
from test_sog import gold_path_policy

from kg_mcp.errors import ConfigError


def gold_model(questions: list[Question], fail_on: str | None = None) -> ScriptedModel:
    """A SoG model that walks each question's gold path (and fails on question `fail_on`)."""
    paths = {q.text: list(q.gold_path) for q in questions}

    def policy(messages, tools):
        content = messages[1].content
        text = next(t for t in paths if content.startswith(f"Question: {t} "))
        if text == fail_on:
            raise ModelError("the provider is down (scripted)")
        return gold_path_policy(paths[text])(messages, tools)

    return ScriptedModel(policy, name="scripted-gold")


@pytest.fixture
def one_hop(data_dir) -> tuple:
    bench = load_benchmark("metaqa-1hop", data_dir)
    return bench, select(bench.questions, sample=6, seed=3)


def plan_for(bench, questions, out, metaqa, **options) -> EvalPlan:
    return EvalPlan(benchmark=bench, questions=questions, agent="sog", model="openai:gpt-4o-mini", out=out,
                    kg=KGTarget(backend=metaqa), **options)


async def test_concurrent_repeated_run_records_each_answer_once(metaqa, one_hop, tmp_path):
    bench, questions = one_hop
    plan = plan_for(bench, questions, tmp_path / "run", metaqa, repeat=2, concurrency=3)
    stats = await run_eval(plan, gold_model(questions), progress=False)
    assert (stats.total, stats.done, stats.failed, stats.skipped) == (12, 12, 0, 0)
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 12
    assert {(r["question_id"], r["repeat"]) for r in records} == {(q.id, r) for q in questions for r in (0, 1)}
    gold = {q.id: set(q.answers) for q in questions}
    for r in records:
        assert set(r["answers"]) == gold[r["question_id"]] and r["correct"] and r["outcome"] == "correct"
        events = read_trace(tmp_path / "run" / r["trace"])
        assert events[0]["type"] == "start" and events[-1]["type"] == "final" and events[-1]["answers"] == r["answers"]
        price = PRICES["gpt-4o-mini"]
        assert r["tokens_in"] > 0 and r["cost_usd"] == pytest.approx(price.cost(r["tokens_in"], r["tokens_out"]))
    summary = summarise(load_run(tmp_path / "run"))
    assert summary["hits@1"] == 1.0 and summary["exact_match"] == 1.0 and summary["coverage"] == 1.0
    assert summary["reliability"] == 1.0 and summary["sc_coverage"] == 1.0 and summary["repeats"] == 2
    # started again: everything is done, the model is never asked
    never = ScriptedModel([], name="never")
    again = await run_eval(plan, never, progress=False)
    assert (again.skipped, again.done) == (12, 0) and never.seen == []


async def test_a_failed_answer_is_retried_on_the_next_start(metaqa, one_hop, tmp_path):
    bench, questions = one_hop
    plan = plan_for(bench, questions, tmp_path / "run", metaqa)
    stats = await run_eval(plan, gold_model(questions, fail_on=questions[2].text), progress=False)
    assert (stats.done, stats.failed) == (5, 1)
    folder = RunDir(tmp_path / "run")
    assert [e["question_id"] for e in folder.errors()] == [questions[2].id]
    assert "provider is down" in folder.errors()[0]["error"]
    assert questions[2].id not in {r["question_id"] for r in folder.records()}
    model = gold_model(questions)
    retry = await run_eval(plan, model, progress=False)
    assert (retry.skipped, retry.done, retry.failed) == (5, 1, 0)
    assert {m["messages"][1].content.split(" {")[0] for m in model.seen} == {f"Question: {questions[2].text}"}
    assert len(folder.records()) == 6


async def test_a_start_whose_first_runs_all_fail_stops(metaqa, data_dir, tmp_path):
    bench = load_benchmark("metaqa-1hop", data_dir)
    questions = select(bench.questions, limit=12)

    def down(messages, tools):
        raise ModelError("401 invalid API key (scripted)")

    stats = await run_eval(plan_for(bench, questions, tmp_path / "run", metaqa), ScriptedModel(down), progress=False)
    assert stats.gave_up and (stats.failed, stats.done) == (GIVE_UP_AFTER, 0)
    assert len(RunDir(tmp_path / "run").errors()) == GIVE_UP_AFTER


async def test_a_torn_last_line_is_cut_and_the_run_goes_on(metaqa, one_hop, tmp_path):
    bench, questions = one_hop
    await run_eval(plan_for(bench, questions[:3], tmp_path / "run", metaqa), gold_model(questions), progress=False)
    results = tmp_path / "run" / "results.jsonl"
    with results.open("a") as f:
        f.write('{"question_id": "' + questions[3].id + '", "repe')  # killed mid-write
    stats = await run_eval(plan_for(bench, questions, tmp_path / "run", metaqa), gold_model(questions), progress=False)
    assert (stats.skipped, stats.done) == (3, 3)
    lines = results.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["question_id"] for line in lines)


async def test_another_run_in_the_same_folder_is_refused(metaqa, one_hop, tmp_path):
    bench, questions = one_hop
    await run_eval(plan_for(bench, questions[:1], tmp_path / "run", metaqa), gold_model(questions), progress=False)
    other = plan_for(bench, questions[:1], tmp_path / "run", metaqa)
    other.agent = "r2kg"
    with pytest.raises(ConfigError, match="holds another run.*agent: 'sog' there, 'r2kg' now"):
        await run_eval(other, gold_model(questions), progress=False)


@pytest.mark.filterwarnings("ignore::kg_mcp.agents.evaluation.benchmarks.DuplicateId")
async def test_yes_no_claims_go_to_ark_as_yes_no_and_score_by_verdict(metaqa, data_dir, tmp_path):
    """A claim (not phrased as a question) run three times: verdicts True, None, True."""
    claim = Question("c1", "Jaws was directed by Steven Spielberg.", ("True",), kind="yes_no", topics={"Jaws": None})
    verdicts = itertools.cycle(["True", "None", "True"])
    follower = Follower(None, ["directed_by"], verdict=lambda steps: next(verdicts))
    bench = load_benchmark("colota-cv", data_dir)
    plan = EvalPlan(benchmark=bench, questions=[claim], agent="ark", model="anthropic:claude-sonnet-4-5",
                    out=tmp_path / "run", kg=KGTarget(backend=metaqa), repeat=3)
    await run_eval(plan, follower.model, progress=False)
    assert "ark_verdict" in follower.stages()  # asked for True/False/None although it reads as a claim
    records = RunDir(tmp_path / "run").records()
    assert [r["verdict"] for r in records] == ["True", "None", "True"]
    assert [r["outcome"] for r in records] == ["True", "None", "True"]
    s = summarise(load_run(tmp_path / "run"))
    assert s["answer_rate"] == pytest.approx(2 / 3) and s["overall_accuracy"] == pytest.approx(2 / 3)
    assert s["conditional_accuracy"] == 1.0
    assert s["reliability"] == pytest.approx(0.420620, abs=1e-6)  # outcomes (2/3, 1/3): 1 - H/log2 3
    assert s["sc_coverage"] == 0.0  # one run abstained: strict self-consistency abstains
    page, _ = write_report([load_run(tmp_path / "run")], [s], tmp_path / "report.html")  # no hop counts here
    html = page.read_text()
    assert "ARK-V1 reliability" in html and html.count('href="') == 3


@pytest.mark.parametrize("name", ["metaqa-1hop", "pathquestion-2h"])
async def test_each_benchmark_states_its_own_topic_rule(name, request, data_dir, tmp_path):
    # The rule on the topic entity is the question set's data: PathQuestion's paths may come back
    # through the topic entity, MetaQA's answers never do; the driver's system prompt says which.
    bench = load_benchmark(name, data_dir)
    backend = request.getfixturevalue("metaqa" if name.startswith("metaqa") else "pathquestion")
    questions = select(bench.questions, sample=1, seed=1)
    systems: list[str] = []

    def policy(messages, tools):
        systems.append(messages[0].content)
        return Reply(text="Final answer: {nothing}")

    plan = plan_for(bench, questions, tmp_path / "run", backend)
    await run_eval(plan, model=ScriptedModel(policy, name="scripted-rule"), progress=False)
    assert systems and bench.convention == ("pathquestion" if name.startswith("pathquestion") else "metaqa")
    overrides = "overrides any example that leaves such entities out"
    assert (overrides in systems[0]) is (bench.convention == "pathquestion")
