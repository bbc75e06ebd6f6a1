"""Tool recall without a model: walk each question's gold path through the real tools, as a perfect
Search-on-Graph model would, and see whether the gold answers reach the text the model reads.

Per question: the topic entity's id comes from `find_entities` (the driver does this too and does
not show it to the model). Then, per relation of the gold path, one filtered `search` per
frontier entity (`~rel` searches incoming edges), through an MCP client of a server with the
default settings: k = 50, p = 1000 rows, 200 characters a cell, 20,000 a page. A listing longer
than a page is read on with the cursor each page gives (kg_client.read_pages), as a model that
reads its last line would, up to MAX_PAGES pages a call; each page counts as a call. The next
frontier is the entities in the *text* of those pages, so rows cut from the text (or on pages
past the bound) are lost, as they would be to a model. A question counts as recalled when every
gold answer is a cell of the last hop's output tables (cells and answers compared after
`matching.normalise`). Tokens are those of every page the walk read (o200k_base), what the model
would be charged to read.

Beside recall, the answer a model would give: the entities of the last hop's tables, each
matching a gold answer when its id or label does. `exact` when they are the gold set (every gold
answer there, nothing else), `precision` the share of them that are gold. A benchmark's
convention on the topic entity decides what comes back through it: MetaQA's gold sets leave out
the topic and what is reached only back through it (`Benchmark.revisit_topic` False), so the
walk drops the topic from every frontier and from the answer; PathQuestion's paths may come
back through it, so nothing is dropped there.

Modes (`--mode`): `sog` is the walk above, one entity per call; `batched` makes one `search`
call per hop with the whole frontier in `entities` (chunks of MAX_BATCH); `follow` makes one
`follow` call with the whole gold path and reads the answer from its table, with the tool's
default (paths back through the start left out) or, where the benchmark's paths may revisit the
topic, exclude_through="none".

Benchmarks that give a gold query (CWQ, GrailQA, QALD-10-en) or a gold relation (SimpleQuestions)
instead of a path are walked by gold_query_oracle, in the same modes, with the same rows; the
questions it cannot walk are counted and named per reason in the summary (`not_walkable`).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

from kg_mcp.agents.evaluation.benchmarks import Benchmark, Question
from kg_mcp.agents.evaluation.matching import normalise
from kg_mcp.agents.evaluation.tokens import count_tokens, tokenizer_name
from kg_mcp.agents.kg_client import MAX_PAGES, KGClient

CUT_MARKERS = ("(cut)", "[Output cut at", "showing", "Stopped at hop")
MODES = ("sog", "batched", "follow")
MAX_BATCH = 200  # entities in one batched search (the tool's own cap)
MAX_EXTRA = 10  # answer entities that are not gold, kept per row to read the misses


@dataclass
class OracleRow:
    question_id: str
    hops: int | None
    recalled: bool
    missing: list[str]  # gold answers not in the last hop's outputs
    exact: bool  # the answer entities are the gold set
    precision: float  # share of the answer entities that are gold (0 when there are none)
    answers: int  # answer entities in the last hop's outputs
    extra: list[str]  # up to MAX_EXTRA of them that are not gold (their ids)
    calls: int
    tokens: int
    chars: int
    cut: bool  # some output was cut (p rows or the character cap)
    topic_found: bool


def named_cells(text: str) -> list[dict[str, str]]:
    """The body rows of the markdown tables in a tool output, each as {column name: cell}.

    >>> named_cells("head\\n| entity | label |\\n|---|---|\\n| kg:A | x \\\\| y |\\nfoot")
    [{'entity': 'kg:A', 'label': 'x | y'}]
    """
    lines = text.splitlines()
    rows, header = [], None
    for number, line in enumerate(lines):
        if line.startswith("|---"):
            continue
        if not (line.startswith("| ") and line.endswith(" |")):
            header = None
            continue
        if number + 1 < len(lines) and lines[number + 1].startswith("|---"):
            header = _split_row(line[2:-2])
            continue
        if header:
            rows.append(dict(zip(header, _split_row(line[2:-2]))))
    return rows


def _split_row(body: str) -> list[str]:
    cells, current, i = [], [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            # a cell writes a line break of its value as \n (and doubles the value's own backslashes)
            current.append("\n" if body[i + 1] == "n" else body[i + 1])
            i += 2
        elif body.startswith(" | ", i):
            cells.append("".join(current))
            current = []
            i += 3
        else:
            current.append(body[i])
            i += 1
    cells.append("".join(current))
    return cells


def score(answers: dict[str, set[str]], gold: tuple[str, ...] | list[str]) -> tuple[list[str], bool, float, list[str]]:
    """(missing gold answers, exact, precision, up to MAX_EXTRA answers that are not gold) of the
    answer entities `answers` ({id: its normalised id and label}) against the gold answers.

    >>> score({"kg:A": {"kg a", "a"}, "kg:B": {"kg b", "b"}}, ["A", "C"])
    (['C'], False, 0.5, ['kg:B'])
    >>> score({"kg:A": {"kg a", "a"}}, ["A"])
    ([], True, 1.0, [])
    """
    names = {normalise(a) for a in gold}
    hits = [text for text, forms in answers.items() if forms & names]
    seen = set().union(*answers.values()) if answers else set()
    missing = [a for a in gold if normalise(a) not in seen]
    extra = [text for text, forms in answers.items() if not forms & names][:MAX_EXTRA]
    precision = len(hits) / len(answers) if answers else 0.0
    return missing, not missing and len(hits) == len(answers), precision, extra


def answer_entities(texts: list[str], entity_column: str, label_column: str, drop: str | None = None) -> dict[str, set[str]]:
    """The entities of the tables in `texts` (all but `drop`), each as {its id: its normalised id and label}."""
    answers: dict[str, set[str]] = {}
    for text in texts:
        for row in named_cells(text):
            entity, label = row.get(entity_column, ""), row.get(label_column, "")
            if entity and entity != drop:
                answers.setdefault(entity, set()).update(normalise(c) for c in (entity, label) if c)
    return answers


def _row(question: Question, answers: dict[str, set[str]], calls: int, tokens: int, chars: int, cut: bool) -> OracleRow:
    missing, exact, precision, extra = score(answers, question.answers)
    return OracleRow(question.id, question.hops, not missing, missing, exact, precision, len(answers), extra,
                     calls, tokens, chars, cut, True)


def _no_topic(question: Question) -> OracleRow:
    return OracleRow(question.id, question.hops, False, list(question.answers), False, 0.0, 0, [], 0, 0, 0, False, False)


@dataclass
class Read:
    """One call read to its last page, as a model reading each page's last line would."""

    pages: list[str]  # the pages' texts (up to a page that failed)
    is_error: bool  # the call failed at its first page
    unread: bool  # rows left unread: a next page past the oracle's bound on pages, or one that failed
    failed: str = ""  # the error of a later page: read by the model, but no rows

    @property
    def text(self) -> str:
        return "\n".join(self.pages)

    @property
    def tokens(self) -> int:
        return sum(count_tokens(page) for page in [*self.pages, self.failed])

    @property
    def chars(self) -> int:
        return sum(len(page) for page in [*self.pages, self.failed])

    @property
    def cut(self) -> bool:
        """Rows the model did not get: a page left unread, or a page that cut its own rows."""
        return self.unread or any(marker in page for page in self.pages for marker in CUT_MARKERS)


