"""`kg-mcp eval`: a benchmark's questions through one driver and model, concurrently and resumably.

Each (question, repeat) is answered by its own driver run with its own trace; the result is
scored and appended to results.jsonl the moment it finishes, with token usage and cost. A run
started again with the same settings in the same folder skips every (question, repeat) already
there. A run that raises (the model provider failed after its retries, the KG server went away)
goes to errors.jsonl and is retried on the next start; the others carry on, unless the first
`GIVE_UP_AFTER` runs of a start all fail (a wrong key, a provider or KG that cannot be reached):
then the start stops there.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kg_mcp.agents.ask import ask
from kg_mcp.agents.evaluation.benchmarks import Benchmark, Question
from kg_mcp.agents.evaluation.matching import canonical_id
from kg_mcp.agents.evaluation.metrics import score
from kg_mcp.agents.evaluation.prices import AS_OF, run_cost
from kg_mcp.agents.evaluation.rundir import RunDir
from kg_mcp.agents.evaluation.stores import KGTarget
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models import Model, Sampling
from kg_mcp.agents.run import AgentResult
from kg_mcp.agents.trace import Trace

log = logging.getLogger(__name__)

MAX_GOLD_LABELS = 50  # gold ids whose labels are looked up per question
GIVE_UP_AFTER = 5  # failures in a row, with no success yet in this start: the model or KG is unreachable
VERDICTS = ("True", "False", "None")


@dataclass
class EvalPlan:
    benchmark: Benchmark
    questions: list[Question]
    agent: str
    model: str
    out: Path
    kg: KGTarget
    supervisor: str | None = None
    base_url: str | None = None
    repeat: int = 1
    concurrency: int = 1
    agent_limit: int | None = None  # the method's own cap (SoG turns, ARK-V1 steps, R2-KG iterations)
    tools: str = "paper"  # SoG's and R2-KG's tool mode: paper, batched or follow
    schema: bool = False  # the server's KG summary appended to the system prompt (--schema)
    sampling: Sampling | None = None
    selection: dict[str, Any] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        from kg_mcp import __version__

        return {
            "benchmark": self.benchmark.name,
            "agent": self.agent,
            "tools": self.tools,
            "schema": self.schema,
            "model": self.model,
            "supervisor": self.supervisor,
            "base_url": self.base_url,
            "questions_file": str(self.benchmark.source),
            "citation": self.benchmark.citation,
            "selection": self.selection,
            "repeat": self.repeat,
            "agent_limit": self.agent_limit,
            "sampling": asdict(self.sampling) if self.sampling else None,
            "kg": self.kg.describe(),
            "prices_as_of": AS_OF,
            "kg_mcp_version": __version__,
            "started": datetime.now(UTC).isoformat(timespec="seconds"),
        }

    def role_models(self) -> dict[str, str | None]:
        return {"model": self.model, "operator": self.model, "supervisor": self.supervisor or self.model}


@dataclass
class EvalStats:
    total: int  # (question, repeat) pairs asked for
    skipped: int  # already done before this start
    done: int  # finished in this start
    failed: int  # raised in this start (in errors.jsonl)
    seconds: float
    gave_up: bool = False  # stopped after GIVE_UP_AFTER failures and no success


async def kg_stats(target: KGTarget) -> dict[str, Any] | None:
    """The KG's kind, size and profile as its server reports them (kg://stats), for the comparison
    with the papers' figures; None from a server that cannot say (it is then shown as unverified)."""
    try:
        async with target.client() as kg:
            stats = await kg.stats()
    except Exception as e:  # noqa: BLE001 - a server without kg://stats still runs the questions
        log.warning("the KG's size could not be read (%s): paper figures will be shown as unverified", e)
        return None
    keep = ("kind", "profile", "triples", "lower_bounds", "location", "endpoint", "counts", "graphs")
    return {k: stats[k] for k in keep if k in stats}


async def answer(plan: EvalPlan, kg: KGClient, question: Question, model: Model, supervisor: Model | None, trace: Trace) -> AgentResult:
    """One driver run. ARK-V1 is told when a question is yes/no (CoLoTa's claims do not read as questions)."""
    try:
        if plan.agent == "ark" and question.kind == "yes_no":
            from kg_mcp.agents.ark import run_ark

            caps = {"k_max": plan.agent_limit} if plan.agent_limit else {}
            return await run_ark(
                question.text, kg, model, topics=question.topics, yes_no=True, sampling=plan.sampling, trace=trace,
                schema=plan.schema, convention=plan.benchmark.convention, **caps
            )
        return await ask(
            question.text,
            kg,
            method=plan.agent,
            model=model,
            supervisor=supervisor,
            topics=question.topics,
            limit=plan.agent_limit,
            sampling=plan.sampling,
            trace=trace,
            tools=plan.tools,
            schema=plan.schema,
            convention=plan.benchmark.convention,
        )
    finally:
        trace.close()


async def gold_labels(kg: KGClient, question: Question) -> dict[str, str]:
    """Labels of the gold answers that are ids, from the KG (so that a model's label can match them)."""
    labels: dict[str, str] = {}
    for gold in question.answers[:MAX_GOLD_LABELS]:
        entity = canonical_id(gold)
        if entity is None or entity.startswith("<"):
            continue
        result = await kg.call_tool("find_entities", {"name": entity, "limit": 1})
        hits = (result.data or {}).get("entities") or []
        if not result.is_error and hits and hits[0].get("id") == entity and hits[0].get("label"):
            labels[entity] = hits[0]["label"]
    return labels


