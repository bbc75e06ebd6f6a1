"""KG-Reasoner's reward on hand-computed cases, its format check, and export-trajectories on real
traces from every driver (SoG, ARK-V1, R2-KG, KG-Reasoner) run by scripted models on MetaQA."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner
from kg_mcp.agents.ark import run_ark
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kg_reasoner import run_kgr
from kg_mcp.agents.kgr_format import format_problems, pending, split_answers
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.r2kg import run_r2kg
from kg_mcp.agents.rewards import Reward, is_correct, retrieval_reward, reward
from kg_mcp.agents.sog import run_sog
from kg_mcp.agents.trace import Trace
from kg_mcp.agents.trajectories import export, find_traces, load_gold, trajectory
from kgr_scripts import as_chat_policy, backtracker
from test_ark import Follower
from test_r2kg import gold_supervisor
from test_r2kg import gold_walker as r2kg_walker
from test_sog import gold_path_policy

from kg_mcp.cli import main

JOEL = "what are the languages spoken in the films directed by [Joel Zwick]"  # gold: Greek
PATH = ["~directed_by", "in_language"]

ONE_SEARCH = (
    "<think>Who directed it? <search>kg:Jaws</search>\n\n<triples>\n(1) Jaws [kg:Jaws] | directed_by | "
    "Steven Spielberg [kg:Steven_Spielberg]\n</triples>\n\nSpielberg. </think>\n\n<answer>Steven Spielberg</answer>"
)


# --- the reward, by hand --------------------------------------------------------------------------


def test_retrieval_reward_is_half_a_point_a_search_capped_at_0_8():
    assert [retrieval_reward(n) for n in range(5)] == [0.0, 0.5, 0.8, 0.8, 0.8]


@pytest.mark.parametrize(
    "completion, searches, predicted, gold, expected",
    [
        # 1 search (0.5) + well formed (0.5) + correct (1) = 2.0
        (ONE_SEARCH, 1, ["Steven Spielberg"], ["Steven Spielberg"], (0.5, 0.5, 1.0, 2.0)),
        # 3 searches (capped 0.8) + well formed + wrong = 1.3
        (ONE_SEARCH, 3, ["Tom Hanks"], ["Steven Spielberg"], (0.8, 0.5, 0.0, 1.3)),
        # no search, no </think>: 0 + 0 + correct (case and punctuation aside) = 1.0
        ("<think>I know it.\n\n<answer>steven spielberg.</answer>", 0, ["steven spielberg."], ["Steven Spielberg"], (0.0, 0.0, 1.0, 1.0)),
        # a search left open: format 0; abstained: answer 0 -> 0.5
        ("<think><search>kg:Jaws</think>\n\n<answer></answer>", 1, [], ["Steven Spielberg"], (0.5, 0.0, 0.0, 0.5)),
        # no gold answers: the answer part is unknown and left out -> 1.0
        (ONE_SEARCH, 1, ["Steven Spielberg"], None, (0.5, 0.5, None, 1.0)),
    ],
)
def test_reward_on_hand_computed_cases(completion, searches, predicted, gold, expected):
    got = reward(completion, searches=searches, predicted=predicted, gold=gold)
    assert (got.retrieval, got.format, got.answer, got.total) == expected


def test_repairs_by_the_driver_cost_the_format_reward():
    assert reward(ONE_SEARCH, searches=1, predicted=["x"], gold=None, repaired=["<answer> left open"]).format == 0.0
    assert Reward(0.8, 0.5, 1.0).to_dict() == {"retrieval": 0.8, "format": 0.5, "answer": 1.0, "total": 2.3}


def test_correctness_by_hit_or_exact_set():
    gold = ["Greek", "English"]
    assert is_correct(["the greek"], gold) and not is_correct(["French"], gold)
    assert not is_correct(["Greek"], gold, "exact") and is_correct(["english", "Greek"], gold, "exact")
    assert not is_correct([], gold) and not is_correct(["Greek"], [])
    assert is_correct(["Lord_of_the_Rings"], ["The Lord of the Rings"])


@pytest.mark.parametrize(
    "completion, problem",
    [
        ("<think>a</think>\n\n<answer>b</answer>", None),
        (ONE_SEARCH, None),
        ("<think>a <search>x</search> b</think>\n\n<answer>c</answer>", "a <search> without the <triples> that answer it"),
        ("<think>a <triples>\n(1) x\n</triples></think>\n\n<answer>c</answer>", "<triples> that no <search> asked for"),
        ("<think>a <search>x</think>\n\n<answer>c</answer>", "</think> does not close the last opened tag"),
        ("<think>a</think>\n\n<answer>b</answer><answer>c</answer>", "2 <answer> tags, not one"),
        ("<think>a</think>\n\n<answer>b</answer> and more", "the completion does not end with its <answer>"),
        ("a</think>\n\n<answer>b</answer>", "</think> does not close the last opened tag"),
        ("<think>a\n\n<answer>b</answer>", "<answer> inside another tag"),
        ("<think>a <think>b</think></think><answer>c</answer>", "more than one <think>"),
        ("<think>a</think><search>x</search>\n<triples>\ny\n</triples><answer>b</answer>", "<search> outside <think> or inside another tag"),
    ],
)
def test_format_problems(completion, problem):
    found = format_problems(completion)
    assert (found == []) if problem is None else (problem in found), found


def test_pending_tags_and_answer_lists():
    assert pending("a <search>x</search> b <answer>Gre").tag == "answer"
    assert pending("<answer>x</answer>") is None
    assert split_answers("Greek | English\nFrench") == ["Greek", "English", "French"]


# --- export from real traces ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, metaqa):
    """Traces of one MetaQA 2-hop question by each driver, as `kg-mcp ask` writes them."""
    folder = tmp_path_factory.mktemp("runs")
    asyncio.run(_runs(folder, metaqa))
    (folder / "results.jsonl").write_text(json.dumps({"question": JOEL, "answers": ["Greek"], "gold": ["Greek"]}) + "\n")
    return folder


async def _runs(folder, metaqa):
    topics = {"Joel Zwick": None}
    async with KGClient.connect(server=metaqa) as kg:
        await run_sog(JOEL, kg, ScriptedModel(gold_path_policy(PATH)), topics=topics, trace=Trace(folder / "sog.jsonl"))
        await run_ark(JOEL, kg, Follower(None, PATH).model, topics=topics, trace=Trace(folder / "ark.jsonl"))
        operator = ScriptedModel(r2kg_walker(PATH), name="operator")
        supervisor = ScriptedModel(gold_supervisor(PATH, exclude="Joel Zwick"), name="supervisor")
        await run_r2kg(JOEL, kg, operator, supervisor, topics=topics, trace=Trace(folder / "nested" / "r2kg.jsonl"))
        kgr = ScriptedModel(as_chat_policy(backtracker("~directed_by", "written_by", "in_language")))
        await run_kgr(JOEL, kg, kgr, topics=topics, trace=Trace(folder / "kgr.jsonl"))
        # a run cut short (no final event), and a file that is no trace
        unfinished = Trace(folder / "unfinished.jsonl")
        unfinished.event("start", method="sog", question=JOEL)
        unfinished.close()


def records_by_method(records):
    return {r["method"]: r for r in records}


def test_every_driver_exports_a_well_formed_rewarded_trajectory(run_dir, data_dir):
    assert [p.name for p in find_traces(run_dir)] == ["ark.jsonl", "kgr.jsonl", "r2kg.jsonl", "sog.jsonl", "unfinished.jsonl"]
    records = list(export(run_dir, gold_path=data_dir / "metaqa" / "2hop_dev.json"))
    by_method = records_by_method(records)
    assert sorted(by_method) == ["ark", "kgr", "r2kg", "sog"]  # the unfinished run is left out
    for method, record in by_method.items():
        assert record["format_problems"] == [], (method, record["format_problems"], record["completion"])
        assert record["predicted"] == ["Greek"] and record["gold"] == ["Greek"]
        assert record["searches"] >= 2
        assert record["reward"] == {"retrieval": 0.8, "format": 0.5, "answer": 1.0, "total": 2.3}, method
        assert record["prompt"].endswith("Assistant: <think>") and JOEL in record["prompt"]
        assert record["messages"][-1]["content"] == "<think>" + record["completion"]
        assert record["completion"].endswith("</think>\n\n<answer>Greek</answer>")
    # SoG's search rows became triples, read from subject to object
    sog = by_method["sog"]["completion"]
    assert sog.startswith("<search>kg:Joel_Zwick</search>\n\n<triples>\n(1) My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding] | directed_by | Joel Zwick [kg:Joel_Zwick]\n</triples>")
    assert "| in_language | Greek [kg:Greek]" in sog and "find_entities" not in sog
    # R2-KG's explore_kg results too; its relation lists stay as the tool's text
    assert "My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding] | directed_by | Joel Zwick [kg:Joel_Zwick]" in by_method["r2kg"]["completion"]
    # KG-Reasoner's own text is kept as written, backtrack included
    assert "<search>BACKTRACK</search>" in by_method["kgr"]["completion"] and by_method["kgr"]["searches"] == 4


def test_gold_defaults_to_the_runs_results_file_and_without_gold_the_answer_is_unknown(run_dir, tmp_path):
    records = list(export(run_dir))  # RUN_DIR/results.jsonl: question, answers (predicted), gold
    assert {r["reward"]["answer"] for r in records} == {1.0}
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "sog.jsonl").write_text((run_dir / "sog.jsonl").read_text())
    (record,) = export(bare)
    assert record["gold"] is None and record["reward"]["answer"] is None and record["reward"]["total"] == 1.3


def test_gold_files_of_several_shapes(tmp_path):
    (tmp_path / "list.json").write_text(json.dumps([{"question": "Q  one", "answers": ["A"]}]))
    (tmp_path / "map.json").write_text(json.dumps({"Q one": "A"}))
    (tmp_path / "rows.jsonl").write_text(
        json.dumps({"question": "q one", "answers": ["wrong"], "gold": [{"label": "A"}]}) + "\n" + json.dumps({"question": "q two", "answer": "B"}) + "\n"
    )
    assert load_gold(tmp_path / "list.json") == {"q one": ["A"]}
    assert load_gold(tmp_path / "map.json") == {"q one": ["A"]}
    assert load_gold(tmp_path / "rows.jsonl") == {"q one": ["A"], "q two": ["B"]}


def test_a_run_that_abstained_is_exported_with_an_empty_answer():
    events = [
        {"type": "start", "method": "sog", "question": "q"},
        {"type": "model_reply", "text": "I cannot find it. Final answer: {}"},
        {"type": "final", "answers": [], "abstained": True, "extra": {}},
    ]
    record = trajectory(events, gold={"q": ["x"]})
    assert record["completion"] == "I cannot find it. Final answer: {}\n</think>\n\n<answer></answer>"
    assert record["reward"] == {"retrieval": 0.0, "format": 0.5, "answer": 0.0, "total": 0.5}


def test_cli_writes_records_and_filters_by_reward(run_dir, tmp_path):
    out = tmp_path / "sft.jsonl"
    result = CliRunner().invoke(main, ["export-trajectories", str(run_dir), "--out", str(out), "--min-reward", "2.3"])
    assert result.exit_code == 0, result.output
    assert len(out.read_text().splitlines()) == 4 and "4 trajectories from 5 traces" in result.output
    result = CliRunner().invoke(main, ["export-trajectories", str(run_dir), "--match", "exact", "--min-reward", "9"])
    assert result.exit_code == 0 and "0 trajectories from 5 traces" in result.output
