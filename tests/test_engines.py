"""The tools on real engines holding the benchmark KBs: `oxigraph serve` and Virtuoso, side by side.

The MetaQA and PathQuestion KBs are loaded with kg-mcp's own loader, written out as N-Triples and
served by each engine. The endpoint's ids must read like the local store's (`kg:Steven_Spielberg`,
`directed_by`), be accepted back, and gold relation paths must reach the gold answers.
"""

from __future__ import annotations

import json

import pytest
from conftest import ENGINES, WIKIDATA_SAMPLE, store_as_ntriples
from test_multihop import _pathquestion_cases, spread, walk

from kg_mcp.backends import open_endpoint
from kg_mcp.errors import KGError
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
    assert same_first_entity(remote, local) if tool == "find_entities" else same_output(remote, local)


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
    ):
        remote, local = call(pathquestion_remote), call(pathquestion)
        assert "<http" not in remote.text
        assert same_output(remote, local)
    # PathQuestion's labels are its ids ("frederica_of_mecklenburg-strelitz"): typed as they read.
    typed = subject.split(":")[-1]
    remote, local = (find_entities(b, settings, typed) for b in (pathquestion_remote, pathquestion))
    assert same_first_entity(remote, local)


def _pathquestion_cases_first(local):
    from conftest import DATA

    subject, relations, _ = _pathquestion_cases(DATA, "PQ-2H.txt")[0]
    return local.vocab.compact(local.resolve_entity(subject)), relations


def same_first_entity(remote, local) -> bool:
    """find_entities: an engine looks names up its own way (label queries, its text search), not by
    the local name index, so the lists and methods differ; the entity found first must not."""
    remote_first, local_first = (
        [(e.id, e.label, e.degree) for e in out.data.entities[:1]] for out in (remote, local)
    )
    return bool(remote_first) and remote_first == local_first


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


# find_entities on Virtuoso: its own text search (bif:contains), picked by the first lookup's probe.


@pytest.fixture(scope="module")
def metaqa_virtuoso(engine_endpoints, metaqa_nt):
    return open_endpoint(engine_endpoints("virtuoso", "metaqa", metaqa_nt), settings=Settings())


@pytest.mark.parametrize(
    ("typed", "entity", "match"),
    [
        ("Saving Private Ryan", "kg:Saving_Private_Ryan", "exact"),
        ("catch me if you can", "kg:Catch_Me_If_You_Can", "search"),  # short words, none of them a prefix
        ("ryan saving private", "kg:Saving_Private_Ryan", "search"),  # reordered words
        ("Saving Priva", "kg:Saving_Private_Ryan", "search"),  # the last word typed in part
        # Words that Virtuoso's text grammar reads as operators, one-letter words, apostrophes, stars
        ("the water near don't go", "kg:Don%27t_Go_Near_the_Water", "search"),
        ("alive or dead", "kg:Dead_or_Alive", "search"),
        ("hijacking a", "kg:A_Hijacking", "search"),
        ("b a p s", "kg:B%2AA%2AP%2AS", "search"),
        ("21 bat", "kg:Bat%2A21", "search"),
        ("lupin arsène", "kg:Arsène_Lupin", "search"),  # Virtuoso keeps accents in its word index
        ('"Jaws"', "kg:Jaws", "search"),  # quotes and braces are not words
        ("{jaws}", "kg:Jaws", "search"),
    ],
)
def test_virtuoso_text_search_finds_the_entity_first(metaqa_virtuoso, typed, entity, match):
    out = find_entities(metaqa_virtuoso, Settings(), typed)
    assert metaqa_virtuoso.text_search == "virtuoso"
    assert out.data.method == "Virtuoso text search (bif:contains)"
    assert (out.data.entities[0].id, out.data.entities[0].match) == (entity, match), out.text


def test_virtuoso_text_search_finds_a_title_by_one_of_its_words(metaqa_virtuoso):
    out = find_entities(metaqa_virtuoso, Settings(), "Ryan", limit=50)
    assert "kg:Saving_Private_Ryan" in {e.id for e in out.data.entities}, out.text
    assert {e.match for e in out.data.entities} <= {"exact", "search"}


@pytest.mark.parametrize(
    "typed",
    ['"Jaws"', "'Jaws'", "Jaws*", "{Jaws}", "Jaws } LIMIT 1 #", 'It\'s a "Wonderful" Life',
     "Jaws AND NOT Ryan", "OR", "near", "Saving NEAR Ryan", "a", "I", "x y", "the", "Ryan OR", "AND AND",
     "Jaw*", "ja*s", "Jaws " + "x" * 100],
)
def test_virtuoso_text_search_takes_any_typed_name(metaqa_virtuoso, typed):
    try:
        out = find_entities(metaqa_virtuoso, Settings(), typed)
    except KGError as error:
        said = f"{error.message} {error.hint}"
    else:
        said = out.text
        assert out.data.method.startswith("Virtuoso text search (bif:contains)")
    assert "Virtuoso" not in said.replace("Virtuoso text search", "") and "SPARQL" not in said, said


_FALLBACK = (
    "Virtuoso text search (bif:contains) found nothing; then label queries (accents, apostrophes and case ignored)"
)


@pytest.mark.parametrize(
    ("typed", "entity"),
    [
        ("Francois Truffaut", "kg:François_Truffaut"),  # Virtuoso's words keep their accents
        ("oceans eleven", "kg:Ocean%27s_Eleven"),  # and split at apostrophes: "ocean", "s"
        ("Amelie", "kg:Amélie"),
        ("arsene lup", "kg:Arsène_Lupin"),  # the last word typed in part
    ],
)
def test_virtuoso_falls_back_to_folded_labels_when_its_words_miss(metaqa_virtuoso, typed, entity):
    out = find_entities(metaqa_virtuoso, Settings(), typed)
    assert out.data.method == _FALLBACK, out.text
    assert out.data.entities[0].id == entity, out.text
    assert _FALLBACK in out.text


def test_virtuoso_text_search_that_finds_something_is_kept(metaqa_virtuoso):
    out = find_entities(metaqa_virtuoso, Settings(), "François Truffaut")
    assert out.data.method == "Virtuoso text search (bif:contains)"
    assert out.data.entities[0].id == "kg:François_Truffaut"


def test_virtuoso_fallback_folds_letters_without_a_decomposition(engine_endpoints):
    url = engine_endpoints("virtuoso", "wikidata", WIKIDATA_SAMPLE)
    generic = open_endpoint(url, profile="generic", settings=Settings())
    out = find_entities(generic, Settings(), "Lars Lokke Rasmussen")  # ø is not o with an accent
    assert out.data.method == _FALLBACK, out.text
    assert out.data.entities[0].id.endswith("Q182397"), out.text
    # The Wikidata profile never scans labels (a public Wikidata endpoint would time out): no fallback.
    wikidata = open_endpoint(url, settings=Settings())
    method = find_entities(wikidata, Settings(), "Lars Lokke Rasmussen").data.method
    assert method == "Virtuoso text search (bif:contains)"


@pytest.mark.parametrize("typed", ["*", "'", '"', "\\", "&&", "x" * 300])
def test_a_name_without_words_is_asked_by_label_on_virtuoso(metaqa_virtuoso, typed):
    out = find_entities(metaqa_virtuoso, Settings(), typed)
    assert out.data.method == "label queries (exact, case-insensitive, prefix)"
