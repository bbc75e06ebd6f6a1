"""A Freebase-shaped KG with mediator (CVT) nodes, in a local store and in Virtuoso, with --profile freebase.

The fixture (tests/data/freebase_cvt.nt, written by hand) has `m.` ids named by type.object.name,
dotted relations with labels, and unnamed mediator nodes between a politician and the offices he
held. A two-hop question walks through a mediator; the mediator's label must say what it is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ENGINES

from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, get_relations, search

FIXTURE = Path(__file__).parent / "data" / "freebase_cvt.nt"
HELD = "government.politician.government_positions_held"
TITLE = "government.government_position_held.office_position_or_title"


@pytest.fixture(scope="module")
def freebase_local(tmp_path_factory):
    store = tmp_path_factory.mktemp("stores") / "freebase"
    load_sources([FIXTURE], store, progress=False)
    return open_store(store, profile="freebase")


@pytest.fixture(scope="module", params=("local", *ENGINES))
def freebase(request, engine_endpoints, freebase_local):
    if request.param == "local":
        return freebase_local
    return open_endpoint(engine_endpoints(request.param, "freebase", FIXTURE), profile="freebase")


def test_two_hop_question_through_a_mediator(freebase):
    settings = Settings()
    # "Which offices has Barack Obama held?": m.02mjmr -HELD-> mediator -TITLE-> office.
    first = search(freebase, settings, "Barack Obama", "outgoing", [HELD])
    mediators = [row.value for row in first.data.rows]
    assert {m.id for m in mediators} == {"m.04ml2cb", "m.05kfbmd"}
    assert all("unnamed mediator node" in m.label and "its own relations lead to the entities it links" in m.label for m in mediators)
    assert "unnamed mediator node" in first.text and "<http" not in first.text
    offices = set()
    for mediator in mediators:
        second = search(freebase, settings, mediator.id, "outgoing", [TITLE])
        offices |= {row.value.label for row in second.data.rows}
        assert {row.property for row in second.data.rows} == {TITLE}
    assert offices == {"President of the United States", "United States Senator"}


def test_compact_ids_and_relation_labels(freebase):
    relations = get_relations(freebase, Settings(), "m.02mjmr").data.relations
    by_id = {r.relation: r.label for r in relations}
    assert by_id["people.person.place_of_birth"] == "Place of birth"
    assert by_id[HELD] == "Government positions held"
    assert by_id["~government.government_position_held.office_holder"] == "Office holder"
    walked = explore_kg(freebase, Settings(), "m.02mjmr", ["people.person.spouse_s"]).data.relations[0]
    (marriage,) = walked.neighbours
    assert marriage.id == "m.02nqglv" and "unnamed mediator node" in marriage.label
    spouse = search(freebase, Settings(), marriage.id, "outgoing", ["people.marriage.spouse"]).data.rows[0].value
    assert (spouse.id, spouse.label) == ("m.025s5v9", "Michelle Obama")


def test_named_nodes_keep_their_names(freebase):
    born = search(freebase, Settings(), "m.02mjmr", "outgoing", ["people.person.place_of_birth"]).data.rows[0].value
    assert (born.id, born.label) == ("m.03gh4", "Honolulu")


def test_serve_command_accepts_the_freebase_profile_on_an_endpoint(engine_endpoints):
    from kg_mcp.cli import main

    url = engine_endpoints("virtuoso", "freebase", FIXTURE)
    out = CliRunner().invoke(main, ["info", "--sparql", url, "--profile", "freebase"])
    assert out.exit_code == 0, out.output
    assert "profile: freebase" in out.output and f"triples: {len(FIXTURE.read_text().splitlines())}" in out.output
