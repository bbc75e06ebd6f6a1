"""The KG's schema up front: the server instructions a client receives at initialize carry a bounded
summary of the KG (size, id style, relations with counts, hubs), and the drivers can put the same
summary in their system prompts (--schema).

Real stores (MetaQA, the Wikidata sample), a real `oxigraph serve` endpoint, the SDK's own Client
against the real server; the relations and counts expected are read from the stores by SPARQL here.
"""

from __future__ import annotations

import contextlib
import json
import threading

import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from mcp import Client

from fault_proxy import Fault, FaultProxy
from kg_mcp.agents.evaluation.tokens import count_tokens
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kg_reasoner import prompt_for
from kg_mcp.agents.models import ModelError
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.backends import open_endpoint
from kg_mcp.cli import main
from kg_mcp.schema.census import take_census
from kg_mcp.schema.summary import summary_heading, summary_text
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from providers import FakeProvider

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
WDT = "http://www.wikidata.org/prop/direct/"
WIKIBASE = "http://wikiba.se/ontology#"
HEADING = "## This knowledge graph"


def _counts(store: ox.Store, where: str = "?s ?p ?o") -> dict[str, int]:
    rows = store.query(f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {where} }} GROUP BY ?p")
    return {row["p"].value: int(row["n"].value) for row in rows}


async def _instructions(backend, settings: Settings | None = None) -> str:
    async with Client(build_server(backend, settings or backend.settings)) as client:
        return client.instructions or ""


# --- what a client receives at initialize --------------------------------------------------------


async def test_metaqa_instructions_name_every_relation_with_its_count(metaqa):
    relations = {p: n for p, n in _counts(metaqa.store).items() if p != RDFS_LABEL}
    assert len(relations) == 9
    async with Client(build_server(metaqa)) as client:
        instructions = client.instructions or ""
        schema = json.loads((await client.read_resource("kg://schema")).contents[0].text)
        stats = json.loads((await client.read_resource("kg://stats")).contents[0].text)
    assert "find_entities" in instructions  # the general guide comes first
    summary = instructions[instructions.index(HEADING):]
    for iri, n in relations.items():
        assert f"- `{iri.rsplit('/', 1)[-1]}`: {n:,}\n" in summary, iri
    assert "Relations (all 9)" in summary and "More:" not in summary
    # the size, the id style with a label that works as an id, and the hubs (has_genre's genres)
    assert f"{len(metaqa.store) - 1:,} triples" in summary
    assert "(`Drama` is `kg:Drama`)" in summary
    assert "- `kg:Drama` (Drama): 4,016 incoming (has_genre 4,016)" in summary
    assert summary_heading() == HEADING
    # kg://schema serves the same figures
    assert {r["relation"]: r["triples"] for r in schema["top_relations"]} == {
        iri.rsplit("/", 1)[-1]: n for iri, n in relations.items()
    }
    # one count of entities and relations: every predicate (rdfs:label too), every named subject
    assert schema["relation_total"] == stats["relations"] == 10 and schema["hubs"][0]["entity"] == "kg:Drama"
    assert f"about {stats['entities']:,} entities (named subjects), in 10 relations" in summary
    assert schema["names"] == [{"relation": "rdfs:label", "triples": len(metaqa.store) - 1 - sum(relations.values())}]
    assert "`rdfs:label` " in summary and "(shown beside each id)" in summary


async def test_wikidata_sample_instructions_stay_within_2000_tokens(wikidata_local):
    store = wikidata_local.store
    facts = {p: n for p, n in _counts(store).items() if p.startswith(WDT)}
    identifiers = {
        row["p"].value
        for row in store.query(
            f"SELECT ?p WHERE {{ ?e <{WIKIBASE}propertyType> <{WIKIBASE}ExternalId> ; <{WIKIBASE}directClaim> ?p }}"
        )
    }
    assert len(facts) > 500 and identifiers
    instructions = await _instructions(wikidata_local)
    assert count_tokens(instructions) <= 2000
    summary = instructions[instructions.index(HEADING):]
    # the most used facts (external identifiers aside), each with its count, in order of use
    top = sorted((p for p in facts if p not in identifiers), key=lambda p: -facts[p])[:10]
    places = []
    for iri in top:
        line = f"- `wdt:{iri.rsplit('/', 1)[-1]}`"
        assert line in summary, iri
        at = summary.index(line)
        assert summary[at:].split("\n", 1)[0].endswith(f": {facts[iri]:,}"), iri
        places.append((at, facts[iri]))
    assert [n for _, n in sorted(places)] == sorted((n for _, n in places), reverse=True)  # most used first
    assert "- `wdt:P31` instance of: 17" in summary  # labels next to ids
    assert "most used of" in summary and "kg://schema" in summary


