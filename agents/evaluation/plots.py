"""The report's charts as PNG bytes: accuracy against tokens, accuracy per hop count, abstention.

matplotlib's object API only (no pyplot, no display): safe in a headless process.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure

_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
    return buffer.getvalue()


def _tokens(s: dict[str, Any]) -> float:
    return (s.get("tokens_in") or 0) + (s.get("tokens_out") or 0)


def accuracy_vs_tokens(summaries: list[dict[str, Any]]) -> bytes:
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    for i, s in enumerate(summaries):
        accuracy = s.get("hits@1")
        if accuracy is None:
            continue
        ax.scatter([_tokens(s)], [accuracy * 100], s=80, color=_COLOURS[i % len(_COLOURS)], label=f"[{i + 1}] {s['label']}")
        ax.annotate(f"[{i + 1}]", (_tokens(s), accuracy * 100), textcoords="offset points", xytext=(6, 6))
    ax.set_xlabel("tokens per answer (input + output)")
    ax.set_ylabel("Hits@1 (%)")
    ax.set_ylim(-5, 105)
    most = max((_tokens(s) for s in summaries), default=0)
    ax.set_xlim(0, most * 1.25 if most else 1)
    ax.grid(alpha=0.3)
    ax.set_title("Accuracy against tokens")
    if summaries:
        ax.legend(fontsize=7, loc="lower right")
    return _png(fig)


def per_hop(summaries: list[dict[str, Any]]) -> bytes:
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    hops = sorted({h for s in summaries for h in s["by_hops"] if h is not None})
    width = 0.8 / max(1, len(summaries))
    for i, s in enumerate(summaries):
        values = [((s["by_hops"].get(h) or {}).get("hits@1") or 0) * 100 for h in hops]
        positions = [j + i * width for j in range(len(hops))]
        ax.bar(positions, values, width=width, color=_COLOURS[i % len(_COLOURS)], label=f"[{i + 1}]")
    ax.set_xticks([j + width * (len(summaries) - 1) / 2 for j in range(len(hops))], [f"{h} hop" + ("s" if h != 1 else "") for h in hops])
    ax.set_ylabel("Hits@1 (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy per number of hops" if hops else "Accuracy per number of hops (no hop counts)")
    ax.grid(axis="y", alpha=0.3)
    if summaries:
        ax.legend(fontsize=8)
    return _png(fig)


def abstention(summaries: list[dict[str, Any]]) -> bytes:
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    names = [f"[{i + 1}]" for i in range(len(summaries))]
    abstained = [(1 - (s.get("coverage") or 0)) * 100 if s.get("answers") else 0 for s in summaries]
    failed = [100 * s["errors"] / max(1, s["answers"] + s["errors"]) for s in summaries]
    ax.bar(names, abstained, color="#9467bd", label="abstained")
    ax.bar(names, failed, bottom=abstained, color="#d62728", label="failed (retried on resume)")
    ax.set_ylabel("share of answers (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Abstention")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    return _png(fig)


def all_plots(summaries: list[dict[str, Any]]) -> dict[str, bytes]:
    return {
        "accuracy-vs-tokens": accuracy_vs_tokens(summaries),
        "per-hop": per_hop(summaries),
        "abstention": abstention(summaries),
    }
