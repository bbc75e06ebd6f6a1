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
    subject, relations = _pathquestion_cases_first(pathquestion)
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

    subject, relations, _ = _pathquestion_cases(DATA, "PQ-2H.txt")[0]
    return local.vocab.compact(local.resolve_entity(subject)), relations


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


# --- a hub of a million edges behind each engine ----------------------------------------------------

HUB_EDGES = 1_000_000
E, P = "http://bench.test/e/", "http://bench.test/p/"


@pytest.fixture(scope="session")
def million_hub_nt(tmp_path_factory):
    path = tmp_path_factory.mktemp("hub") / "hub.nt"
    with path.open("w") as f:
        f.write(f'<{E}hub> <http://www.w3.org/2000/01/rdf-schema#label> "The Hub" .\n')
        f.writelines(f"<{E}n{i}> <{P}{'country' if i % 2 else 'based_in'}> <{E}hub> .\n" for i in range(HUB_EDGES))
    return path


@pytest.fixture(scope="module", params=ENGINES)
def hub_remote(request, engine_endpoints, million_hub_nt):
    return open_endpoint(engine_endpoints(request.param, "hub", million_hub_nt), settings=Settings(count_cap=100_000))


def test_million_edge_hub_is_bounded_and_says_so(hub_remote):
    settings = hub_remote.settings
    out = search(hub_remote, settings, "The Hub", "incoming")
    assert out.data.view == "properties" and not out.data.total_exact
    assert out.data.total == settings.count_cap and "at least 100,000 rows" in out.text
    relations = get_relations(hub_remote, settings, f"<{E}hub>").data.relations
    # The relations' namespace was found to dominate, so they are shown bare, as on a loaded store.
    assert {r.relation for r in relations} == {"~country", "~based_in"}
    assert all(not r.exact for r in relations)
    # ... and the entities' namespace got a prefix of its own.
    assert hub_remote.vocab.prefixes["e"] == E
    walked = explore_kg(hub_remote, Settings(explore_limit=10), "e:hub", ["~country"]).data.relations[0]
    assert walked.shown == 10 and walked.total == settings.count_cap
    assert all(n.id.startswith("e:n") for n in walked.neighbours)
    claims = [TripleClaim(subject="e:n1", relation="country", object="e:hub")]
    assert verify(hub_remote, settings, claims).data.claims[0].status == "supported"