class _Calls:
    """The walk's tool calls, each read to its last page (at most `max_pages`) and made once per run
    (the tools are read-only and deterministic). A later page that fails (a cursor gone stale) ends
    the read there: the pages before it count, as a model has them, and the call counts as cut
    (ARK's rule too)."""

    def __init__(self, kg: KGClient, max_pages: int = MAX_PAGES):
        self.kg, self.max_pages = kg, max_pages
        self.cache: dict[tuple[str, str], Read] = {}

    async def call(self, tool: str, arguments: dict) -> Read:
        key = (tool, json.dumps(arguments, sort_keys=True))
        if key not in self.cache:
            pages = await self.kg.call_pages(tool, arguments, max_pages=self.max_pages)
            failed_at = next((i for i, page in enumerate(pages) if page.is_error), None)
            if failed_at == 0:
                self.cache[key] = Read([pages[0].text], True, False)
            else:
                kept = pages if failed_at is None else pages[:failed_at]
                failed = "" if failed_at is None else pages[failed_at].text
                unread = failed_at is not None or bool((kept[-1].data or {}).get("next_cursor"))
                self.cache[key] = Read([page.text for page in kept], False, unread, failed)
        return self.cache[key]


async def topic_id(kg: KGClient, question: Question) -> str | None:
    name, entity = next(iter(question.topics.items()))
    if entity:
        return entity
    result = await kg.call_tool("find_entities", {"name": name, "limit": 1})
    hits = (result.data or {}).get("entities") or []
    return hits[0]["id"] if hits and not result.is_error else None