async def with_topic(plan: EvalPlan, kg: KGClient, question: Question) -> tuple[Question, str | None]:
    """The question with its topic resolved from its Freebase key (WebQuestions), and how it was
    resolved ("key", "name", "unresolved"); other questions as they are, with None."""
    if not question.topic_key:
        return question, None
    from kg_mcp.agents.evaluation.topic_keys import resolve_topic_key

    topics, method = await resolve_topic_key(kg, question.topic_key, plan.kg.backend)
    return replace(question, topics={**question.topics, **topics}), method


def make_record(
    plan: EvalPlan, question: Question, repeat: int, result: AgentResult, labels: dict[str, str], trace: Path,
    topic_resolution: str | None = None,
) -> dict[str, Any]:
    usage = {role: asdict(u) for role, u in result.usage.items()}
    verdict = result.extra.get("verdict") if result.extra.get("verdict") in VERDICTS else None
    scored = score(
        question.id,
        result.answers,
        question.answers,
        abstained=result.abstained,
        kind=question.kind,
        verdict=verdict,
        labels=labels,
        repeat=repeat,
        hops=question.hops,
        aliases=question.aliases,
    )
    return {
        "benchmark": plan.benchmark.name,
        "question_id": question.id,
        "repeat": repeat,
        "question": question.text,
        "kind": question.kind,
        "hops": question.hops,
        "qtype": question.qtype,
        "gold": list(question.answers),
        "gold_labels": labels,
        **({"gold_aliases": [list(a) for a in question.aliases]} if question.aliases else {}),
        "topics": question.topics,
        **({"topic_key": question.topic_key, "topic_resolution": topic_resolution} if question.topic_key else {}),
        "agent": plan.agent,
        "model": plan.model,
        "supervisor": plan.supervisor,
        "answers": result.answers,
        "abstained": result.abstained,
        "verdict": verdict,
        "correct": scored.hit1,
        "outcome": scored.outcome,
        "usage": usage,
        "tokens_in": sum(u["input_tokens"] for u in usage.values()),
        "tokens_out": sum(u["output_tokens"] for u in usage.values()),
        "cost_usd": run_cost(usage, plan.role_models()),
        "turns": result.turns,
        "seconds": result.seconds,
        "path": [asdict(h) for h in result.path],
        "trace": str(trace.relative_to(plan.out)),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
    }


async def run_eval(
    plan: EvalPlan, model: Model, supervisor: Model | None = None, *, progress: bool = True
) -> EvalStats:
    """Answer every (question, repeat) of `plan` not yet in its folder; see the module docstring."""
    from tqdm import tqdm

    started = time.perf_counter()
    folder = RunDir(plan.out)
    folder.start(plan.manifest())
    if "kg_stats" not in folder.manifest():  # once per run: what its figures were measured on
        folder.record("kg_stats", await kg_stats(plan.kg))
    folder.repair()
    done = folder.done()
    todo = [(q, r) for q in plan.questions for r in range(plan.repeat) if (q.id, r) not in done]
    total = len(plan.questions) * plan.repeat
    queue: asyncio.Queue[tuple[Question, int]] = asyncio.Queue()
    for item in todo:
        queue.put_nowait(item)
    counts = {"done": 0, "failed": 0, "correct": 0}
    gave_up = False
    bar = tqdm(
        total=total, initial=total - len(todo), desc=f"{plan.benchmark.name} {plan.agent}", unit="q",
        file=sys.stderr, disable=not progress, dynamic_ncols=True,
    )

    async def worker() -> None:
        nonlocal gave_up
        async with plan.kg.client() as kg:
            while not queue.empty() and not gave_up:
                question, repeat = queue.get_nowait()
                trace_file = folder.trace_path(question.id, repeat)
                try:
                    question, resolution = await with_topic(plan, kg, question)
                    result = await answer(plan, kg, question, model, supervisor, Trace(trace_file))
                    labels = await gold_labels(kg, question)
                except Exception as e:  # noqa: BLE001 - one failed answer must not end a long run
                    counts["failed"] += 1
                    folder.append_error({
                        "question_id": question.id, "repeat": repeat, "error": f"{type(e).__name__}: {e}",
                        "trace": str(trace_file.relative_to(plan.out)),
                        "at": datetime.now(UTC).isoformat(timespec="seconds"),
                    })
                    gave_up = gave_up or (counts["failed"] >= GIVE_UP_AFTER and counts["done"] == 0)
                else:
                    record = make_record(plan, question, repeat, result, labels, trace_file, resolution)
                    folder.append(record)
                    counts["done"] += 1
                    counts["correct"] += bool(record["correct"])
                bar.update(1)
                bar.set_postfix(correct=f"{counts['correct']}/{counts['done']}", failed=counts["failed"], refresh=False)

    try:
        workers = max(1, min(plan.concurrency, len(todo)))
        if todo:
            await asyncio.gather(*(worker() for _ in range(workers)))
    finally:
        bar.close()
    return EvalStats(
        total, total - len(todo), counts["done"], counts["failed"], round(time.perf_counter() - started, 3), gave_up
    )
