"""`kgr_search`: the traversal tree, backtracking (with climbing), ranking and top k, sessions."""

from __future__ import annotations

import json

import pytest
from kg_mcp.agents.kg_client import KGClient

from kg_mcp.backends import open_store
from kg_mcp.errors import ConfigError, InvalidInput
from kg_mcp.loading import load_sources
from kg_mcp.kg_reasoner import get_ranker
from kg_mcp.kg_reasoner.ranking import EmbeddingRanker, LexicalRanker, top_k, words
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools.traverse import kgr_search, traversal_key
from kg_mcp.kg_reasoner.traversal import MAX_NODES, Node, TraversalStore, Tree

# Ann wrote Book (published by Press); Ann was born in Town (in Land); Ann's pet Rex.
SMALL_KB = """Ann|wrote|Book
Ann|born_in|Town
Ann|has_pet|Rex
Book|published_by|Press
Town|in_country|Land
"""
QUESTION = "which press published the book that [Ann] wrote"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    folder = tmp_path_factory.mktemp("small-kb")
    (folder / "kb.txt").write_text(SMALL_KB)
    load_sources([folder / "kb.txt"], folder / "store", progress=False)
    return open_store(folder / "store")


def tree(question: str = QUESTION) -> Tree:
    return TraversalStore().tree("t", question)


def step(backend, t: Tree, **arguments):
    return kgr_search(backend, Settings(), t, LexicalRanker(), **arguments).data


def test_searches_build_the_tree_from_the_entity_that_showed_each_one(small):
    t = tree()
    root = step(small, t, entity="Ann")
    assert root.entity.id == "kg:Ann" and root.parent is None and root.path[0].id == "kg:Ann"
    # ranked for the question: Ann wrote Book first
    assert (root.triples[0].relation, root.triples[0].object.id) == ("wrote", "kg:Book")
    book = step(small, t, entity="kg:Book")
    assert (book.parent.id, book.via) == ("kg:Ann", "wrote")
    press = step(small, t, entity="Press")  # by label
    assert [p.id for p in press.path] == ["kg:Ann", "kg:Book", "kg:Press"] and press.via == "published_by"
    assert t.current == "kg:Press" and list(t.nodes) == ["kg:Ann", "kg:Book", "kg:Press"]
    # an entity reached backwards is linked with ~rel
    t2 = tree()
    step(small, t2, entity="kg:Press")
    assert step(small, t2, entity="kg:Book").via == "~published_by"


def test_backtrack_offers_the_parents_next_best_then_climbs_then_is_exhausted(small):
    t = tree()
    for entity in ("kg:Ann", "kg:Book", "kg:Press"):
        step(small, t, entity=entity)
    out = kgr_search(small, Settings(), t, LexicalRanker(), backtrack=True)
    # Book has nothing left: climb to Ann, whose next-best unexplored neighbour is taken
    assert out.data.backtracked_from.id == "kg:Press" and [c.id for c in out.data.climbed] == ["kg:Book"]
    assert out.data.parent.id == "kg:Ann" and out.data.entity.id in ("kg:Town", "kg:Rex")
    assert out.text.startswith("Backtracked from Press [kg:Press]: Book [kg:Book] has no unexplored neighbour left; back at Ann")
    assert t.current == out.data.entity.id and t.nodes[out.data.entity.id].parent == "kg:Ann"
    second = step(small, t, backtrack=True)  # from Town/Rex back to Ann: the last neighbour
    assert {out.data.entity.id, second.entity.id} == {"kg:Town", "kg:Rex"} and second.climbed == []
    last = kgr_search(small, Settings(), t, LexicalRanker(), backtrack=True)
    assert last.data.exhausted and [c.id for c in last.data.climbed] == ["kg:Ann"]
    assert "no entity on the way up to the topic entity Ann [kg:Ann] has an unexplored neighbour" in last.text
    assert "kg:Land" not in t.nodes  # backtracking never descends into the branch it leaves


def test_backtrack_from_the_topic_entity_offers_its_next_neighbour(small):
    t = tree()
    step(small, t, entity="kg:Ann")
    out = step(small, t, backtrack=True)
    assert out.parent.id == "kg:Ann" and out.entity.id == "kg:Book"  # the best one for the question


def test_backtrack_before_any_search_is_an_error(small):
    with pytest.raises(InvalidInput, match="Nothing to backtrack from"):
        step(small, tree(), backtrack=True)
    with pytest.raises(InvalidInput, match="Give the entity"):
        step(small, tree(), entity=" ")


def test_top_k_keeps_the_most_relevant_triples(metaqa):
    t = tree("what are the languages spoken in the films directed by [Joel Zwick]")
    out = kgr_search(metaqa, Settings(), t, LexicalRanker(), entity="kg:My_Big_Fat_Greek_Wedding", k=2)
    assert out.data.total == 10 and out.data.shown == 2 and out.data.ranked_by == "lexical"
    assert {x.relation for x in out.data.triples} == {"directed_by", "in_language"}
    assert "10 triples, the 2 most relevant to the question shown" in out.text
    assert out.text.splitlines()[1].startswith("(1) My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding] | ")


def test_a_hub_is_read_by_its_most_relevant_relations(metaqa):
    t = tree("which films have the genre [Drama]")
    out = kgr_search(metaqa, Settings(), t, LexicalRanker(), entity="kg:Drama", k=5)
    assert out.data.total == 4016 and out.data.read == 1000 and out.data.shown == 5
    assert "only the 1000 triples of its most relevant relations were read" in out.text
    assert all(x.relation == "has_genre" and x.object.id == "kg:Drama" for x in out.data.triples)