@dataclass
class PathWalk:
    """What one walk along a chain of relations showed: the last hop's outputs and what it cost."""

    last: list[str]
    calls: int = 0
    tokens: int = 0
    chars: int = 0
    cut: bool = False


def _count(walked: PathWalk, read: Read) -> None:
    """Add a call's pages to what the walk cost."""
    walked.calls += len(read.pages)
    walked.tokens += read.tokens
    walked.chars += read.chars
    walked.cut = walked.cut or read.cut


async def walk_path(calls: _Calls, start: str, path: tuple[str, ...] | list[str], drop: str | None, batch: int = 1) -> PathWalk:
    """`path` hop by hop from `start`: one search per frontier entity (or per `batch` of them); the
    next frontier is the entities in the text of the outputs, less `drop`."""
    frontier, walked = {start}, PathWalk([])
    for relation in path:
        direction = "incoming" if relation.startswith("~") else "outgoing"
        ordered, reached, walked.last = sorted(frontier), set(), []
        for i in range(0, len(ordered), batch):
            chunk = ordered[i : i + batch]
            where = {"entity": chunk[0]} if len(chunk) == 1 else {"entities": chunk}
            read = await calls.call(
                "search", {**where, "direction": direction, "properties_to_filter_for": [relation.lstrip("~")]}
            )
            _count(walked, read)
            walked.last.append(read.text)
            if not read.is_error:
                reached |= {row["value"] for row in named_cells(read.text) if row.get("value")}
        frontier = reached - {drop}
    return walked


async def walk(calls: _Calls, question: Question, revisit_topic: bool, batch: int = 1) -> OracleRow:
    """The gold path hop by hop: one search per frontier entity (sog), or per `batch` of them."""
    topic = await topic_id(calls.kg, question)
    if topic is None:
        return _no_topic(question)
    drop = None if revisit_topic else topic
    walked = await walk_path(calls, topic, question.gold_path or (), drop, batch)
    answers = answer_entities(walked.last, "value", "valueLabel", drop)
    return _row(question, answers, walked.calls, walked.tokens, walked.chars, walked.cut)


async def walk_follow(calls: _Calls, question: Question, revisit_topic: bool) -> OracleRow:
    """One follow call along the whole gold path."""
    topic = await topic_id(calls.kg, question)
    if topic is None:
        return _no_topic(question)
    arguments = {"entity": topic, "path": list(question.gold_path or ())}
    if revisit_topic:
        arguments["exclude_through"] = "none"
    read = await calls.call("follow", arguments)
    answers = {} if read.is_error else answer_entities([read.text], "entity", "label")
    return _row(question, answers, len(read.pages), read.tokens, read.chars, read.cut)


WALKS = {"sog": walk, "batched": partial(walk, batch=MAX_BATCH), "follow": walk_follow}


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) if ordered else 0.0


def summarise(benchmark: Benchmark, rows: list[OracleRow], seconds: float) -> dict[str, Any]:
    n = len(rows)
    tokens = [r.tokens for r in rows]
    return {
        "benchmark": benchmark.name,
        "questions": n,
        "of": len(benchmark.questions),
        "recall": sum(r.recalled for r in rows) / n if n else None,
        "exact": sum(r.exact for r in rows) / n if n else None,
        "precision": statistics.fmean(r.precision for r in rows) if n else None,
        "tokens_mean": statistics.fmean(tokens) if n else None,
        "tokens_median": statistics.median(tokens) if n else None,
        "tokens_p90": _percentile(tokens, 0.9),
        "tokens_max": max(tokens, default=0),
        "calls_mean": statistics.fmean(r.calls for r in rows) if n else None,
        "cut_share": sum(r.cut for r in rows) / n if n else None,
        "topic_missing": sum(not r.topic_found for r in rows),
        "calls_max": max((r.calls for r in rows), default=0),
        "tokenizer": tokenizer_name(),
        "seconds": round(seconds, 1),
    }


