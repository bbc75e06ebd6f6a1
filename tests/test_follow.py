"""`follow`, batched `search`/`explore_kg` and `limit`: against the real MetaQA store, a real SPARQL
server (`oxigraph serve` with the Wikidata sample), and the MCP server over stdio, HTTP and in-process."""

from __future__ import annotations

import json
import os
import sys

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.backends import open_endpoint
from kg_mcp.errors import InvalidInput, KGError, UnknownRelation
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools.follow import follow
from kg_mcp.tools.relations import explore_kg
from kg_mcp.tools.search import search
from test_transports import http_server

CARRIE_GENRES = ["directed_by", "~directed_by", "has_genre"]


def ends(out) -> dict[str, int]:
    return {e.entity.id: e.paths for e in out.data.entities}


@pytest.mark.parametrize("exclude_through", ["start", "none"])
def test_follow_walks_a_path_with_path_counts(metaqa, settings, exclude_through):
    out = follow(metaqa, settings, "kg:Carrie", CARRIE_GENRES, exclude_through=exclude_through)
    # The same answer, hop by hop, with single-entity searches (Carrie itself left out by default).
    directors = {r.value.id for r in search(metaqa, settings, "kg:Carrie", "outgoing", ["directed_by"]).data.rows}
    films = [r.value.id for d in sorted(directors) for r in search(metaqa, settings, d, "incoming", ["directed_by"]).data.rows]
    if exclude_through == "start":
        films = [f for f in films if f != "kg:Carrie"]
    genres: dict[str, int] = {}
    for film in films:
        for r in search(metaqa, settings, film, "outgoing", ["has_genre"]).data.rows:
            genres[r.value.id] = genres.get(r.value.id, 0) + 1
    assert ends(out) == genres
    assert out.data.branches[0].sizes == [len(directors), len(set(films)), len(genres)]
    assert out.data.complete and out.data.total == len(genres)
    assert "| kg:Drama | Drama |" in out.text


def test_follow_stops_at_a_hub_in_the_middle(metaqa, settings):
    out = follow(metaqa, settings, "kg:Carrie", ["has_genre", "~has_genre", "starred_actors"])
    branch = out.data.branches[0]
    assert not out.data.complete and branch.cut_at_hop == 2 and out.data.entities == []
    assert "Stopped at hop 2 (~has_genre)" in out.text and "kg:Horror" in out.text and "To narrow" in out.text
    small = Settings(search_p=20)  # a smaller budget stops earlier: 45 films at hop 2 (46 with Carrie)
    out = follow(metaqa, small, "kg:Carrie", ["directed_by", "~directed_by", "has_genre"])
    assert out.data.branches[0].cut_at_hop == 2 and out.data.branches[0].sizes[-1] == 45 and not out.data.complete
    assert out.data.left_out == [] and "Left out" not in out.text  # nothing is said of a walk that stopped


def test_follow_keeps_to_the_call_deadline(metaqa):
    out = follow(metaqa, Settings(timeout_s=1e-9), "kg:Carrie", CARRIE_GENRES)  # past before the first hop
    assert not out.data.complete and out.data.branches[0].cut_at_hop == 1 and "ran out of time" in out.text


def test_follow_intersects_paths_checking_a_hub_branch_backwards(metaqa, settings):
    small = Settings(search_p=200)  # kg:Drama has thousands of films: too big forwards at this budget
    out = follow(metaqa, small, paths=[["kg:Brian_De_Palma", "~directed_by"], ["kg:Drama", "~has_genre"]])
    films = {r.value.id for r in search(metaqa, settings, "kg:Brian_De_Palma", "incoming", ["directed_by"]).data.rows}
    dramas = {f for f in films if any(r.value.id == "kg:Drama" for r in search(metaqa, settings, f, "outgoing", ["has_genre"]).data.rows)}
    assert set(ends(out)) == dramas and dramas
    assert out.data.branches[1].checked_backwards and out.data.complete
    assert follow(metaqa, settings, paths=[["kg:Brian_De_Palma", "~directed_by"], ["kg:Drama", "~has_genre"]]).data.total == len(dramas)


def test_follow_from_several_entities_and_limit(metaqa, settings):
    out = follow(metaqa, settings, entities=["kg:Carrie", "kg:Blow_Out"], path=["directed_by"], limit=1)
    assert out.data.total >= 2 and out.data.shown == 1 and out.data.truncated and "Rows 1-1 of 2 shown" in out.text
    assert out.data.next_cursor and f'cursor="{out.data.next_cursor}"' in out.text


