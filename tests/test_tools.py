"""Each tool as a plain function over real stores: MetaQA, the Wikidata sample and the demo KG."""

from __future__ import annotations

import pytest

from kg_mcp.backends import open_demo
from kg_mcp.errors import InvalidInput, UnknownEntity, UnknownRelation
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, verify
from kg_mcp.tools.verify import PathClaim, TripleClaim


@pytest.fixture(scope="module")
def demo():
    return open_demo()


# --- find_entities ---------------------------------------------------------------------------


def test_find_entities_exact_label_gives_the_id(metaqa, settings):
    out = find_entities(metaqa, settings, "Catch Me If You Can")
    first = out.data.entities[0]
    assert first.id == "kg:Catch_Me_If_You_Can"
    assert first.match == "exact" and first.label == "Catch Me If You Can"
    assert first.degree > 10
    assert "kg:Catch_Me_If_You_Can" in out.text


def test_find_entities_ranks_exact_then_folded_then_words(metaqa, settings):
    out = find_entities(metaqa, settings, "steven spielberg", limit=20)
    hits = out.data.entities
    matches = [h.match for h in hits]
    assert matches == sorted(matches, key=["exact", "folded", "words", "fuzzy"].index)
    assert {h.label for h in hits if h.match == "exact"} == {"steven spielberg"}  # a MetaQA tag node
    assert "Steven Spielberg" in {h.label for h in hits if h.match == "folded"}
    assert out.data.method == "name index" and "looked up by name index" in out.text


def test_find_entities_unknown_name_says_so(metaqa, settings):
    out = find_entities(metaqa, settings, "Zzyzx Nonexistent Film")
    assert out.data.entities == [] and "no entity" in out.text


def test_find_entities_on_wikidata_prefers_the_better_connected(wikidata_local, settings):
    hits = find_entities(wikidata_local, settings, "Douglas Adams").data.entities
    assert [h.id for h in hits[:2]] == ["wd:Q42", "wd:Q21454969"]
    assert hits[0].description.startswith("British science fiction writer")


# --- search ---------------------------------------------------------------------------------


def test_search_outgoing_lists_the_director(metaqa, settings):
    out = search(metaqa, settings, "kg:Catch_Me_If_You_Can", "outgoing")
    rows = {(r.property, r.value.id, r.value.label) for r in out.data.rows}
    assert ("directed_by", "kg:Steven_Spielberg", "Steven Spielberg") in rows
    assert out.data.view == "rows" and out.data.total == len(out.data.rows) == out.data.shown
    assert out.text.startswith("search kg:Catch_Me_If_You_Can (Catch Me If You Can), outgoing: ")
    assert "| directed_by | directed_by | kg:Steven_Spielberg | Steven Spielberg |" in out.text


def test_search_accepts_an_exact_label(metaqa, settings):
    by_label = search(metaqa, settings, "Catch Me If You Can", "outgoing").data
    by_id = search(metaqa, settings, "kg:Catch_Me_If_You_Can", "outgoing").data
    assert by_label == by_id


def test_search_hub_without_filter_shows_properties_only(metaqa, settings):
    out = search(metaqa, settings, "kg:English", "incoming")
    assert out.data.view == "properties" and out.data.rows == []
    (prop,) = out.data.properties
    assert prop.property == "in_language" and prop.rows == out.data.total > settings.search_k
    assert "properties_to_filter_for" in out.text


def test_search_filtered_cut_at_p_tells_the_total(metaqa):
    small = Settings(search_p=7)
    out = search(metaqa, small, "kg:English", "incoming", ["in_language"])
    assert out.data.shown == 7 == len(out.data.rows)
    assert out.data.truncated and out.data.total > 7 and out.data.next_cursor
    assert f"{out.data.total} rows." in out.text and f"Rows 1-7 of {out.data.total:,} shown. Next page:" in out.text


def test_search_k_is_configurable(metaqa):
    out = search(metaqa, Settings(search_k=3), "kg:Catch_Me_If_You_Can", "outgoing")
    assert out.data.view == "properties"
    assert {p.property for p in out.data.properties} >= {"directed_by", "starred_actors", "has_tags"}
    assert sum(p.rows for p in out.data.properties) == out.data.total


def test_search_filter_by_label_and_unknown_filter(wikidata_local, settings):
    by_label = search(wikidata_local, settings, "wd:Q42", "outgoing", ["educated at"]).data
    by_id = search(wikidata_local, settings, "wd:Q42", "outgoing", ["P69"]).data
    assert by_label == by_id and by_id.total == 2
    with pytest.raises(UnknownRelation, match="get_relations"):
        search(wikidata_local, settings, "wd:Q42", "outgoing", ["no such property anywhere"])


