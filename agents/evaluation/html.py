"""The report page and one page per trace, from the templates in templates/ (jinja2, autoescaped).

A trace page replays one answer step by step: the question, each model request (the messages new
since the previous request, the whole prompt folded away), each reply with its tool calls, each
tool call with the output the model read, the driver's rule firings, and the final answer.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from kg_mcp.agents.evaluation.papers import kg_words
from kg_mcp.agents.evaluation.plots import all_plots
from kg_mcp.agents.evaluation.rundir import trace_name
from kg_mcp.agents.evaluation.summary import ROWS, RunData, fmt
from kg_mcp.agents.trace import read_trace

TEMPLATES = Path(__file__).parent / "templates"
LONG_LINES = 25  # tool outputs longer than this are folded


def _environment() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["j2", "html"]))
    env.filters["fmt"] = fmt
    env.filters["kg_words"] = kg_words
    env.filters["as_json"] = lambda value: json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return env


def trace_steps(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Trace events as the steps of a page: kind, title, and what to show."""
    steps: list[dict[str, Any]] = []
    seen: dict[tuple[Any, str], int] = {}  # messages already shown, per (run, role)
    for event in events:
        kind, run = event.get("type"), event.get("run")
        tag = f"run {run} · " if run is not None else ""
        if kind == "start":
            steps.append({"kind": "start", "title": f"Question ({event.get('method')})", "text": event.get("question", "")})
        elif kind == "model_request":
            messages = event.get("messages") or []
            key = (run, event.get("role", "model"))
            new = messages[seen.get(key, 0) :] if seen.get(key, 0) <= len(messages) else messages
            seen[key] = len(messages)
            steps.append({
                "kind": "request", "title": f"{tag}{event.get('role', 'model')} asked ({event.get('model')})",
                "new": [m for m in new if m.get("role") != "assistant"], "all": messages, "tools": event.get("tools") or [],
            })
        elif kind == "model_reply":
            usage = event.get("usage") or {}
            steps.append({
                "kind": "reply", "title": f"{tag}{event.get('role', 'model')} replied",
                "text": event.get("text") or "", "calls": event.get("tool_calls") or [],
                "meta": f"{usage.get('input_tokens', 0):,} tokens in, {usage.get('output_tokens', 0):,} out, {event.get('seconds', 0)} s",
            })
        elif kind == "tool_call":
            steps.append({"kind": "tool", "title": f"{tag}{event.get('tool')}", "arguments": event.get("arguments"), "result": None})
        elif kind == "tool_result":
            text = event.get("text") or ""
            target = next((s for s in reversed(steps) if s["kind"] == "tool" and s["result"] is None), None)
            result = {"text": text, "error": event.get("is_error"), "long": text.count("\n") > LONG_LINES, "seconds": event.get("seconds")}
            if target is None:
                steps.append({"kind": "tool", "title": f"{tag}{event.get('tool')}", "arguments": None, "result": result})
            else:
                target["result"] = result
        elif kind == "note":
            data = {k: v for k, v in event.items() if k not in ("t", "type", "what", "run")}
            steps.append({"kind": "note", "title": f"{tag}rule: {event.get('what')}", "data": data})
        elif kind == "final":
            steps.append({
                "kind": "final", "title": "Abstained" if event.get("abstained") else "Final answer",
                "answers": event.get("answers") or [], "path": event.get("path") or [],
                "reasoning": event.get("reasoning") or "", "turns": event.get("turns"), "seconds": event.get("seconds"),
            })
    return steps


def write_trace_page(trace_file: Path, record: dict[str, Any] | None = None) -> Path:
    """TRACE.html beside TRACE.jsonl."""
    events = read_trace(trace_file) if trace_file.is_file() else []
    page = _environment().get_template("trace.html.j2").render(
        title=(record or {}).get("question") or trace_file.stem, record=record or {}, steps=trace_steps(events),
        source=trace_file.name,
    )
    out = trace_file.with_suffix(".html")
    out.write_text(page, encoding="utf-8")
    return out


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def write_report(
    runs: list[RunData], summaries: list[dict[str, Any]], html_path: Path, *, max_questions: int = 300
) -> tuple[Path, dict[str, bytes]]:
    """The report page (plots inline) and a page per listed trace; returns (page, the plots' PNGs)."""
    html_path.parent.mkdir(parents=True, exist_ok=True)
    plots = all_plots(summaries)
    sections = []
    for index, (run, summary) in enumerate(zip(runs, summaries), 1):
        rows = []
        for record in run.records[:max_questions]:
            trace_file = run.path / "traces" / f"{trace_name(record['question_id'], int(record.get('repeat', 0)))}.jsonl"
            link = None
            if trace_file.is_file():
                link = os.path.relpath(write_trace_page(trace_file, record), html_path.parent)
            rows.append({"record": record, "link": link})
        sections.append({"index": index, "run": run, "summary": summary, "rows": rows, "shown": len(rows)})
    metric_rows = [
        (title, [fmt(s.get(key), kind) for s in summaries])
        for key, title, kind in ROWS
        if any(s.get(key) is not None for s in summaries)
    ]
    hops = sorted({h for s in summaries for h in s["by_hops"]}, key=lambda h: (h is None, h or 0))
    page = _environment().get_template("report.html.j2").render(
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        summaries=summaries,
        metric_rows=metric_rows,
        hops=hops,
        plots={name: _data_uri(png) for name, png in plots.items()},
        sections=sections,
        unpriced=sorted({m for s in summaries for m in s["unpriced"]}),
    )
    html_path.write_text(page, encoding="utf-8")
    return html_path, plots
