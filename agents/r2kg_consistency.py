"""R2-KG's single-agent strict self-consistency: the Operator answers alone, several times, and an
answer is given only when every run gives the same answer set (prompt variants or temperatures)."""

from __future__ import annotations

import string
import unicodedata
from dataclasses import replace
from typing import Any, Literal

from kg_mcp.agents.conventions import DEFAULT_CONVENTION
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Model, Sampling, Usage
from kg_mcp.agents.r2kg import METHOD, PROMPT_VARIANTS, run_r2kg
from kg_mcp.agents.run import AgentResult, Run
from kg_mcp.agents.trace import Trace

_PUNCTUATION = set(string.punctuation)


def normalise(answer: str) -> str:
    """Case, whitespace and punctuation folded away: `The  Wrecking-Crew!` -> `the wreckingcrew`."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = "".join(
        ch for ch in text if ch not in _PUNCTUATION and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(text.split())


def answer_set(answers: list[str]) -> frozenset[str]:
    return frozenset(a for a in (normalise(x) for x in answers) if a)


def temperatures(runs: int) -> list[float]:
    """Evenly spread from 0.2 to 1.0: three runs get 0.2, 0.6 and 1.0."""
    if runs <= 1:
        return [0.2]
    return [round(0.2 + 0.8 * i / (runs - 1), 3) for i in range(runs)]


class _RunTrace(Trace):
    """A single run's events, written into the wrapper's trace tagged with the run index."""

    def __init__(self, parent: Trace, index: int):
        super().__init__(None)
        self.parent = parent
        self.index = index

    def event(self, type_: str, **data: Any) -> None:
        self.events.append({"type": type_, **data})
        self.parent.event(type_, run=self.index, **data)

    def close(self) -> None:
        pass


async def run_r2kg_consistent(
    question: str,
    kg: KGClient,
    operator: Model,
    *,
    topics: dict[str, str | None] | None = None,
    runs: int = 3,
    vary: Literal["prompt", "temperature"] = "prompt",
    max_iterations: int = 15,
    trace: Trace | None = None,
    sampling: Sampling | None = None,
    stop_early: bool = True,
    tools: str = "paper",
    schema: bool = False,
    convention: str = DEFAULT_CONVENTION,
) -> AgentResult:
    """Single-agent R2-KG with strict self-consistency: an answer only when all runs agree.

    Runs differ by prompt variant (1, 2, 3, ...) or by temperature (`temperatures(runs)`, on top
    of `sampling`). Any abstention or any two different answer sets (after `normalise`) abstain.
    With `stop_early`, the runs stop at the first abstention or disagreement (the outcome is the
    same; the remaining runs are not paid for).
    """
    if vary not in ("prompt", "temperature"):
        raise ValueError(f"vary must be 'prompt' or 'temperature', not {vary!r}")
    outer = Run(f"{METHOD}-consistent", question, kg, trace)
    base = sampling or Sampling()
    temps = temperatures(runs)
    results: list[AgentResult] = []
    agreed: frozenset[str] | None = None
    verdict = "unanimous"
    for index in range(runs):
        if vary == "prompt":
            variant, run_sampling = index % PROMPT_VARIANTS + 1, sampling
        else:
            variant, run_sampling = 1, replace(base, temperature=temps[index])
        outer.note(
            "self-consistency run",
            index=index,
            prompt_variant=variant,
            temperature=run_sampling.temperature if run_sampling else None,
        )
        result = await run_r2kg(
            question,
            kg,
            operator,
            None,
            topics=topics,
            max_iterations=max_iterations,
            sampling=run_sampling,
            trace=_RunTrace(outer.trace, index),
            prompt_variant=variant,
            tools=tools,
            schema=schema,
            convention=convention,
        )
        results.append(result)
        for role, usage in result.usage.items():
            outer.usage[role] = outer.usage.get(role, Usage()) + usage
        outer.turns += result.turns
        answers = answer_set(result.answers)
        if result.abstained or not answers:
            verdict = "a run abstained"
        elif agreed is not None and answers != agreed:
            verdict = "runs disagreed"
        agreed = answers if agreed is None else agreed
        if verdict != "unanimous" and stop_early:
            break
    if len(results) < runs:
        outer.note("stopped early", reason=verdict, runs_done=len(results))
    outer.note(
        "self-consistency", verdict=verdict, answer_sets=[sorted(answer_set(r.answers)) for r in results]
    )
    outer.path = list(results[0].path) if results else []
    summary = [
        {
            "answers": r.answers,
            "abstained": r.abstained,
            "turns": r.turns,
            "reasoning": r.reasoning,
            "stop": r.extra.get("stop"),
        }
        for r in results
    ]
    if verdict != "unanimous" or not results:
        return outer.finish([], abstained=True, reasoning=verdict, verdict=verdict, vary=vary, runs=summary)
    return outer.finish(
        results[0].answers, reasoning=results[0].reasoning, verdict=verdict, vary=vary, runs=summary
    )
