"""The sparql tool's check against the KG: IRIs the KG does not have where the query puts them are
named beside the answer with the nearest it has; a right query gets no warning. The rates of
bench/sparql_warnings.py, asserted on a subset: misspelled predicates and classes of a published
ontology (DASH) and of the MetaQA store, and gold queries of CWQ, GrailQA and QALD-10."""

from __future__ import annotations

import random
import re

from bench.sparql_warnings import cases_for, gold_queries, pattern_store, run_cases, warned
from kg_mcp.settings import Settings
from kg_mcp.tools.sparql import sparql

SETTINGS = Settings()


def test_zero_rows_with_an_unknown_relation_says_so_first_with_the_nearest(ontology_store):
    brick = ontology_store("brick")
    out = sparql(brick, SETTINGS, "SELECT ?x ?t WHERE { ?x brick:hasTags ?t }")
    assert out.text.startswith(
        "sparql: 0 rows\nThe query names IRIs this KG does not have where the query puts them:\n"
        "- brick:hasTags is no relation of this KG; nearest: brick:hasTag (112 triples), "
    )
    (warning,) = out.data.warnings
    assert (warning.id, warning.position, warning.nearest[0].id, warning.nearest[0].triples) == (
        "brick:hasTags", "predicate", "brick:hasTag", 112)


def test_classes_misspelled_declared_without_instances_and_parts_that_matched_nothing(ontology_store):
    brick = ontology_store("brick")
    misspelled = sparql(brick, SETTINGS, "SELECT ?x WHERE { ?x a brick:Chiler }").data.warnings
    assert [n.id for n in misspelled[0].nearest][:1] == ["brick:Chiller"]
    # An ontology's classes have no instances in it: said so, and how to read what is below one.
    empty = sparql(brick, SETTINGS, "SELECT ?x WHERE { ?x a brick:Chiller }")
    assert "it is in the KG, with no instances: its subclasses are `?c rdfs:subClassOf+ brick:Chiller`" in empty.text
    # Rows, and a relation that exists nowhere in an OPTIONAL part: the note comes after the rows.
    out = sparql(brick, SETTINGS,
                 "SELECT ?c WHERE { ?c rdfs:subClassOf brick:Chiller OPTIONAL { ?c brick:hasAssociatedTags ?t } }")
    assert out.data.total == 4 and out.text.index("| brick:") < out.text.index("Note: the query names IRIs")
    assert [w.id for w in out.data.warnings] == ["brick:hasAssociatedTags"]
    assert out.data.warnings[0].nearest[0].id == "brick:hasAssociatedTag"
    # The same query with the right names: no warning.
    right = sparql(brick, SETTINGS, "SELECT DISTINCT ?c WHERE { ?c rdfs:subClassOf brick:Chiller OPTIONAL { ?c brick:hasAssociatedTag ?t } }")
    assert right.data.total == 4 and right.data.warnings == []


def test_an_unknown_entity_is_named_with_the_nearest_by_name(metaqa):
    out = sparql(metaqa, SETTINGS, "SELECT ?m WHERE { ?m :directed_by kg:Steven_Spielburg }")
    assert out.data.warnings[0].problem.startswith("kg:Steven_Spielburg is not in this KG; nearest: kg:Steven_Spielberg")


def test_misspelled_predicates_and_classes_find_the_intended_among_the_nearest_three(ontology_store, metaqa):
    rng = random.Random(5)
    results = run_cases(ontology_store("dash"), cases_for(ontology_store("dash"), "dash", rng, 15))
    results += run_cases(metaqa, cases_for(metaqa, "metaqa", rng, 15))
    assert len(results) >= 45 and {case.position for case, _, _ in results} == {"predicate", "class"}
    found = sum(ok for _, ok, _ in results)
    assert found / len(results) >= 0.95, [(c.wrong, c.intended, near) for c, ok, near in results if not ok]


def test_gold_queries_get_no_warning_on_a_store_of_their_patterns():
    queries = [q for benchmark in ("cwq", "grailqa", "qald10-en") for q in gold_queries(benchmark, 15, seed=1)]
    backend = pattern_store(queries, "generic")
    ran, failed, flagged = warned(backend, queries)
    assert ran >= 44 and (ran - len(flagged)) / ran >= 0.99, flagged
    # and the check is no blind eye: the same queries with their first relation misspelled are named
    relation = re.compile(r"(\bwdt:P[0-9]+|:[a-z_0-9]+\.[a-z_0-9]+\.[a-z_0-9]+)(?=[\s;.,])")
    changed = [relation.sub(r"\1x", q, count=1) for q in queries if relation.search(q)]
    _, _, named = warned(backend, changed)
    assert len(changed) >= 33 and len(named) >= 0.95 * len(changed)