def test_a_big_store_is_summed_up_from_a_sample_and_its_hub_statistics(tmp_path, data_dir):
    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources

    load_sources([data_dir / "metaqa" / "kb.txt"], tmp_path / "store", progress=False, hub_threshold=1000)
    backend = open_store(tmp_path / "store")
    try:
        census = take_census(backend, 10, exact_up_to=50_000, sample=20_000)
    finally:
        backend.close()
    text = summary_text(census, Settings())
    assert census.relations_basis == "sample" and census.hubs_basis == "load-time statistics"
    assert "about 172,219 triples, as loaded" in text
    assert "in a sample of the first 20,000 triples" in text and "`directed_by`" in text
    assert "entities with 1,000 edges or more" in text and "- `kg:Drama` (Drama): 4,016 incoming" in text


# --- on an endpoint: bounded queries at start ------------------------------------------------------


async def test_an_endpoint_gets_a_summary_from_bounded_queries(oxigraph_endpoint):
    backend = open_endpoint(oxigraph_endpoint)
    try:
        instructions = await _instructions(backend)
    finally:
        backend.close()
    summary = instructions[instructions.index(HEADING):]
    assert "53,429 triples" in summary and "(schema profile: wikidata)" in summary
    assert "- `wdt:P31` instance of: 17" in summary
    assert "Not read at start" not in summary


async def test_a_stalled_endpoint_does_not_hold_the_server_start(oxigraph_endpoint):
    with FaultProxy(oxigraph_endpoint) as proxy:
        # No query at open: the profile is given and prefixes are not sampled.
        backend = open_endpoint(proxy.url, profile="wikidata", settings=Settings(prefix_discovery=False, schema_summary_s=1))
        release = threading.Event()
        proxy.add(Fault("hold", release=release, delay_s=60, then=Fault.error(503)))
        try:
            server = build_server(backend, backend.settings)
            # The server was built while the endpoint still held the census's query.
            assert not release.is_set() and proxy.count("hold") == 1
            release.set()
            async with Client(server) as client:
                instructions = client.instructions or ""
        finally:
            release.set()
            backend.close()
    assert "find_entities" in instructions and HEADING in instructions
    assert "Not read at start: size (" in instructions and "relations (no time left)" in instructions


# --- the drivers: --schema -------------------------------------------------------------------------


def _stop_after_first_request(messages, tools):
    raise ModelError("stop: the test has what it needs")


@pytest.mark.parametrize("method", ["sog", "r2kg", "ark"])
async def test_schema_puts_the_summary_in_a_drivers_system_prompt(metaqa, method):
    from kg_mcp.agents.ask import ask

    systems = {}
    async with KGClient.connect(server=metaqa) as kg:
        assert kg.schema is not None and kg.schema.startswith(HEADING)
        for schema in (True, False):
            model = ScriptedModel(_stop_after_first_request)
            with contextlib.suppress(ModelError):  # R2-KG abstains on a model error; the others raise it
                await ask("who directed [Jaws]", kg, method=method, model=model, topics={"Jaws": "kg:Jaws"}, schema=schema)
            systems[schema] = model.seen[0]["messages"][0]
    assert systems[True].role == systems[False].role == "system"
    assert systems[True].content.startswith(systems[False].content.rstrip())
    # The summary as a model given this driver's tools reads it (kg_client.offered_schema: no sentence
    # about a tool it is not given)
    offered = {"sog": ("search",), "r2kg": ("get_relations", "explore_kg"), "ark": ()}[method]
    assert systems[True].content.endswith(kg.offered_schema(offered)) and "- `has_genre`: 14,910" in systems[True].content
    assert HEADING not in systems[False].content


def test_kg_reasoner_prompt_carries_the_summary():
    with_summary = prompt_for("generic", "who directed [Jaws]", {"Jaws": "kg:Jaws"}, "", schema=f"{HEADING}\n\n- `directed_by`: 3")
    plain = prompt_for("generic", "who directed [Jaws]", {"Jaws": "kg:Jaws"}, "")
    assert with_summary.system.startswith(plain.system) and with_summary.system.endswith("- `directed_by`: 3")
    assert HEADING in with_summary.head and HEADING not in plain.head


@pytest.mark.parametrize(("flags", "expected"), [([], False), (["--schema"], True), (["--tools", "follow"], True),
                                                 (["--tools", "follow", "--no-schema"], False)])
def test_ask_schema_option(metaqa_store_dir, tmp_path, monkeypatch, flags, expected):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with FakeProvider(lambda request: "Final answer: {Steven Spielberg}") as fake:
        done = CliRunner().invoke(main, [
            "ask", "who directed [Jaws]", "--store", str(metaqa_store_dir), "--topic", "Jaws=kg:Jaws", "--quiet",
            "--model", "openai:scripted", "--base-url", fake.base_url_openai, "--trace", str(tmp_path / "t.jsonl"),
            *flags,
        ])
        assert done.exit_code == 0, done.output
        system = fake.requests[0].messages()[0]
    assert system.role == "system"
    assert (HEADING in system.content) is expected
    assert ("- `directed_by`: 15,887" in system.content) is expected
