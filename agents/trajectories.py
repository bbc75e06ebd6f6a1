"""Traces of any driver as SFT records in KG-Reasoner's think/search/triples/answer form, with rewards.

`kg-mcp export-trajectories RUN_DIR` reads every trace under RUN_DIR (JSON-lines files whose
first event is `start`, as `kg_mcp.agents.trace` writes them) and writes one record per finished run:

    {"source", "method", "question", "topics", "prompt", "completion", "messages",
     "predicted", "abstained", "gold", "searches", "format_problems", "reward", "ranked_by"}

`prompt` is KG-Reasoner's flat prompt ending in `<think>`, `completion` what follows it up to
`</answer>`; `messages` holds the same as a chat (system, user, assistant); `ranked_by` names the rankers that
ordered the run's `kgr_search` results (the server's KG_MCP_RANKER: `lexical`, `embedding`, `gnn`). A KG-Reasoner trace
gives its completion as the model wrote it (with the triples the driver inserted). Another
driver's trace is rewritten into the form: each model reply's text becomes reasoning, each KG
tool call on an entity a `<search>` whose `<triples>` are its result (tool rows turned into
`(i) subject [id] | relation | object [id]` lines where the result has rows, its text
otherwise), and the final answers the `<answer>`. Topic lookups (`find_entities`) and other
tools are left out: they are the driver's, not the reasoning's.

The reward is `kg_mcp.agents.rewards.reward`. Gold answers come from `gold=`: the `results.jsonl` that
`kg-mcp eval` writes (rows with `question`, `answers` = predicted, `gold`), or any JSON / JSON
lines file of rows with `question` and `gold`, `answers` or `answer` (a MetaQA dev file works
as it is); by default RUN_DIR/results.jsonl when there is one. Questions are matched after
lower-casing and collapsing white space.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kg_mcp.agents.kg_reasoner import OPEN, prompt_for
from kg_mcp.agents.kgr_format import BACKTRACK, count_searches, format_problems
from kg_mcp.agents.rewards import Match, reward
from kg_mcp.agents.trace import read_trace

ENTITY_TOOLS = ("search", "get_relations", "explore_kg", "kgr_search")


def find_traces(run_dir: str | Path) -> list[Path]:
    """Trace files under `run_dir`, sorted; other JSON-lines files (results, records) are passed over."""
    found = []
    for path in sorted(Path(run_dir).rglob("*.jsonl")):
        try:
            with path.open(encoding="utf-8") as f:
                first = json.loads(f.readline() or "null")
        except (OSError, ValueError):
            continue
        if isinstance(first, dict) and first.get("type") == "start" and "question" in first:
            found.append(path)
    return found


def question_key(question: str) -> str:
    return " ".join(question.lower().split())


def load_gold(path: str | Path) -> dict[str, list[str]]:
    """{question key: gold answers} from a JSON list/object or a JSON-lines file."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text)
    except ValueError:  # JSON lines
        data = [json.loads(line) for line in text.splitlines() if line.strip()]
    if isinstance(data, dict):
        if "question" not in data:  # {question: answers}
            return {question_key(q): _answer_list(a) for q, a in data.items()}
        data = [data]
    rows = data if isinstance(data, list) else []
    gold: dict[str, list[str]] = {}
    for row in rows:
        if not isinstance(row, dict) or "question" not in row:
            continue
        for field in ("gold", "answers", "answer"):
            if row.get(field) is not None:
                gold[question_key(str(row["question"]))] = _answer_list(row[field])
                break
    return gold