def test_follow_unknown_relation_and_hostile_input(metaqa, settings):
    with pytest.raises(UnknownRelation, match="Hop 2 of the path"):
        follow(metaqa, settings, "kg:Carrie", ["directed_by", "a relation nobody has"])
    typo = follow(metaqa, settings, "kg:Carrie", ["directed_by", "directed_byy"])  # a well-formed id without edges
    assert typo.data.total == 0 and "No entity at hop 2 (directed_byy)" in typo.text and "~directed_by" in typo.text
    for hostile in ['kg:x> } DROP ALL {', '"; DELETE WHERE {?s ?p ?o} #', "kg:a\nb"]:
        with pytest.raises(KGError):
            follow(metaqa, settings, hostile, ["directed_by"])
        with pytest.raises(KGError):
            follow(metaqa, settings, "kg:Carrie", [hostile])
    with pytest.raises(InvalidInput):
        follow(metaqa, settings, "kg:Carrie", [])
    with pytest.raises(InvalidInput):
        follow(metaqa, settings, "kg:Carrie", ["directed_by"], paths=[["kg:Carrie", "directed_by"]])
    with pytest.raises(InvalidInput):
        follow(metaqa, settings, paths=[["kg:Carrie"]])
    out = follow(metaqa, settings, "kg:Carrie", ["has_imdb_votes", "directed_by"])  # a dead end
    assert out.data.total == 0 and "No entity at hop" in out.text


def test_batched_search_one_table_with_cuts(metaqa, settings):
    films = ["kg:Carrie", "kg:Blow_Out", "kg:No_Such_Film"]
    out = search(metaqa, settings, entities=films, properties_to_filter_for=["has_genre"])
    singles = {f: {r.value.id for r in search(metaqa, settings, f, "outgoing", ["has_genre"]).data.rows} for f in films[:2]}
    assert {(r.entity, r.value.id) for r in out.data.rows} == {(f, g) for f, gs in singles.items() for g in gs}
    assert "| entity | value | valueLabel |" in out.text and "kg:No_Such_Film: not in the KG" in out.text
    limited = search(metaqa, settings, entities=films[:2], properties_to_filter_for=["has_genre", "directed_by"], limit=2)
    assert limited.data.shown == 2 and limited.data.total > 2 and f"Rows 1-2 of {limited.data.total} shown" in limited.text
    rest = search(metaqa, settings, entities=films[:2], properties_to_filter_for=["has_genre", "directed_by"],
                  cursor=limited.data.next_cursor)  # the next page reads on, whatever its size
    both = [(r.entity, r.value.id) for page in (limited, rest) for r in page.data.rows]
    assert len(both) == len(set(both)) == limited.data.total and rest.data.next_cursor is None
    hub = search(metaqa, settings, entities=["kg:Carrie", "kg:Drama"], direction="incoming")
    assert "kg:Drama (Drama): 4" in hub.text and "has_genre" in hub.text


def test_single_entity_search_is_unchanged_and_takes_limit(metaqa, settings):
    one = search(metaqa, settings, "kg:Carrie", "outgoing", ["directed_by"])
    assert one.text.startswith("search kg:Carrie (Carrie), outgoing:")
    assert "| property | propertyLabel | value | valueLabel |" in one.text
    assert search(metaqa, settings, entities=["kg:Carrie"], properties_to_filter_for=["directed_by"]).text == one.text
    few = search(metaqa, settings, "kg:Steven_Spielberg", "incoming", ["directed_by"], limit=3)
    assert few.data.shown == 3 and few.data.total > 3 and f"Rows 1-3 of {few.data.total} shown" in few.text
    with pytest.raises(InvalidInput):
        search(metaqa, settings, "kg:Carrie", limit=-1)


def test_batched_explore_kg(metaqa, settings):
    films = ["kg:Carrie", "kg:Blow_Out"]
    out = explore_kg(metaqa, settings, entities=films, relations=["written_by", "~written_by"])
    assert "| entity | relation | neighbour | label |" in out.text
    singles = [(f, n.id) for f in films for r in explore_kg(metaqa, settings, f, ["written_by"]).data.relations for n in r.neighbours]
    assert singles and all(f"| {f} | written_by | {n} |" in out.text for f, n in singles)
    assert out.data.total == len(singles)
    cut = explore_kg(metaqa, settings, entities=films, relations=["written_by"], limit=1)
    writers = {f: [n.id for r in explore_kg(metaqa, settings, f, ["written_by"]).data.relations for n in r.neighbours] for f in films}
    assert cut.data.shown == sum(min(1, len(w)) for w in writers.values())  # a page holds the same rows of each
    assert "Rows 1-1 of each entity's relation shown" in cut.text and cut.data.next_cursor


