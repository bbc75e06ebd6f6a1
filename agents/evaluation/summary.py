"""A run folder's numbers: every paper's metrics, tokens, cost, turns and latency; runs side by side.

Metrics are recomputed from the recorded answers and gold answers (so a change in matching
applies to old runs too). Strict self-consistency and reliability need repeats (`--repeat` > 1).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg_mcp.agents.evaluation.metrics import (
    Answer,
    Score,
    ark_metrics,
    by_hops,
    consistent,
    r2kg_metrics,
    reliability,
    score,
    sog_metrics,
)
from kg_mcp.agents.evaluation.papers import against_papers
from kg_mcp.agents.evaluation.prices import price_of
from kg_mcp.agents.evaluation.rundir import RunDir


@dataclass
class RunData:
    path: Path
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    errors: list[dict[str, Any]]

    @property
    def label(self) -> str:
        m = self.manifest
        who = m.get("model", "?") + (f" + {m['supervisor']}" if m.get("supervisor") else "")
        return f"{m.get('agent', '?')} · {who} · {m.get('benchmark', '?')}"


def load_run(path: str | Path) -> RunData:
    folder = RunDir(path)
    return RunData(folder.path, folder.manifest(), folder.records(), folder.errors())


def rescore(record: dict[str, Any]) -> Score:
    return score(
        record["question_id"],
        record.get("answers") or [],
        record.get("gold") or [],
        abstained=bool(record.get("abstained")),
        kind=record.get("kind", "entities"),
        verdict=record.get("verdict"),
        labels=record.get("gold_labels") or {},
        repeat=int(record.get("repeat", 0)),
        hops=record.get("hops"),
        aliases=record.get("gold_aliases") or (),
    )


def _consistent_scores(records: list[dict[str, Any]]) -> list[Score]:
    answers = [
        Answer(r["question_id"], tuple(r.get("answers") or []), bool(r.get("abstained")), r.get("verdict"), r.get("kind", "entities"))
        for r in records
    ]
    first = {}
    for r in records:
        first.setdefault(r["question_id"], r)
    out = []
    for qid, agreed in consistent(answers).items():
        base = first[qid]
        out.append(rescore({**base, "answers": list(agreed.answers), "abstained": agreed.abstained, "verdict": agreed.verdict, "repeat": 0}))
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def summarise(run: RunData) -> dict[str, Any]:
    records = run.records
    scores = [rescore(r) for r in records]
    repeats = {int(r.get("repeat", 0)) for r in records}
    questions = {r["question_id"] for r in records}
    n = len(records)
    costs = [r.get("cost_usd") for r in records]
    priced = n > 0 and all(c is not None for c in costs)
    out: dict[str, Any] = {
        "label": run.label,
        "path": str(run.path),
        "benchmark": run.manifest.get("benchmark"),
        "agent": run.manifest.get("agent"),
        "model": run.manifest.get("model"),
        "supervisor": run.manifest.get("supervisor"),
        "kg": run.manifest.get("kg_stats"),
        "kg_described": run.manifest.get("kg"),
        "questions": len(questions),
        "answers": n,
        "repeats": len(repeats),
        "errors": len(run.errors),
        **sog_metrics(scores),
        **r2kg_metrics(scores),
        **ark_metrics(scores),
        "reliability": reliability(scores),
        "tokens_in": _mean(r.get("tokens_in") for r in records),
        "tokens_out": _mean(r.get("tokens_out") for r in records),
        "cost_usd": _mean(costs) if priced else None,
        "turns": _mean(r.get("turns") for r in records),
        "seconds": _mean(r.get("seconds") for r in records),
        "seconds_p50": statistics.median([r["seconds"] for r in records]) if n else None,
        "by_hops": by_hops(scores),
        "unpriced": sorted({m for m in (run.manifest.get("model"), run.manifest.get("supervisor")) if m and price_of(m) is None}),
    }
    if records and all(r.get("kind") == "yes_no" for r in records):
        out["accuracy"] = out["hits@1"]  # a true/false claim's Hits@1 is its accuracy (Creak)
    resolved = Counter(r["topic_resolution"] for r in records if r.get("topic_resolution"))
    out["topic_resolution"] = dict(resolved)
    if len(repeats) > 1:
        sc = r2kg_metrics(_consistent_scores(records))
        out.update({f"sc_{k}": v for k, v in sc.items()})
    out["papers"] = against_papers(out)
    return out


# (key, row title, format) of the terminal and HTML tables, in order
ROWS: list[tuple[str, str, str]] = [
    ("questions", "questions", "int"),
    ("answers", "answers (questions x repeats)", "int"),
    ("errors", "failed runs (retried on resume)", "int"),
    ("hits@1", "SoG Hits@1", "pct"),
    ("exact_match", "SoG exact match", "pct"),
    ("accuracy", "accuracy (true/false claims)", "pct"),
    ("coverage", "R2-KG coverage", "pct"),
    ("hit_rate", "R2-KG hit rate (answered)", "pct"),
    ("micro_f1", "R2-KG micro-F1 (answered)", "pct"),
    ("sample_f1", "R2-KG sample-wise F1 (answered)", "pct"),
    ("sc_coverage", "self-consistent coverage", "pct"),
    ("sc_hit_rate", "self-consistent hit rate", "pct"),
    ("sc_micro_f1", "self-consistent micro-F1", "pct"),
    ("answer_rate", "ARK-V1 answer rate", "pct"),
    ("conditional_accuracy", "ARK-V1 conditional accuracy", "pct"),
    ("overall_accuracy", "ARK-V1 overall accuracy", "pct"),
    ("reliability", "ARK-V1 reliability (1-H/log2 3)", "num"),
    ("tokens_in", "input tokens / answer", "int"),
    ("tokens_out", "output tokens / answer", "int"),
    ("cost_usd", "cost / answer (USD)", "usd"),
    ("turns", "model turns / answer", "num1"),
    ("seconds", "latency / answer, mean (s)", "num1"),
    ("seconds_p50", "latency / answer, median (s)", "num1"),
]


def fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "pct":
        return f"{value:.1%}"
    if kind == "int":
        return f"{value:,.0f}"
    if kind == "usd":
        return f"{value:.4f}"
    if kind == "num1":
        return f"{value:.1f}"
    return f"{value:.3f}"


def paper_lines(summary: dict[str, Any]) -> list[str]:
    """The published figures on the run's benchmark beside the run's own, one line each, each with
    both KGs, both question counts and whether they compare."""
    return [
        f"{p['paper']}, {p['table']}, {p['model']}: {p['metric']} {fmt(p['paper_value'], 'pct')} "
        f"on {p['paper_kg']}, {p['paper_questions']:,} questions; this run {fmt(p['ours'], 'pct')} on "
        f"{p['run_kg']}, {p['run_questions']:,} questions: {p['comparable']} ({p['why']})"
        for p in summary.get("papers") or []
    ]


def table(summaries: list[dict[str, Any]]) -> str:
    """Runs side by side: one column per run, one row per metric (rows no run has are left out)."""
    rows = [("", *[f"[{i + 1}]" for i in range(len(summaries))])]
    for key, title, kind in ROWS:
        values = [s.get(key) for s in summaries]
        if all(v is None for v in values):
            continue
        rows.append((title, *[fmt(v, kind) for v in values]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines += [f"[{i + 1}] {s['label']}  ({s['path']})" for i, s in enumerate(summaries)]
    for i, s in enumerate(summaries):
        lines += [f"[{i + 1}] against {line}" for line in paper_lines(s)]
        if s.get("topic_resolution"):
            found = ", ".join(f"{n} by {how}" for how, n in sorted(s["topic_resolution"].items()))
            lines.append(f"[{i + 1}] topics from Freebase keys: {found}")
    unpriced = sorted({m for s in summaries for m in s["unpriced"]})
    if unpriced:
        lines.append(f"cost: no price known for {', '.join(unpriced)}: tokens only (prices in agents/evaluation/prices.py)")
    return "\n".join(lines)