def test_search_filter_with_no_rows_lists_what_exists(metaqa, settings):
    out = search(metaqa, settings, "kg:Catch_Me_If_You_Can", "outgoing", ["in_language"])
    assert out.data.total == 0
    assert "0 rows for in_language" in out.text and "directed_by" in out.text


def test_search_wikidata_qualifiers_ride_with_truthy_rows(wikidata_local, settings):
    rows = search(wikidata_local, settings, "wd:Q42", "outgoing", ["P69"]).data.rows
    st_johns = next(r for r in rows if r.value.id == "wd:Q691283")
    quals = [(q.propertyLabel, q.value.id, q.value.datatype) for q in st_johns.qualifiers]
    # Year precision (wikibase:timePrecision 9 on the value node) reads as the year, start before end.
    dates = [q for q in quals if q[0] in ("start time", "end time")]
    assert dates == [("start time", "1971", "xsd:gYear"), ("end time", "1974", "xsd:gYear")]
    # value nodes (pqv:) are bookkeeping, not qualifiers
    assert all(q.property.startswith("pq:") for q in st_johns.qualifiers)


def test_search_wikidata_day_precision_dates_stay_whole(wikidata_local, settings):
    out = search(wikidata_local, settings, "wd:Q42", "outgoing", ["P26", "P569"])
    assert "start time: 1991-11-25; end time: 2001-05-11" in out.text
    assert "| 1952-03-11 |" in out.text


def test_search_wikidata_property_view_sums_up_external_identifiers(wikidata_local, settings):
    from kg_mcp.agents.evaluation.tokens import count_tokens

    out = search(wikidata_local, settings, "wd:Q42")
    props = out.data.properties
    listed, identifiers = props[: out.data.properties_shown], props[out.data.properties_shown :]
    assert out.data.properties_total == 293 and out.data.identifiers > 200 and not out.data.next_cursor
    assert len(listed) + out.data.identifiers == 293 and identifiers and all(p.identifier for p in identifiers)
    # every other property is still listed with its count; identifiers are one line
    for p in props:
        assert (f"| {p.property} |" in out.text) is not p.identifier
    assert f"Also {out.data.identifiers} external-identifier properties ({out.data.identifier_rows} rows)" in out.text
    assert count_tokens(out.text) <= 1200
    # an identifier is still reachable by name, as the line says
    viaf = search(wikidata_local, settings, "wd:Q42", "outgoing", ["VIAF cluster ID"])
    assert viaf.data.total >= 1 and viaf.data.rows[0].property == "wdt:P214"


def test_search_wikidata_hides_bookkeeping_and_uses_mul_labels(wikidata_local, settings):
    out = search(wikidata_local, settings, "wd:Q42", "outgoing", ["P31"])
    assert out.data.entity.label == "Douglas Adams"  # Q42 has only a @mul label
    props = {p.property for p in search(wikidata_local, settings, "wd:Q42", "outgoing").data.properties}
    assert "wdt:P69" in props
    assert not any(p.startswith(("p:", "ps:", "pq:", "rdfs:", "schema:", "skos:")) for p in props)


def test_search_literals_have_empty_labels(demo, settings):
    rows = search(demo, settings, "wd:Q5582", "outgoing", ["P569"]).data.rows
    (born,) = rows
    assert born.value.kind == "literal" and born.value.label is None
    assert born.value.id.startswith("1853-03-30")


def test_search_statement_node_shows_its_qualifiers(wikidata_local, settings):
    node = "<http://www.wikidata.org/entity/statement/q42-0E9C4724-C954-4698-84A7-5CE0D296A6F2>"
    rows = search(wikidata_local, settings, node, "outgoing").data.rows
    assert {r.property for r in rows} >= {"ps:P69", "pq:P580", "pq:P582", "wikibase:rank"}


def test_demo_multi_hop_chain(demo, settings):
    """Vincent van Gogh → place of birth → Zundert → country → Netherlands → capital → Amsterdam."""
    entity = find_entities(demo, settings, "Vincent van Gogh").data.entities[0].id
    for prop, expected in (("P19", "Zundert"), ("P17", "Netherlands"), ("P36", "Amsterdam")):
        (row,) = search(demo, settings, entity, "outgoing", [prop]).data.rows
        assert row.value.label == expected
        entity = row.value.id


# --- get_relations / explore_kg -----------------------------------------------------------


def test_get_relations_counts_both_directions(metaqa, settings):
    out = get_relations(metaqa, settings, "kg:Steven_Spielberg")
    rel = {r.relation: r.triples for r in out.data.relations}
    assert rel["~directed_by"] == 25 and rel["~written_by"] == 5
    movie = {r.relation for r in get_relations(metaqa, settings, "kg:Catch_Me_If_You_Can").data.relations}
    assert {"directed_by", "starred_actors", "release_year"} <= movie


