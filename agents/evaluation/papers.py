"""The papers' own figures on the benchmarks kg-mcp runs, with what each was measured on, and
whether a run was measured on the same.

Only figures read in the paper itself are listed, each with the paper, table, model and metric.
Think-on-Graph (Sun et al., ICLR 2024, arXiv:2307.07697) reports "exact match accuracy (Hits@1)"
on all nine of its sets (Table 1, rows "ToG (Ours) w/ChatGPT" and "ToG (Ours) w/GPT-4"). Its
Hits@1 is the share of questions whose answer names a gold answer or one of its aliases: the
`hits@1` of `metrics.sog_metrics`, with `Question.aliases` (Search-on-Graph scores the same way).
On Creak's true/false claims the same figure is the accuracy.

Each figure carries the KG it was measured on (the whole Freebase or Wikidata) and its question
count (the released test file, which the paper ran whole). A run's figure is printed beside it
only with the run's own KG (kind, size, profile) and question count, and a verdict: a run on a
KG far smaller than the paper's, or read with another profile, is "not comparable", and says why.

Not listed (no figure read in the paper here): Search-on-Graph (2025), R2-KG (2025) and
KG-Reasoner (2025); see docs/evaluation/papers.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse


@dataclass(frozen=True)
class PaperKG:
    name: str
    profile: str  # the kg-mcp profile that reads it
    scope: str  # what the papers ran on, in words
    least_triples: int  # a KG holding fewer triples is not this one


PAPER_KGS = {
    "freebase": PaperKG("Freebase", "freebase", "the whole Freebase dump, billions of triples", 1_000_000_000),
    "wikidata": PaperKG("Wikidata", "wikidata", "the whole Wikidata, billions of triples", 1_000_000_000),
}
# Public services that are the paper's KG itself, whatever a bounded count of them says.
_SERVICES = {"query.wikidata.org": "wikidata"}


@dataclass(frozen=True)
class PaperFigure:
    benchmark: str  # a kg-mcp benchmark name
    paper: str
    table: str
    model: str
    metric: str  # the paper's name for it
    key: str  # the summary's key for our figure of the same metric
    value: float  # a share (0.676 for 67.6%)
    kg: str  # a key of PAPER_KGS
    questions: int  # the paper's test set (the released file, run whole)


_TOG = "Think-on-Graph (Sun et al., ICLR 2024)"
_TOG_TABLE = "Table 1"
_TOG_METRIC = "Hits@1 (exact match)"
# Table 1, in the paper's column order: CWQ, WebQSP, GrailQA, QALD10-en, Simple Questions,
# WebQuestions, T-REx, Zero-Shot RE, Creak; each set's KG and its released test file's size.
_TOG_COLUMNS = {
    "cwq": ("freebase", 3531),
    "webqsp": ("freebase", 1639),
    "grailqa": ("freebase", 1000),
    "qald10-en": ("wikidata", 333),
    "simpleqa": ("freebase", 1000),
    "webquestions": ("freebase", 2032),
    "trex": ("wikidata", 5000),
    "zsre": ("wikidata", 3724),
    "creak": ("wikidata", 1371),
}
_TOG_ROWS = {
    "ChatGPT (GPT-3.5-turbo)": (57.1, 76.2, 68.7, 50.2, 53.6, 54.5, 76.8, 88.0, 91.2),
    "GPT-4": (67.6, 82.6, 81.4, 53.8, 66.7, 57.9, 77.1, 88.3, 95.6),
}

FIGURES: tuple[PaperFigure, ...] = tuple(
    PaperFigure(benchmark, _TOG, _TOG_TABLE, f"ToG w/ {model}", _TOG_METRIC, "hits@1", round(value / 100, 4), kg, count)
    for model, values in _TOG_ROWS.items()
    for (benchmark, (kg, count)), value in zip(_TOG_COLUMNS.items(), values, strict=True)
)


def figures_for(benchmark: str | None) -> list[PaperFigure]:
    return [f for f in FIGURES if f.benchmark == benchmark]


def kg_words(kg: dict[str, Any] | None, described: str | None = None) -> str:
    """The run's KG as recorded at its start (kg://stats): what, where, how big, which profile.

    >>> kg_words({"kind": "oxigraph", "location": "/s", "triples": 2030, "profile": "freebase"})
    'local store /s (2,030 triples, profile freebase)'
    >>> kg_words({"kind": "remote", "endpoint": "http://x/sparql", "triples": 100000, "lower_bounds": True,
    ...           "profile": "wikidata"})
    'endpoint http://x/sparql (at least 100,000 triples, profile wikidata)'
    >>> kg_words(None, "/old/store")
    '/old/store (size and profile not recorded)'
    """
    if not kg:
        return f"{described or 'a KG'} (size and profile not recorded)"
    where = f"endpoint {kg.get('endpoint')}" if kg.get("kind") == "remote" else "local store" + (f" {kg['location']}" if kg.get("location") else "")
    triples = kg.get("triples")
    if triples is None:
        size = "size not counted"
    else:
        size = f"{'at least ' if kg.get('lower_bounds') else ''}{triples:,} triples"
    return f"{where} ({size}, profile {kg.get('profile')})"


def verdict(figure: PaperFigure, kg: dict[str, Any] | None, questions: int) -> tuple[str, str]:
    """("comparable" | "not comparable" | "unverified", why) for a run on `kg` over `questions` questions."""
    paper = PAPER_KGS[figure.kg]
    sample = f"; {questions:,} of the paper's {figure.questions:,} questions" if questions < figure.questions else ""
    if not kg:
        return "unverified", f"the run did not record its KG, so it cannot be told from {paper.name}"
    if kg.get("profile") != paper.profile:
        return "not comparable", f"the run's KG is read with the {kg.get('profile')} profile: it is not {paper.name}"
    host = urlparse(str(kg.get("endpoint") or "")).hostname
    if kg.get("kind") == "remote" and _SERVICES.get(host or "") == figure.kg:
        return "comparable", f"the live {paper.name} service (today's data, not the paper's copy){sample}"
    triples = kg.get("triples")
    if triples is None:
        return "unverified", f"the run's KG was not counted, so it cannot be told from {paper.name}{sample}"
    if triples < paper.least_triples:
        if kg.get("lower_bounds"):
            return "unverified", (
                f"the run's KG was counted only to {triples:,} triples, so it cannot be told from "
                f"{paper.name} ({paper.scope}){sample}"
            )
        return "not comparable", f"the run's KG holds {triples:,} triples; {paper.name} holds billions{sample}"
    return "comparable", f"{triples:,} triples read with the {paper.profile} profile{sample}"


def against_papers(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per published figure on the run's benchmark: the paper's and ours, same metric, each
    with its KG and question count, and whether the two can be compared."""
    kg, questions = summary.get("kg"), summary.get("questions") or 0
    shown = kg_words(kg, summary.get("kg_described"))
    rows = []
    for f in figures_for(summary.get("benchmark")):
        comparable, why = verdict(f, kg, questions)
        rows.append({
            "paper": f.paper, "table": f.table, "model": f.model, "metric": f.metric,
            "paper_value": f.value, "paper_kg": f"{PAPER_KGS[f.kg].name} ({PAPER_KGS[f.kg].scope})",
            "paper_questions": f.questions,
            "ours": summary.get(f.key), "run_kg": shown, "run_questions": questions,
            "comparable": comparable, "why": why,
        })
    return rows
