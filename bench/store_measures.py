"""Measures over stores: hub survey, ordinary calls, output tokens, load speed, remote hub survey."""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

from bench.common import (
    DATA,
    Row,
    bulk_load_code,
    free_port,
    load_code,
    paired_medians,
    start,
    stop,
    timed_child,
    wait_http,
)
from bench.data import HUB, LABEL, write_graph
from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.loading import load_sources, mint_local_name
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, get_relations, search, verify
from kg_mcp.tools.verify import TripleClaim

LANG = 'FILTER(LANG(?ol) IN ("en","mul",""))'


def hub_survey(work: Path, hub_edges: int, repeats: int) -> tuple[list[Row], Path]:
    """Target 1: the property-only view of a hub against `SELECT DISTINCT ?p` on the same store."""
    source = write_graph(work / f"hub-{hub_edges}.nt", hub_edges + hub_edges // 10, hub_edges)
    store_dir = work / f"hub-{hub_edges}.store"
    if not store_dir.exists():
        load_sources([source], store_dir, progress=False)
    backend = open_store(store_dir)
    settings = Settings()
    distinct = f"SELECT DISTINCT ?p WHERE {{ ?s ?p <{HUB}> }}"
    base, ours = paired_medians(
        lambda i: list(backend.store.query(distinct)),
        lambda i: search(backend, settings, f"<{HUB}>", "incoming"),
        repeats,
        warmup=1,
    )
    out = search(backend, settings, f"<{HUB}>", "incoming")
    assert out.data.view == "properties" and out.data.total == hub_edges, out.text[:300]
    base2, ours2 = paired_medians(
        lambda i: list(backend.store.query(distinct)), lambda i: get_relations(backend, settings, f"<{HUB}>"), repeats, warmup=1
    )
    rows = [
        Row(f"hub survey: search, {hub_edges:,} in-edges", ours * 1e3, base * 1e3, "ms", "<= 0.02", "baseline: SELECT DISTINCT ?p"),
        Row(f"hub survey: get_relations, {hub_edges:,}", ours2 * 1e3, base2 * 1e3, "ms", "<= 0.02"),
    ]
    return rows, store_dir


def metaqa_store(work: Path) -> Path:
    store_dir = work / "metaqa.store"
    if not store_dir.exists():
        load_sources([DATA / "metaqa" / "kb.txt"], store_dir, progress=False)
    return store_dir


def ordinary_calls(work: Path, samples: int) -> list[Row]:
    """Target 2: each tool on MetaQA against the one SPARQL query returning the same rows and labels."""
    backend = open_store(metaqa_store(work))
    settings, store = Settings(), backend.store
    e, r = "http://kg-mcp.local/entity/", "http://kg-mcp.local/relation/"
    films = [line.split("|")[0] for line in (DATA / "metaqa" / "kb.txt").open() if "|starred_actors|" in line]
    ids = [mint_local_name(f) for f in random.Random(3).sample(sorted(set(films)), samples)]

    def labelled(pattern: str) -> str:
        return f"SELECT * WHERE {{ {pattern} OPTIONAL {{ ?o <{LABEL}> ?ol {LANG} }} }}"

    cases = [
        (
            "search (outgoing, MetaQA film)",
            lambda i: list(store.query(labelled(f"<{e}{ids[i]}> ?p ?o"))),
            lambda i: search(backend, settings, f"kg:{ids[i]}", "outgoing"),
        ),
        (
            "get_relations",
            lambda i: list(
                store.query(
                    f"SELECT ?p ?d (COUNT(*) AS ?n) WHERE {{ {{ <{e}{ids[i]}> ?p ?o BIND(1 AS ?d) }} "
                    f"UNION {{ ?o ?p <{e}{ids[i]}> BIND(0 AS ?d) }} }} GROUP BY ?p ?d"
                )
            ),
            lambda i: get_relations(backend, settings, f"kg:{ids[i]}"),
        ),
        (
            "explore_kg (starred_actors)",
            lambda i: list(store.query(labelled(f"<{e}{ids[i]}> <{r}starred_actors> ?o"))),
            lambda i: explore_kg(backend, settings, f"kg:{ids[i]}", ["starred_actors"]),
        ),
        (
            "verify (one triple)",
            lambda i: list(store.query(labelled(f"<{e}{ids[i]}> <{r}starred_actors> ?o"))),
            lambda i: verify(backend, settings, [TripleClaim(subject=f"kg:{ids[i]}", relation="starred_actors", object="kg:Tom_Hanks")]),
        ),
    ]
    rows = []
    for name, bare, tool in cases:
        base, ours = paired_medians(lambda i: bare(i % samples), lambda i: tool(i % samples), samples)
        rows.append(Row(name, ours * 1e6, base * 1e6, "us", "<= 1.5", "baseline: the bare query for the same rows and labels"))
    return rows


def output_tokens(work: Path, per_hop: int) -> list[Row]:
    """Target 3: tokens of search's markdown against SPARQL JSON results for the same rows,
    over filtered searches along gold paths (MetaQA dev hops and PathQuestion)."""
    from kg_mcp.agents.evaluation.tokens import count_tokens, tokenizer_name

    backend = open_store(metaqa_store(work))
    settings = Settings()
    walks = []
    for hops in (1, 2, 3):
        questions = json.loads((DATA / "metaqa" / f"{hops}hop_dev.json").read_text())
        for q in random.Random(hops).sample(questions, per_hop):
            walks.append((backend, q["topic_entity"], q["gold_relation_path"]))
    pq_dir = work / "pathquestion.store"
    if not pq_dir.exists():
        load_sources([DATA / "pathquestion" / "2H-kb.txt", DATA / "pathquestion" / "3H-kb.txt"], pq_dir, progress=False)
    pq = open_store(pq_dir)
    for name in ("PQ-2H.txt", "PQ-3H.txt"):
        lines = [line for line in (DATA / "pathquestion" / name).read_text().splitlines() if line.strip()]
        for line in random.Random(5).sample(lines, per_hop):
            parts = line.split("\t")[2].split("#<end>#")[0].split("#")
            walks.append((pq, parts[0], parts[1:-1:2]))
    markdown = json_tokens = calls = 0
    for kg, topic, path in walks:
        frontier = [kg.vocab.compact(kg.resolve_entity(topic))]
        for step in path:
            direction = "incoming" if step.startswith("~") else "outgoing"
            reached = []
            for entity in frontier[:20]:
                out = search(kg, settings, entity, direction, [step.lstrip("~")])
                markdown += count_tokens(out.text)
                json_tokens += count_tokens(_sparql_json(out.data))
                calls += 1
                reached += [row.value.id for row in out.data.rows if row.value.kind == "iri"]
            frontier = list(dict.fromkeys(reached))
    return [
        Row(
            f"tokens per search call ({calls} calls)",
            markdown / calls,
            json_tokens / calls,
            "tok",
            "<= 0.35",
            f"baseline: SPARQL JSON results of the same rows; tokenizer {tokenizer_name()}",
        )
    ]


def _sparql_json(data) -> str:
    """The SPARQL 1.1 JSON results a raw endpoint would return for the rows `search` showed."""

    def term(value: str, kind: str) -> dict:
        return {"type": "uri", "value": value} if kind == "iri" else {"type": "literal", "value": value}

    bindings = []
    for row in data.rows:
        binding = {"property": term(row.property, "iri"), "value": term(row.value.id, row.value.kind)}
        if row.propertyLabel:
            binding["propertyLabel"] = {"type": "literal", "xml:lang": "en", "value": row.propertyLabel}
        if row.value.label:
            binding["valueLabel"] = {"type": "literal", "xml:lang": "en", "value": row.value.label}
        bindings.append(binding)
    head = {"vars": ["property", "propertyLabel", "value", "valueLabel"]}
    return json.dumps({"head": head, "results": {"bindings": bindings}}, indent=2)


def load_speed(work: Path, triples: int, hub_edges: int) -> list[Row]:
    """Target 4: `kg-mcp load` against pyoxigraph's own bulk_load of the same N-Triples file, each
    in a fresh process (peak memory is that process's): the load without the name index against
    bulk_load then the compaction kg-mcp load does, and the name index's share (the load with it
    against the load without)."""
    source = write_graph(work / f"load-{triples}.nt", triples, hub_edges)
    compact_note = work / ".load-compact-seconds"
    compact_note.unlink(missing_ok=True)
    results = {}
    for name, code in (
        ("baseline", lambda source, store: bulk_load_code(source, store, compact_note)),
        ("plain", lambda source, store: load_code(source, store, name_index=False)),
        ("ours", load_code),
    ):
        store = work / f"load-{name}.store"
        shutil.rmtree(store, ignore_errors=True)
        results[name] = timed_child(code(source, store))
        shutil.rmtree(store, ignore_errors=True)
    (ours_s, ours_mb), (plain_s, plain_mb), (base_s, base_mb) = results["ours"], results["plain"], results["baseline"]
    compact_s = float(compact_note.read_text())
    return [
        Row(
            f"load {triples:,} N-Triples (triples/s)",
            triples / plain_s,
            triples / base_s,
            "t/s",
            ">= 0.8",
            f"hub statistics and compaction included, name index not; bulk_load {base_s - compact_s:.1f} s + "
            f"compaction {compact_s:.1f} s; peak memory ours {plain_mb:,.0f} MB, bulk_load {base_mb:,.0f} MB",
        ),
        Row(
            f"load {triples:,} with the name index (s)",
            ours_s,
            plain_s,
            "s",
            "<= 1.3",
            f"against the same load without it (name_index=False); peak memory {ours_mb:,.0f} MB",
        ),
    ]


def remote_hub(work: Path, hub_store: Path, hub_edges: int, cap: int, repeats: int) -> list[Row]:
    """Target 5: the remote backend's hub survey against `oxigraph serve` holding the same hub:
    bounded queries only, within the timeout."""
    cli = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    port = free_port()
    server = start([cli, "serve-read-only", "--location", str(hub_store), "--bind", f"127.0.0.1:{port}"])
    try:
        wait_http(f"http://127.0.0.1:{port}/")
        url = f"http://127.0.0.1:{port}/query"
        settings = Settings(count_cap=cap, timeout_s=30)
        backend = open_endpoint(url, profile="generic", settings=settings)
        issued: list[str] = []
        fetch = backend._answer

        def recording(query: str, *args, **kwargs):
            issued.append(query)
            return fetch(query, *args, **kwargs)

        backend._answer = recording
        distinct = f"SELECT DISTINCT ?p WHERE {{ ?s ?p <{HUB}> }}"
        base, ours = paired_medians(
            lambda i: fetch(distinct), lambda i: search(backend, settings, f"<{HUB}>", "incoming"), repeats, warmup=1
        )
        # No query may read every edge of the hub: any that touches the hub is cut by a LIMIT.
        unbounded = [q for q in issued if f"<{HUB}>" in q and "LIMIT" not in q and "VALUES ?x" not in q]
        assert not unbounded, unbounded
        return [
            Row(
                f"remote hub survey, {hub_edges:,} in-edges",
                ours * 1e3,
                base * 1e3,
                "ms",
                "<= 1.0",
                f"every aggregate bounded (LIMIT {cap:,}); timeout {settings.timeout_s:g} s never reached",
            )
        ]
    finally:
        stop(server)


def label_check() -> None:
    """Fail early if the data the measures read is missing."""
    for path in (DATA / "metaqa" / "kb.txt", DATA / "pathquestion" / "2H-kb.txt"):
        if not path.exists():
            raise SystemExit(f"missing {path}: the benchmarks read ../shared/data")

