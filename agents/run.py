"""What every driver shares for one question: model turns and tool calls, traced and counted.

A driver creates a `Run`, sends model turns through `run.ask(...)` and tool calls through
`run.tool(...)`, records the hops it walks, and ends with `run.finish(...)`, which returns the
`AgentResult` and writes the trace's final record.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from kg_mcp.agents.kg_client import KGClient, ToolResult
from kg_mcp.agents.models.base import Message, Model, Reply, Sampling, ToolSpec, Usage
from kg_mcp.agents.trace import Trace


@dataclass
class Hop:
    """One step of the path walked: from `entity` along `relation` (`~rel` = backwards) to `reached`."""

    entity: str
    relation: str | None
    reached: list[str] = field(default_factory=list)


@dataclass
class AgentResult:
    method: str
    question: str
    answers: list[str]
    abstained: bool
    path: list[Hop]
    usage: dict[str, Usage]  # per role ("model", "operator", "supervisor")
    turns: int
    seconds: float
    trace: str | None = None
    reasoning: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["usage"] = {role: asdict(u) for role, u in self.usage.items()}
        return data


class Run:
    def __init__(self, method: str, question: str, kg: KGClient, trace: Trace | None = None):
        self.method = method
        self.question = question
        self.kg = kg
        self.trace = trace or Trace()
        self.usage: dict[str, Usage] = {}
        self.path: list[Hop] = []
        self.turns = 0
        self._started = time.perf_counter()
        self.trace.event("start", method=method, question=question)

    async def ask(
        self,
        model: Model,
        messages: list[Message],
        *,
        role: str = "model",
        tools: list[ToolSpec] | None = None,
        sampling: Sampling | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Reply:
        self.turns += 1
        self.trace.event(
            "model_request",
            role=role,
            model=model.name,
            messages=[m.to_dict() for m in messages],
            tools=[t.name for t in tools or []],
            json_schema=json_schema is not None,
        )
        started = time.perf_counter()
        reply = await model.complete(messages, tools=tools, sampling=sampling, json_schema=json_schema)
        self.usage[role] = self.usage.get(role, Usage()) + reply.usage
        self.trace.event(
            "model_reply",
            role=role,
            text=reply.text,
            tool_calls=[asdict(c) for c in reply.tool_calls],
            usage=asdict(reply.usage),
            stop_reason=reply.stop_reason,
            seconds=round(time.perf_counter() - started, 4),
        )
        return reply

    async def tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        self.trace.event("tool_call", tool=name, arguments=arguments)
        result = await self.kg.call_tool(name, arguments)
        self.trace.event(
            "tool_result", tool=name, text=result.text, is_error=result.is_error, data=result.data, seconds=round(result.seconds, 4)
        )
        return result

    def note(self, what: str, **data: Any) -> None:
        """A driver's rule firing (retry, reset, rollback, limit): recorded in the trace."""
        self.trace.event("note", what=what, **data)

    def hop(self, entity: str, relation: str | None, reached: list[str]) -> None:
        self.path.append(Hop(entity, relation, list(reached)))

    def finish(self, answers: list[str], *, abstained: bool = False, reasoning: str = "", **extra: Any) -> AgentResult:
        result = AgentResult(
            method=self.method,
            question=self.question,
            answers=[] if abstained else answers,
            abstained=abstained,
            path=self.path,
            usage=self.usage,
            turns=self.turns,
            seconds=round(time.perf_counter() - self._started, 3),
            trace=str(self.trace.path) if self.trace.path else None,
            reasoning=reasoning,
            extra=extra,
        )
        self.trace.event("final", **result.to_dict())
        self.trace.close()
        return result


_FINAL = re.compile(r"final answer\s*:?(.*)", re.IGNORECASE | re.DOTALL)
_BRACED = re.compile(r"\{([^{}]*)\}")


def final_answers(text: str) -> list[str] | None:
    """The `{...}` spans after `Final answer:`; None if the text has no final answer.

    >>> final_answers("I found it. Final answer: {Steven Spielberg}, {Tom Hanks}")
    ['Steven Spielberg', 'Tom Hanks']
    >>> final_answers("Final answer: {}")
    []
    >>> final_answers("Let me search first.") is None
    True
    """
    match = _FINAL.search(text)
    if not match:
        return None
    spans = [s.strip().strip("'\"") for s in _BRACED.findall(match.group(1))]
    return [s for s in spans if s]


async def resolve_topics(run: Run, topics: dict[str, str | None]) -> dict[str, str]:
    """Topic entities as {name: id}; names given without an id are looked up with find_entities.

    A name that finds nothing is left out (and noted in the trace); the driver carries on without it.
    """
    resolved: dict[str, str] = {}
    for name, entity_id in topics.items():
        if entity_id:
            resolved[name] = entity_id
            continue
        result = await run.tool("find_entities", {"name": name, "limit": 1})
        hits = (result.data or {}).get("entities") or []
        if result.is_error or not hits:
            run.note("topic not found", name=name)
            continue
        resolved[name] = hits[0]["id"]
    return resolved
