"""The tools on real engines holding the benchmark KBs: `oxigraph serve` and Virtuoso, side by side.

The MetaQA and PathQuestion KBs are loaded with kg-mcp's own loader, written out as N-Triples and
served by each engine. The endpoint's ids must read like the local store's (`kg:Steven_Spielberg`,
`directed_by`), be accepted back, and gold relation paths must reach the gold answers.
"""

from __future__ import annotations

import json

import pytest
from conftest import ENGINES, store_as_ntriples
from test_multihop import _pathquestion_cases, spread, walk

from kg_mcp.backends import open_endpoint
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, verify
from kg_mcp.tools.verify import PathClaim, TripleClaim

QUESTIONS_PER_HOP = 15  # per engine; test_multihop walks 60 on the local store


@pytest.fixture(scope="session")
def metaqa_nt(metaqa_store_dir, tmp_path_factory):
    return store_as_ntriples(metaqa_store_dir, tmp_path_factory.mktemp("nt") / "metaqa.nt")


@pytest.fixture(scope="session")
def pathquestion_nt(pathquestion_store_dir, tmp_path_factory):
    return store_as_ntriples(pathquestion_store_dir, tmp_path_factory.mktemp("nt") / "pathquestion.nt")


@pytest.fixture(scope="module", params=ENGINES)
def metaqa_remote(request, engine_endpoints, metaqa_nt):
    return open_endpoint(engine_endpoints(request.param, "metaqa", metaqa_nt), settings=Settings())


@pytest.fixture(scope="module", params=ENGINES)
def pathquestion_remote(request, engine_endpoints, pathquestion_nt):
    return open_endpoint(engine_endpoints(request.param, "pathquestion", pathquestion_nt), settings=Settings())


def test_metaqa_ids_read_like_the_local_store(metaqa_remote):
    vocab = metaqa_remote.vocab
    assert vocab.prefixes["kg"] == "http://kg-mcp.local/entity/"
    assert vocab.bare_namespaces[0] == "http://kg-mcp.local/relation/"
    assert {vocab.sources["http://kg-mcp.local/entity/"], vocab.sources["http://kg-mcp.local/relation/"]} == {"sample"}
    out = search(metaqa_remote, Settings(), "kg:Steven_Spielberg", "incoming", ["directed_by"])
    assert out.data.view == "rows" and out.data.total > 20
    assert {r.property for r in out.data.rows} == {"~directed_by"} or {r.property for r in out.data.rows} == {"directed_by"}
    assert "kg:Jaws" in {r.value.id for r in out.data.rows}
    assert "<http" not in out.text and "kg:Steven_Spielberg" in out.text


@pytest.mark.parametrize("tool", ["search", "get_relations", "explore_kg", "find_entities", "verify"])
def test_metaqa_every_tool_answers_as_on_the_local_store(metaqa_remote, metaqa, tool):
    settings = Settings()
    calls = {
        "search": lambda b: search(b, settings, "kg:Jaws"),
        "get_relations": lambda b: get_relations(b, settings, "Jaws"),
        "explore_kg": lambda b: explore_kg(b, settings, "kg:Jaws", ["directed_by", "~has_tags", "starred_actors"]),
        "find_entities": lambda b: find_entities(b, settings, "steven spielberg"),
        "verify": lambda b: verify(
            b,
            settings,
            [
                TripleClaim(subject="kg:Jaws", relation="directed_by", object="kg:Steven_Spielberg"),
                TripleClaim(subject="Jaws", relation="directed_by", object="kg:George_Lucas"),
                PathClaim(
                    path=[
                        TripleClaim(subject="kg:Jaws", relation="directed_by", object="kg:Steven_Spielberg"),
                        TripleClaim(subject="kg:Steven_Spielberg", relation="~directed_by", object="kg:Jurassic_Park"),
                    ]
                ),
            ],
        ),
    }
    remote, local = calls[tool](metaqa_remote), calls[tool](metaqa)
    assert "<http" not in remote.text
    assert same_output(remote, local)


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_metaqa_gold_paths_on_the_engine(metaqa_remote, data_dir, hops):
    questions = json.loads((data_dir / "metaqa" / f"{hops}hop_dev.json").read_text())
    cases = spread(questions, QUESTIONS_PER_HOP)
    for q in cases:
        _, labels = walk(metaqa_remote, Settings(), q["topic_entity"], q["gold_relation_path"], revisit_topic=False)
        assert labels == set(q["answers"]), q["id"]
    assert len(cases) == QUESTIONS_PER_HOP


@pytest.mark.parametrize("name", ["PQ-2H.txt", "PQ-3H.txt"])
def test_pathquestion_gold_paths_on_the_engine(pathquestion_remote, data_dir, name):
    cases = spread(_pathquestion_cases(data_dir, name), QUESTIONS_PER_HOP)
    for subject, relations, answer in cases:
        _, labels = walk(pathquestion_remote, Settings(), subject, relations)
        assert answer in labels, (subject, relations, answer)
    assert len(cases) == QUESTIONS_PER_HOP


def test_pathquestion_every_tool_with_compact_ids(pathquestion_remote, pathquestion):
    settings = Settings()
    subject, relations, answer = _pathquestion_cases_first(pathquestion)
    for call in (
        lambda b: search(b, settings, subject),
        lambda b: get_relations(b, settings, subject),
        lambda b: explore_kg(b, settings, subject, [relations[0]]),
        lambda b: find_entities(b, settings, subject.split(":")[-1].replace("_", " ")),
    ):
        remote, local = call(pathquestion_remote), call(pathquestion)
        assert "<http" not in remote.text
        assert same_output(remote, local)


def _pathquestion_cases_first(local):
    from conftest import DATA

    subject, relations, answer = _pathquestion_cases(DATA, "PQ-2H.txt")[0]
    return local.vocab.compact(local.resolve_entity(subject)), relations, answer


def same_output(remote, local) -> bool:
    """The same rows and the same lines; an engine may list rows of equal rank in another order."""
    return _canonical(remote.data.model_dump()) == _canonical(local.data.model_dump()) and sorted(
        remote.text.splitlines()
    ) == sorted(local.text.splitlines())


def _canonical(value):
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((_canonical(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value
