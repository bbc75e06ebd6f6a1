"""Benchmark loaders on the real files in ../shared/data, and on a user's own file of the same format."""

from __future__ import annotations

import json
import warnings

import pytest
from kg_mcp.agents.evaluation.benchmarks import NAMES, DuplicateId, MalformedEntry, load_benchmark, select
from kg_mcp.agents.evaluation.oracle import run_oracle
from kg_mcp.agents.evaluation.stores import ensure_store
from kg_mcp.agents.kg_client import KGClient

from kg_mcp.backends import open_store
from kg_mcp.cli import _BENCHMARKS
from kg_mcp.errors import ConfigError

SIZES = {  # ../shared/data/README.md; CoLoTa_qa.json has 1,691 entries, one malformed upstream
    "metaqa-1hop": 8836, "metaqa-2hop": 11942, "metaqa-3hop": 8890,
    "pathquestion-2h": 1908, "pathquestion-3h": 5198, "pathquestion-l2h": 1594,
    "qald10": 394, "colota-qa": 1690, "colota-cv": 1650,
}


def test_the_command_line_offers_every_benchmark():
    assert _BENCHMARKS == NAMES


@pytest.mark.parametrize("name", sorted(SIZES))
def test_sizes_and_shapes(name, data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MalformedEntry)
        warnings.simplefilter("ignore", DuplicateId)
        bench = load_benchmark(name, data_dir)
    assert len(bench.questions) == SIZES[name]
    assert len({q.id for q in bench.questions}) == len(bench.questions)
    assert all(q.text for q in bench.questions)
    # upstream as it is: QALD-10 question 313 has no gold answer; 7 CoLoTa entries name no entity
    assert [q.id for q in bench.questions if not q.answers] == (["313"] if name == "qald10" else [])
    without_topics = {"colota-qa": 6, "colota-cv": 1}.get(name, 0)
    assert sum(not q.topics for q in bench.questions) == without_topics
    if name.startswith(("metaqa", "pathquestion")):
        hops = int(name[-4]) if name.startswith("metaqa") else int(name[-2])
        assert {q.hops for q in bench.questions} == {hops}
        assert all(len(q.gold_path) == hops for q in bench.questions)
        assert [k.is_file() for k in bench.kb_files] == [True] and bench.endpoint is None
    else:
        assert bench.kb_files == [] and bench.endpoint == "wikidata"


def test_metaqa_question(data_dir):
    q = load_benchmark("metaqa-2hop", data_dir).questions[0]
    assert (q.id, q.answers, q.topics, q.gold_path) == (
        "2-hop-dev-0", ("Greek",), {"Joel Zwick": None}, ("~directed_by", "in_language"))


def test_pathquestion_answers_keep_every_alternative(data_dir):
    bench = load_benchmark("pathquestion-2h", data_dir)
    q = bench.questions[0]
    assert q.text == "which nationality is frederica_of_mecklenburg-strelitz 's couple ?"
    assert q.topics == {"frederica_of_mecklenburg-strelitz": None} and q.gold_path == ("spouse", "nationality")
    several = [q for q in bench.questions if len(q.answers) > 1]
    assert len(several) == 150 and bench.revisit_topic
    # an answer with parentheses of its own (PQL: "PG_(USA)(PG_(USA)/)")
    pql = load_benchmark("pathquestion-l2h", data_dir)
    assert any(q.answers == ("PG_(USA)",) for q in pql.questions)


def test_qald10_answers_and_topics(data_dir):
    questions = {q.id: q for q in load_benchmark("qald10", data_dir).questions}
    q = questions["0"]
    assert q.text == "After whom is the Riemannian geometry named?"
    assert q.answers == ("wd:Q42299",) and q.topics == {"wd:Q761383": "wd:Q761383"} and q.kind == "entities"
    asks = [q for q in questions.values() if q.kind == "yes_no"]
    assert len(asks) == 61 and all(q.answers in (("True",), ("False",)) for q in asks)
    assert len(questions["5"].answers) == 4 and all(a.startswith("wd:Q") for a in questions["5"].answers)


def test_colota_skips_the_malformed_entry_and_renames_a_repeated_id(data_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        qa = load_benchmark("colota-qa", data_dir)
    said = sorted((w.category.__name__, str(w.message)) for w in caught)
    assert said == [
        ("DuplicateId", "CoLoTa_qa.json: id S200 is used twice upstream: the later entry is S200~2"),
        ("MalformedEntry", "CoLoTa_qa.json: entry S39 is malformed upstream (its answer is not true/false): skipped"),
    ]
    ids = [q.id for q in qa.questions]
    assert "S39" not in ids and {"S200", "S200~2"} <= set(ids)
    q = qa.questions[0]
    assert q.kind == "yes_no" and q.answers == ("True",) and q.topics == {"Horsens": "wd:Q190235", "Ikast": "wd:Q1021277"}
    with pytest.warns(DuplicateId, match="C150"):
        cv = load_benchmark("colota-cv", data_dir)
    assert {q.answers for q in cv.questions} == {("True",), ("False",)}


def test_sample_is_seeded_and_keeps_file_order(data_dir):
    questions = load_benchmark("metaqa-1hop", data_dir).questions
    a, b = select(questions, sample=50, seed=1), select(questions, sample=50, seed=1)
    assert a == b and a != select(questions, sample=50, seed=2)
    order = {q.id: i for i, q in enumerate(questions)}
    assert [order[q.id] for q in a] == sorted(order[q.id] for q in a)
    assert select(questions, sample=50, seed=1, limit=5) == a[:5]
    assert select(questions, limit=3) == questions[:3]


async def test_a_users_own_files_in_the_same_format(tmp_path):
    """A MetaQA-format question file with its kb.txt beside it: store built, oracle walked."""
    (tmp_path / "kb.txt").write_text("Alien|directed_by|Ridley Scott\nAlien|release_year|1979\nBlade Runner|directed_by|Ridley Scott\n")
    (tmp_path / "mine.json").write_text(json.dumps([
        {"id": "m1", "question": "what did [Ridley Scott] direct", "topic_entity": "Ridley Scott",
         "answers": ["Alien", "Blade Runner"], "qtype": "director_to_movie", "gold_relation_path": ["~directed_by"]},
        {"id": "m2", "question": "when was the film by [Ridley Scott] released", "topic_entity": "Ridley Scott",
         "answers": ["1979"], "qtype": "x", "gold_relation_path": ["~directed_by", "release_year"]},
    ]))
    bench = load_benchmark("metaqa-1hop", tmp_path / "mine.json")
    assert bench.kb_files == [tmp_path / "kb.txt"] and [q.hops for q in bench.questions] == [1, 2]
    store = ensure_store(bench, tmp_path / "cache", progress=False)
    assert store.parent == tmp_path / "cache" / "stores"
    async with KGClient.connect(server=open_store(store)) as kg:
        summary, rows = await run_oracle(bench, bench.questions, kg, progress=False)
    assert summary["recall"] == 1.0 and [r.calls for r in rows] == [1, 3]


def test_missing_data_says_where_to_put_it(tmp_path):
    with pytest.raises(ConfigError, match="No metaqa-1hop questions at .*--data"):
        load_benchmark("metaqa-1hop", tmp_path)