def test_explore_kg_walks_forwards_and_backwards(metaqa, settings):
    out = explore_kg(metaqa, settings, "kg:Steven_Spielberg", ["~directed_by"])
    (walked,) = out.data.relations
    assert walked.total == walked.shown == 25
    assert "Catch Me If You Can" in {n.label for n in walked.neighbours}
    fwd = explore_kg(metaqa, settings, "kg:Catch_Me_If_You_Can", ["directed_by", "release_year"]).data.relations
    assert [r.neighbours[0].label for r in fwd] == ["Steven Spielberg", "2002"]


def test_explore_kg_says_shown_n_of_m(metaqa):
    out = explore_kg(metaqa, Settings(explore_limit=10), "kg:English", ["~in_language"])
    (walked,) = out.data.relations
    assert walked.shown == 10 and walked.total > 10
    assert f"~in_language: {walked.total:,}" in out.text
    assert f"Rows 1-10 of each relation shown (the longest has {walked.total:,})" in out.text


def test_explore_kg_bad_relations(metaqa, settings):
    with pytest.raises(InvalidInput):
        explore_kg(metaqa, settings, "kg:Steven_Spielberg", [])
    with pytest.raises(InvalidInput):
        explore_kg(metaqa, settings, "kg:Steven_Spielberg", ["directed\n_by"])


# --- verify -----------------------------------------------------------------------------------


def test_verify_statuses(metaqa, settings):
    claims = [
        TripleClaim(subject="Catch Me If You Can", relation="directed_by", object="Steven Spielberg"),
        TripleClaim(subject="kg:Catch_Me_If_You_Can", relation="release_year", object="1999"),
        TripleClaim(subject="kg:Catch_Me_If_You_Can", relation="in_language", object="English"),
        TripleClaim(subject="No Such Film Title", relation="directed_by", object="X"),
        PathClaim(
            path=[
                TripleClaim(subject="Joel Zwick", relation="~directed_by", object="My Big Fat Greek Wedding"),
                TripleClaim(subject="My Big Fat Greek Wedding", relation="in_language", object="kg:Greek"),
            ]
        ),
        PathClaim(
            path=[
                TripleClaim(subject="Joel Zwick", relation="~directed_by", object="My Big Fat Greek Wedding"),
                TripleClaim(subject="My Big Fat Greek Wedding", relation="in_language", object="French"),
            ]
        ),
    ]
    out = verify(metaqa, settings, claims)
    statuses = [c.status for c in out.data.claims]
    assert statuses == ["supported", "conflicting", "not_found", "unknown_entity", "supported", "conflicting"]
    conflict = out.data.claims[1].hops[0]
    assert "2002" in conflict.reason and conflict.evidence[0].object.label == "2002"
    supported = out.data.claims[0].hops[0].evidence[0]
    assert (supported.subject.id, supported.relation, supported.object.id) == (
        "kg:Catch_Me_If_You_Can",
        "directed_by",
        "kg:Steven_Spielberg",
    )


def test_verify_literal_values_and_ambiguous_subjects(wikidata_local, demo, settings):
    born = verify(demo, settings, [TripleClaim(subject="wd:Q5582", relation="date of birth", object="1853-03-30")])
    assert born.data.claims[0].status == "supported"
    # "Douglas Adams" names two entities; the claim holds for one of them
    ambiguous = verify(wikidata_local, settings, [TripleClaim(subject="Douglas Adams", relation="P69", object="wd:Q691283")])
    assert ambiguous.data.claims[0].status == "supported"


def test_verify_unknown_object_id(metaqa, settings):
    out = verify(metaqa, settings, [TripleClaim(subject="kg:Joel_Zwick", relation="directed_by", object="kg:Nope_Nothing")])
    assert out.data.claims[0].status == "unknown_entity"


# --- errors with hints --------------------------------------------------------------------------


def test_unknown_entity_suggests_similar_ones(metaqa, settings):
    with pytest.raises(UnknownEntity) as caught:
        search(metaqa, settings, "kg:Catch_Me_If_You_Cann", "outgoing")
    assert "kg:Catch_Me_If_You_Can" in str(caught.value)


def test_ambiguous_label_lists_the_candidates(wikidata_local, settings):
    with pytest.raises(InvalidInput) as caught:
        search(wikidata_local, settings, "Douglas Adams", "outgoing")
    assert "wd:Q42" in str(caught.value) and "wd:Q21454969" in str(caught.value)


def test_filter_with_tilde_tells_to_use_direction(metaqa, settings):
    with pytest.raises(InvalidInput, match="direction='incoming'"):
        search(metaqa, settings, "kg:Steven_Spielberg", "outgoing", ["~directed_by"])
