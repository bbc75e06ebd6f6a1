"""The papers' own figures on the benchmarks kg-mcp runs, so that a run reads as "ours against the paper".

Only figures read in the paper itself are listed, each with the paper, table, model and metric.
Think-on-Graph (Sun et al., ICLR 2024, arXiv:2307.07697) reports "exact match accuracy (Hits@1)"
on all nine of its sets (Table 1, rows "ToG (Ours) w/ChatGPT" and "ToG (Ours) w/GPT-4"). Its
Hits@1 is the share of questions whose answer names a gold answer or one of its aliases: the
`hits@1` of `metrics.sog_metrics`, with `Question.aliases` (Search-on-Graph scores the same way).
On Creak's true/false claims the same figure is the accuracy.

Not listed (no figure read in the paper here): Search-on-Graph (2025), R2-KG (2025) and
KG-Reasoner (2025); see docs/evaluation/papers.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PaperFigure:
    benchmark: str  # a kg-mcp benchmark name
    paper: str
    table: str
    model: str
    metric: str  # the paper's name for it
    key: str  # the summary's key for our figure of the same metric
    value: float  # a share (0.676 for 67.6%)


_TOG = "Think-on-Graph (Sun et al., ICLR 2024)"
_TOG_TABLE = "Table 1"
_TOG_METRIC = "Hits@1 (exact match)"
# Table 1, in the paper's column order: CWQ, WebQSP, GrailQA, QALD10-en, Simple Questions,
# WebQuestions, T-REx, Zero-Shot RE, Creak.
_TOG_COLUMNS = ("cwq", "webqsp", "grailqa", "qald10-en", "simpleqa", "webquestions", "trex", "zsre", "creak")
_TOG_ROWS = {
    "ChatGPT (GPT-3.5-turbo)": (57.1, 76.2, 68.7, 50.2, 53.6, 54.5, 76.8, 88.0, 91.2),
    "GPT-4": (67.6, 82.6, 81.4, 53.8, 66.7, 57.9, 77.1, 88.3, 95.6),
}

FIGURES: tuple[PaperFigure, ...] = tuple(
    PaperFigure(benchmark, _TOG, _TOG_TABLE, f"ToG w/ {model}", _TOG_METRIC, "hits@1", round(value / 100, 4))
    for model, values in _TOG_ROWS.items()
    for benchmark, value in zip(_TOG_COLUMNS, values, strict=True)
)

def figures_for(benchmark: str | None) -> list[PaperFigure]:
    return [f for f in FIGURES if f.benchmark == benchmark]


def against_papers(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per published figure on the run's benchmark: the paper's and ours, same metric."""
    return [
        {
            "paper": f.paper, "table": f.table, "model": f.model, "metric": f.metric,
            "paper_value": f.value, "ours": summary.get(f.key),
        }
        for f in figures_for(summary.get("benchmark"))
    ]