def _answer_list(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("label") or item.get("value") or item.get("id")
        if item is not None and str(item).strip():
            out.append(str(item).strip())
    return out


def export(run_dir: str | Path, *, gold_path: str | Path | None = None, match: Match = "hit") -> Iterator[dict[str, Any]]:
    """One record per finished trace under `run_dir` (a trace without its `final` event is skipped)."""
    run_dir = Path(run_dir)
    if gold_path is None and (run_dir / "results.jsonl").is_file():
        gold_path = run_dir / "results.jsonl"
    gold = load_gold(gold_path) if gold_path else None
    for path in find_traces(run_dir):
        record = trajectory(read_trace(path), gold=gold, match=match)
        if record is not None:
            record["source"] = str(path)
            yield record


def trajectory(events: list[dict[str, Any]], *, gold: dict[str, list[str]] | None, match: Match = "hit") -> dict[str, Any] | None:
    """The SFT record of one run's events, or None if the run did not finish."""
    start = events[0] if events and events[0].get("type") == "start" else None
    final = next((e for e in reversed(events) if e.get("type") == "final"), None)
    if start is None or final is None:
        return None
    question = start["question"]
    extra = final.get("extra") or {}
    topics = {str(k): str(v) for k, v in (extra.get("topics") or {}).items() if v}
    predicted = [] if final.get("abstained") else [str(a) for a in final.get("answers") or []]
    if start.get("method") == "kgr" and str(final.get("reasoning", "")).startswith(OPEN):
        completion = final["reasoning"][len(OPEN) :]
        repaired = list(extra.get("format_errors") or [])
    else:
        completion = rewritten(events, predicted)
        repaired = []
    prompt = prompt_for(_profile(topics), question, topics, "")
    searches = count_searches(completion)
    gold_answers = None if gold is None else gold.get(question_key(question))
    score = reward(OPEN + completion, searches=searches, predicted=predicted, gold=gold_answers, repaired=repaired, match=match)
    return {
        "method": start.get("method"),
        "question": question,
        "topics": topics,
        "prompt": prompt.flat,
        "completion": completion,
        "messages": [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
            {"role": "assistant", "content": OPEN + completion},
        ],
        "predicted": predicted,
        "abstained": bool(final.get("abstained")),
        "gold": gold_answers,
        "searches": searches,
        "format_problems": format_problems(OPEN + completion) + repaired,
        "reward": score.to_dict(),
        "ranked_by": rankers_used(events),
    }


def rankers_used(events: list[dict[str, Any]]) -> list[str]:
    """The rankers named by the run's kgr_search results, in order of first use."""
    names = ((e.get("data") or {}).get("ranked_by") for e in events if e.get("type") == "tool_result" and e.get("tool") == "kgr_search")
    return list(dict.fromkeys(n for n in names if n))


def rewritten(events: list[dict[str, Any]], predicted: list[str]) -> str:
    """Another driver's run as a KG-Reasoner completion (after the opening <think>)."""
    parts: list[str] = []
    results = iter([e for e in events if e.get("type") == "tool_result"])
    for event in events:
        kind = event.get("type")
        if kind == "model_reply" and (event.get("text") or "").strip():
            parts.append(_plain(event["text"].strip()))
        elif kind == "tool_call":
            result = next(results, None)
            if event.get("tool") not in ENTITY_TOOLS:
                continue
            arguments = event.get("arguments") or {}
            target = BACKTRACK if arguments.get("backtrack") else str(arguments.get("entity", "")).strip()
            block = _triples_block(result) if result is not None else "(no result)"
            parts.append(f"<search>{target}</search>\n\n<triples>\n{block}\n</triples>")
    body = "\n\n".join(parts)
    return f"{body}\n</think>\n\n<answer>{'; '.join(predicted)}</answer>" if body else f"</think>\n\n<answer>{'; '.join(predicted)}</answer>"


def _plain(text: str) -> str:
    """Reasoning text with the protocol's own tags defused, so a reply cannot break the form."""
    for tag in ("think", "search", "triples", "answer"):
        text = text.replace(f"<{tag}>", f"<{tag} >").replace(f"</{tag}>", f"</{tag} >")
    return text


def _triples_block(result: dict[str, Any]) -> str:
    if result.get("is_error"):
        return f"Error: {result.get('text', '')}"
    lines = triple_lines(result.get("tool"), result.get("data") or {})
    return "\n".join(f"({i}) {line}" for i, line in enumerate(lines, 1)) if lines else _plain(result.get("text", ""))


def triple_lines(tool: str | None, data: dict[str, Any]) -> list[str]:
    """`subject | relation | object` lines from a tool's structured result; [] when it has no rows."""
    if tool == "kgr_search":
        return [f"{_name(t['subject'])} | {t['relation']} | {_name(t['object'])}" for t in data.get("triples", [])]
    entity = data.get("entity")
    if not entity:
        return []
    if tool == "search" and data.get("view") == "rows":
        incoming = data.get("direction") == "incoming"
        return [
            f"{_name(r['value'])} | {r['property']} | {_name(entity)}" if incoming else f"{_name(entity)} | {r['property']} | {_name(r['value'])}"
            for r in data.get("rows", [])
        ]
    if tool == "explore_kg":
        lines = []
        for rel in data.get("relations", []):
            name = rel["relation"]
            for n in rel.get("neighbours", []):
                if name.startswith("~"):
                    lines.append(f"{_name(n)} | {name[1:]} | {_name(entity)}")
                else:
                    lines.append(f"{_name(entity)} | {name} | {_name(n)}")
        return lines
    return []


def _name(term: dict[str, Any]) -> str:
    if term.get("kind", "iri") != "iri":
        return str(term.get("id", ""))
    return f"{term['label']} [{term['id']}]" if term.get("label") else str(term.get("id", ""))


def _profile(topics: dict[str, str]) -> str:
    ids = list(topics.values())
    if any(i.startswith("wd:") for i in ids):
        return "wikidata"
    if any(i.startswith(("m.", "g.")) for i in ids):
        return "freebase"
    return "generic"