async def run_oracle(
    benchmark: Benchmark, questions: list[Question], kg: KGClient, *, progress: bool = True, mode: str = "sog",
    max_pages: int = MAX_PAGES,
) -> tuple[dict[str, Any], list[OracleRow]]:
    """Walk every question's gold path over an open client, reading at most `max_pages` pages of a
    call; (summary, one row per question)."""
    from tqdm import tqdm

    from kg_mcp.agents.evaluation.gold_query_oracle import has_gold_query, walk_gold_query

    missing = [q.id for q in questions if not q.gold_path and not has_gold_query(q)]
    if missing:
        raise ValueError(
            f"{benchmark.name} has questions without gold paths or gold queries (e.g. {missing[0]}): no oracle for it"
        )
    started = time.perf_counter()
    calls = _Calls(kg, max_pages)
    rows, not_walkable = [], {}
    for question in tqdm(questions, desc=f"oracle {benchmark.name}", unit="q", file=sys.stderr, disable=not progress):
        if question.gold_path:
            rows.append(await WALKS[mode](calls, question, benchmark.revisit_topic))
            continue
        row, reason = await walk_gold_query(calls, question, mode, benchmark.endpoint or "freebase")
        if row is None:
            not_walkable.setdefault(reason, []).append(question.id)
        else:
            rows.append(row)
    summary = summarise(benchmark, rows, time.perf_counter() - started)
    if any(not q.gold_path for q in questions):
        summary["asked"] = len(questions)
        summary["walkable"] = len(rows)
        summary["not_walkable"] = {reason: sorted(ids) for reason, ids in sorted(not_walkable.items())}
    return {"mode": mode, **summary}, rows


def format_summary(summaries: list[dict[str, Any]]) -> str:
    """The terminal table of one or more oracle summaries."""
    head = ("benchmark", "mode", "questions", "recall", "exact", "precision", "tokens/q mean", "median", "p90", "max", "calls/q", "cut")
    lines = [head]
    for s in summaries:
        share = [f"{s[k]:.2%}" if s.get(k) is not None else "-" for k in ("recall", "exact", "precision")]
        lines.append((
            s["benchmark"], s.get("mode", "sog"), f"{s['questions']:,} of {s['of']:,}", *share,
            f"{s['tokens_mean']:,.0f}", f"{s['tokens_median']:,.0f}", f"{s['tokens_p90']:,.0f}", f"{s['tokens_max']:,}",
            f"{s['calls_mean']:.1f}", f"{s['cut_share']:.1%}",
        ))
    widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in lines]
    tokenizer = summaries[0]["tokenizer"] if summaries else tokenizer_name()
    for s in summaries:
        if "not_walkable" in s:
            out.append(not_walkable_lines(s))
    out.append("exact: the answer entities are the gold set; precision: the share of them that are gold (mean over questions)")
    out.append(f"tokens: {tokenizer}; cut: share of questions with an output cut (rows, characters, a limit or a follow hop)")
    return "\n".join(out)


def not_walkable_lines(summary: dict[str, Any], shown: int = 3) -> str:
    """How many questions of a gold-query benchmark were walked, and each reason the others were not
    (its count and the first question ids)."""
    from kg_mcp.agents.evaluation.gold_query_walk import reason_text

    asked, walkable = summary["asked"], summary["walkable"]
    share = f" ({walkable / asked:.1%})" if asked else ""
    lines = [f"{summary['benchmark']}: {walkable:,} of {asked:,} questions walkable{share}; not walked:"]
    for reason, ids in summary["not_walkable"].items():
        more = ", ..." if len(ids) > shown else ""
        lines.append(f"  {reason} ({reason_text(reason)}): {len(ids):,}, e.g. {', '.join(ids[:shown])}{more}")
    if not summary["not_walkable"]:
        lines.append("  none")
    return "\n".join(lines)


def row_dict(row: OracleRow) -> dict[str, Any]:
    return asdict(row)