def test_without_a_question_the_kg_order_is_kept(small):
    t = TraversalStore().tree("plain", None)
    out = step(small, t, entity="kg:Ann")
    assert out.ranked_by is None and all(x.score is None for x in out.triples) and out.shown == 3


def test_trees_by_key_and_a_new_question_starts_a_new_tree():
    store = TraversalStore(max_sessions=2)
    a = store.tree("a", "q1")
    assert store.tree("a", None) is a and store.tree("a", "q1") is a
    fresh = store.tree("a", "q2")
    assert fresh is not a and fresh.question == "q2"
    b = store.tree("b", "q1")
    store.tree("c", "q1")  # evicts the least recently used: a
    assert len(store) == 2 and store.tree("b", None) is b
    assert store.tree("a", "q2") is not fresh
    assert store.tree(None, "q1") is not store.tree(None, "q1")  # no key: nothing kept


def test_traversal_keys():
    # Every key is the caller's (kg_mcp.calls.caller), within its MCP session when it has one.
    assert traversal_key("q7", {"mcp-session-id": "x"}, "addr:10.0.0.1") == "addr:10.0.0.1 mcp-session:x session:q7"
    assert traversal_key("q7", {"host": "h"}, "addr:10.0.0.2") == "addr:10.0.0.2 session:q7"
    assert traversal_key(None, None) == "local"  # stdio, in-process
    assert traversal_key(None, {"Mcp-Session-Id": "ab"}, "addr:10.0.0.1") == "addr:10.0.0.1 mcp-session:ab"
    assert traversal_key(None, {"host": "127.0.0.1"}, "addr:127.0.0.1") is None  # stateless HTTP without an id


def test_a_tree_holds_a_bounded_number_of_entities(small):
    t = tree()
    for i in range(MAX_NODES):
        t.nodes[f"kg:n{i}"] = Node(f"kg:n{i}", None, None, None, [])
    with pytest.raises(InvalidInput, match=f"explored {MAX_NODES} entities"):
        step(small, t, entity="kg:Ann")


async def test_over_mcp_sessions_keep_traversals_apart(metaqa):
    server = build_server(metaqa)  # one server, two clients
    async with KGClient.connect(server=server) as first, KGClient.connect(server=server) as second:
        spec = first.tool("kgr_search")
        assert set(spec.input_schema["properties"]) == {"entity", "question", "backtrack", "session", "top_k", "anonymous", "cursor"}
        await first.call_tool("kgr_search", {"entity": "Joel Zwick", "question": "q", "session": "one"})
        await first.call_tool("kgr_search", {"entity": "kg:My_Big_Fat_Greek_Wedding", "question": "q", "session": "one"})
        refused = await second.call_tool("kgr_search", {"backtrack": True, "session": "two"})
        assert refused.is_error and "Nothing to backtrack from" in refused.text
        back = await second.call_tool("kgr_search", {"backtrack": True, "session": "one"})  # ids are shared
        assert not back.is_error and back.data["backtracked_from"]["id"] == "kg:My_Big_Fat_Greek_Wedding"
        # no session in-process: the one local traversal
        await first.call_tool("kgr_search", {"entity": "kg:Joel_Zwick"})
        local = await second.call_tool("kgr_search", {"backtrack": True})
        assert local.data["backtracked_from"]["id"] == "kg:Joel_Zwick"
        bad = await first.call_tool("kgr_search", {"entity": "kg:Joel_Zwick", "top_k": 0})
        assert bad.is_error


# --- rankers ------------------------------------------------------------------------------------


def test_lexical_ranker_prefers_the_relations_the_question_names():
    ranker = LexicalRanker()
    texts = ["Jaws directed_by Steven Spielberg", "Jaws in_language English", "Jaws release_year 1975", "Jaws has_tags shark"]
    assert top_k(ranker.score("what language is [Jaws] in", texts), 1) == [1]
    assert top_k(ranker.score("who was the director of [Jaws]", texts), 1) == [0]
    assert top_k(ranker.score("when was [Jaws] released", texts), 1) == [2]
    assert ranker.score("", texts) == [0.0] * 4 and ranker.score("q", []) == []
    assert words("placeOfBirth of_the Films") == ["place", "birth"]


def test_embedding_ranker_takes_any_encoder():
    vectors = {"question": [1.0, 0.0], "near": [0.9, 0.1], "far": [0.0, 1.0]}
    ranker = EmbeddingRanker(lambda texts: [vectors[t] for t in texts], name="toy")
    scores = ranker.score("question", ["far", "near"])
    assert top_k(scores, 2) == [1, 0] and scores[1] == pytest.approx(0.9939, abs=1e-3)


def test_rankers_by_name():
    assert get_ranker().name == "lexical" and get_ranker("lexical").name == "lexical"
    assert get_ranker("embedding").name == "embedding"  # loaded on first use only
    assert get_ranker("kg_mcp.kg_reasoner.ranking:LexicalRanker").name == "lexical"
    for bad in ("nonsense", "no_such_module:x", "kg_mcp.kg_reasoner.ranking:words"):
        with pytest.raises(ConfigError):
            get_ranker(bad)


def test_the_static_embedding_model_ranks_offline_when_installed(monkeypatch):
    pytest.importorskip("static_model", reason="the optional extra kgr-embed is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ranker = get_ranker("embedding")
    texts = ["directed by Joel Zwick", "in language Greek", "release year 2002"]
    scores = ranker.score("who directed the film", texts)
    assert len(scores) == 3 and top_k(scores, 1) == [0]


def test_traversal_results_serialise(small):
    out = kgr_search(small, Settings(), tree(), LexicalRanker(), entity="kg:Ann")
    data = json.loads(out.data.model_dump_json())
    assert data["entity"] == {"id": "kg:Ann", "label": "Ann", "kind": "iri", "datatype": None, "language": None, "length": None}
