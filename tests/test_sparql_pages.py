"""The sparql tool's pages: a cut answer gives its total and a next_cursor that runs the same checked
query for the next rows, in one order, on a local store and on an endpoint (`oxigraph serve`)."""

from __future__ import annotations

import pytest
from conftest import store_as_ntriples

from kg_mcp.backends import open_endpoint
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools.pages import more_line
from kg_mcp.tools.sparql import sparql

SETTINGS = Settings()
# Pages of 1,000 rows (and room for them): five pages, each a sort of the answer by the engine.
BIG_PAGES = Settings(sparql_row_cap=1000, max_output_chars=250_000)
# 5,000 of MetaQA's 5,796 comedies, horror and action films: no ORDER BY, so the tool orders the pages.
FIVE_THOUSAND = "SELECT ?film ?genre WHERE { VALUES ?genre { kg:Comedy kg:Horror kg:Action } ?film :has_genre ?genre } LIMIT 5000"
# Its own order, with ties (many films a year): kg-mcp breaks them with the row's variables.
TIES = "SELECT ?film ?year WHERE { ?film :release_year ?year . FILTER(?year = kg:1999 || ?year = kg:2000) } ORDER BY DESC(?year)"


@pytest.fixture(scope="module")
def metaqa_endpoint(engine_endpoints, metaqa_store_dir, tmp_path_factory):
    source = store_as_ntriples(metaqa_store_dir, tmp_path_factory.mktemp("nt") / "metaqa.nt")
    backend = open_endpoint(engine_endpoints("oxigraph", "metaqa", source), settings=SETTINGS)
    yield backend
    backend.close()


def read_every_page(backend, query: str, settings: Settings = SETTINGS) -> tuple[list[tuple], list]:
    """Every row of `query` read page by page through next_cursor, and each page's output."""
    rows, outputs, cursor = [], [], ""
    while True:
        out = sparql(backend, settings, query, cursor)
        assert out.data.offset == len(rows)  # each page starts where the last one ended
        outputs.append(out)
        rows += [tuple(cell.id for cell in row) for row in out.data.rows]
        cursor = out.data.next_cursor
        if cursor is None:
            return rows, outputs
        assert out.text.endswith(more_line(out.data.offset, len(out.data.rows), out.data.total, cursor))


@pytest.fixture(params=["local store", "endpoint"])
def backend(request):
    return request.getfixturevalue("metaqa" if request.param == "local store" else "metaqa_endpoint")


def test_paging_through_a_5000_row_answer_returns_every_row_once(backend):
    rows, outputs = read_every_page(backend, FIVE_THOUSAND, BIG_PAGES)
    assert len(rows) == len(set(rows)) == 5000
    assert len(outputs) == 5 and all(out.data.total == 5000 for out in outputs)
    assert outputs[-1].text.endswith("Rows 4,001-5,000 shown: the last page.")
    # the same rows as the query asked of the store in one piece
    whole = backend.run_query("SELECT ?film ?genre WHERE { VALUES ?genre { <http://kg-mcp.local/entity/Comedy> "
                              "<http://kg-mcp.local/entity/Horror> <http://kg-mcp.local/entity/Action> } "
                              "?film <http://kg-mcp.local/relation/has_genre> ?genre } ORDER BY ?film ?genre LIMIT 5000", 10_000)
    assert set(rows) == {tuple(backend.vocab.compact(t) for t in row) for row in whole.rows}


def test_pages_keep_the_querys_own_order_and_break_its_ties(metaqa):
    rows, outputs = read_every_page(metaqa, TIES, Settings(sparql_row_cap=40))
    years = [year for _, year in rows]
    assert len(rows) == len(set(rows)) == outputs[0].data.total > 40 and len(outputs) > 2
    assert years == sorted(years, reverse=True) and set(years) == {"kg:1999", "kg:2000"}


def test_a_cursor_reads_on_only_its_own_query(metaqa):
    first = sparql(metaqa, Settings(sparql_row_cap=10), FIVE_THOUSAND)
    with pytest.raises(InvalidInput, match="issued for a sparql call with other arguments"):
        sparql(metaqa, SETTINGS, FIVE_THOUSAND.replace("5000", "4000"), first.data.next_cursor)
    with pytest.raises(InvalidInput, match="ASK query has one answer and no pages"):
        sparql(metaqa, SETTINGS, "ASK { ?s ?p ?o }", first.data.next_cursor)


def test_an_answer_too_long_to_count_is_cut_without_a_cursor_unless_it_is_ordered(memory_backend):
    """Past what the engine counts while reading (100 x the cap, at least 10,000 rows), ordering the
    whole answer for pages costs more than a model can read: the text says how to page or narrow."""
    backend = memory_backend("".join(f"<http://e/s{i}> <http://e/p> {i} .\n" for i in range(10_050)))
    settings = Settings(sparql_row_cap=20)
    out = sparql(backend, settings, "SELECT ?s ?o WHERE { ?s <http://e/p> ?o }")
    assert out.data.total is None and out.data.next_cursor is None and out.data.truncated
    assert "more than 10,000 rows, showing the first 20 (cut)" in out.text and "add ORDER BY" in out.text
    ordered = "SELECT ?s ?o WHERE { ?s <http://e/p> ?o } ORDER BY DESC(?o)"
    first = sparql(backend, settings, ordered)
    assert first.data.next_cursor is not None and first.text.startswith("sparql: more than 10,000 rows\n")
    second = sparql(backend, settings, ordered, first.data.next_cursor)
    assert second.data.offset == 20 and second.data.next_cursor is not None
    assert [row[1].id for row in second.data.rows] == [str(i) for i in range(10_029, 10_009, -1)]
