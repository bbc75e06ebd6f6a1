"""How long the listings' results are when nothing cuts them: the measurements behind the default
character budget (Settings.max_output_chars).

Ordinary calls on three kinds of KG, each made once with no budget to speak of (the whole result
on one page) and once with the default one:

- the demo KG (Wikidata-shaped): search of every entity both ways, get_relations of each;
- MetaQA: the dev questions' gold walks (search of the topic along each gold relation, follow of
  the whole gold path, get_relations and explore_kg of the topic entity);
- published ontologies (tests/ontologies.py): the ontology oracle's gold calls, and an unfiltered
  search and get_relations of each question's subject.

Printed: the distribution of the whole results' characters (median, 90th, 95th, 99th percentile,
the largest), the share of results that come whole on one page under the default budget, and
how clients treat long results, for the choice. A page's rows stop at a row count too (search's p,
follow's limit): "whole" is the first page with no character budget, and a result comes whole
under the default when it ends where that one does. The row's goal: at least 98% of them whole.
"""

from __future__ import annotations

import json
import random
import statistics
from collections.abc import Callable
from pathlib import Path

import pyoxigraph as ox

from bench.common import DATA, Row
from bench.ontology_cost import _graph, _store
from bench.store_measures import metaqa_store
from kg_mcp.agents.evaluation.ontology_oracle import questions
from kg_mcp.backends import open_demo, open_store
from kg_mcp.errors import KGError
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, follow, get_relations, search

WHOLE = Settings(max_output_chars=10_000_000)  # nothing is cut: a result's whole length
ONTOLOGIES = ("brick", "linkml", "schema.org", "shacl-shacl", "dash")
GOAL = 0.98


def result_sizes(work: Path, per_kind: int, questions_per_hop: int) -> list[Row]:
    calls: list[tuple[str, object, Callable]] = []  # (KG, backend, call(backend, settings))
    demo = open_demo()
    for subject in sorted({q.subject for q in demo.store.quads_for_pattern(None, None, None) if isinstance(q.subject, ox.NamedNode)},
                          key=str)[:120]:
        ref = demo.vocab.compact(subject)
        for way in ("outgoing", "incoming"):
            calls.append(("demo KG", demo, lambda b, s, ref=ref, way=way: search(b, s, ref, way)))
        calls.append(("demo KG", demo, lambda b, s, ref=ref: get_relations(b, s, ref)))
    metaqa = open_store(metaqa_store(work))
    for hops in (1, 2, 3):
        asked = json.loads((DATA / "metaqa" / f"{hops}hop_dev.json").read_text())
        for q in random.Random(hops).sample(asked, questions_per_hop):
            topic, path = q["topic_entity"], q["gold_relation_path"]
            step = path[0]
            calls.append(("MetaQA", metaqa, lambda b, s, t=topic, p=step: search(
                b, s, t, "incoming" if p.startswith("~") else "outgoing", [p.lstrip("~")])))
            calls.append(("MetaQA", metaqa, lambda b, s, t=topic, p=path: follow(b, s, t, list(p))))
            calls.append(("MetaQA", metaqa, lambda b, s, t=topic: get_relations(b, s, t)))
            calls.append(("MetaQA", metaqa, lambda b, s, t=topic, p=step: explore_kg(b, s, t, [p])))
    opened = [demo, metaqa]
    for name in ONTOLOGIES:
        backend = open_store(_store(work, name))
        opened.append(backend)
        for q in questions(_graph(name), lambda iri, b=backend: b.vocab.compact(ox.NamedNode(iri)), per_kind=per_kind):
            tool = follow if q.tool == "follow" else search
            calls.append((name, backend, lambda b, s, t=tool, a=q.arguments: t(b, s, **a)))
            calls.append((name, backend, lambda b, s, e=q.arguments["entity"]: search(b, s, e)))
            calls.append((name, backend, lambda b, s, e=q.arguments["entity"]: get_relations(b, s, e)))
    default = Settings()
    sizes, structured, whole_under_default, by_kg = [], [], 0, {}
    for kg, backend, call in calls:
        try:
            whole = call(backend, WHOLE)
            paged = call(backend, default)
        except KGError:
            continue
        sizes.append(len(whole.text))
        structured.append(len(json.dumps(whole.data.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))))
        by_kg.setdefault(kg, []).append(len(whole.text))
        whole_under_default += paged.data.next_cursor == whole.data.next_cursor and "[Output cut" not in paged.text
    for backend in opened:
        backend.close()
    print(_distribution("all", sizes))
    for kg, found in by_kg.items():
        print(_distribution(kg, found))
    print(_distribution("all, structured content (JSON)", structured))
    print(f"the default budget: {default.max_output_chars:,} characters a page (text; its structured content too); "
          "Claude Code warns past 10,000 tokens, refuses past MAX_MCP_OUTPUT_TOKENS = 25,000 and keeps a result of "
          "more than 50,000 characters in a file, out of the conversation")
    return [Row(f"results whole on one page under the default budget ({len(sizes)} calls)", whole_under_default,
                len(sizes), "calls", f">= {GOAL}", f"the largest whole result: {max(sizes):,} characters")]


def _distribution(name: str, sizes: list[int]) -> str:
    ordered = sorted(sizes)

    def at(q: float) -> int:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return (f"result characters, {name} ({len(sizes)} calls): median {statistics.median(ordered):,.0f}, "
            f"p90 {at(0.9):,}, p95 {at(0.95):,}, p99 {at(0.99):,}, largest {ordered[-1]:,}")