@pytest.fixture(scope="module")
def remote(sparql_endpoint):
    return open_endpoint(sparql_endpoint, settings=Settings())


def test_remote_endpoint_same_as_local(remote, wikidata_local, settings):
    calls = [
        (follow, ("wd:Q42", ["P69", "~P69"])),
        (follow, (), {"paths": [["wd:Q42", "P69"], ["wd:Q691283", "~P69", "educated at"]]}),
        (search, (), {"entities": ["wd:Q42", "wd:Q691283"], "properties_to_filter_for": ["P69", "P31"]}),
        (search, ("wd:Q42",)),
    ]
    for tool, args, *kw in calls:
        kwargs = kw[0] if kw else {}
        local, far = tool(wikidata_local, settings, *args, **kwargs), tool(remote, settings, *args, **kwargs)
        assert local.text == far.text, tool.__name__
    both = [["wd:Q42", "P69"], ["wd:Q691283", "~P69", "educated at"]]
    out = follow(remote, settings, paths=both, exclude_through="none")
    assert ends(out) == {"wd:Q691283": 2, "wd:Q4961791": 2}  # both of his schools, by both paths
    # By default the second path may not come back to its own start, St John's College.
    out = follow(remote, settings, paths=both)
    assert ends(out) == {"wd:Q4961791": 2} and [e.entity.id for e in out.data.left_out] == ["wd:Q691283"]


async def _exercise(client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("search", "follow", "explore_kg"):
        schema = json.dumps(tools[name].input_schema)
        assert "anyOf" not in schema and "$ref" not in schema and "$defs" not in schema, name
    result = await client.call_tool("follow", {"entity": "kg:Carrie", "path": CARRIE_GENRES})
    assert not result.is_error and "| kg:Drama | Drama |" in result.content[0].text
    assert result.structured_content["complete"] is True
    result = await client.call_tool("search", {"entities": ["kg:Carrie", "kg:Blow_Out"], "properties_to_filter_for": ["directed_by"], "limit": 1})
    assert not result.is_error and result.structured_content["shown"] == 1
    result = await client.call_tool("follow", {"entity": "kg:Carrie", "path": ["a relation nobody has"]})
    assert result.is_error and "Hop 1" in result.content[0].text and "Traceback" not in result.content[0].text


async def test_over_stdio_http_and_in_process(metaqa, metaqa_store_dir):
    async with Client(build_server(metaqa)) as client:
        await _exercise(client)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kg_mcp", "serve", "--store", str(metaqa_store_dir)], env=dict(os.environ)
    )
    async with Client(params) as client:
        await _exercise(client)
    with http_server(metaqa_store_dir, "http") as (base, _):
        async with Client(streamable_http_client(base + "/mcp", http_client=httpx2.AsyncClient(timeout=30))) as client:
            await _exercise(client)


def test_a_loop_is_an_edge_for_rel_plus(tmp_path):
    """At a hop of `p+`, an entity whose only p edge loops back to itself walked a real edge: the
    gap note ("had no p edge") leaves it out. For `p*`, reaching itself in zero steps is no edge."""
    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources

    ex = "http://example.org/"
    source = tmp_path / "loops.nt"
    source.write_text("".join(f"<{ex}{s}> <{ex}{p}> <{ex}{o}> .\n" for s, p, o in (
        ("a", "r", "m"), ("a", "r", "n"), ("a", "r", "k"), ("m", "p", "m"), ("n", "p", "z"), ("n", "s", "z"))))
    load_sources([source], tmp_path / "store", progress=False)
    kg = open_store(tmp_path / "store")
    try:
        plus = follow(kg, Settings(), f"<{ex}a>", [f"<{ex}r>", f"<{ex}p>+"])
        assert f"at hop 2, 1 of the 3 entities had no <{ex}p> edge" in plus.text  # k only, not m
        star = follow(kg, Settings(), f"<{ex}a>", [f"<{ex}r>", f"<{ex}s>*"])
        assert f"at hop 2, 2 of the 3 entities had no <{ex}s> edge" in star.text  # k and m: zero steps only
    finally:
        kg.close()
