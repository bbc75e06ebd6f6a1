"""One question, one method, one model: the entry point behind `kg-mcp ask` (and later, evaluation)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from kg_mcp.agents.conventions import DEFAULT_CONVENTION
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models import Model, Sampling
from kg_mcp.agents.run import AgentResult
from kg_mcp.agents.trace import Trace

Method = Literal["sog", "ark", "r2kg", "r2kg-sc", "kgr"]
METHODS: tuple[str, ...] = ("sog", "ark", "r2kg", "r2kg-sc", "kgr")
_ID_LIKE = re.compile(r"^(?:[A-Za-z][\w.-]*:\S+|<\S+>|[QPL][1-9][0-9]*|[mg]\.[0-9a-z_]+)$")


def parse_topics(values: list[str]) -> dict[str, str | None]:
    """`--topic` values: NAME, ID, or NAME=ID.

    >>> parse_topics(["Jaws", "wd:Q42", "Vincent van Gogh=wd:Q5582"])
    {'Jaws': None, 'wd:Q42': 'wd:Q42', 'Vincent van Gogh': 'wd:Q5582'}
    """
    topics: dict[str, str | None] = {}
    for value in values:
        name, sep, entity_id = value.partition("=")
        if sep and name.strip() and entity_id.strip():
            topics[name.strip()] = entity_id.strip()
        elif _ID_LIKE.match(value.strip()):
            topics[value.strip()] = value.strip()
        else:
            topics[value.strip()] = None
    return topics


def default_trace_path(method: str) -> Path:
    folder = Path(os.environ.get("KG_MCP_TRACE_DIR", "traces"))
    return folder / f"{method}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.jsonl"


async def ask(
    question: str,
    kg: KGClient,
    *,
    method: str,
    model: Model,
    supervisor: Model | None = None,
    topics: dict[str, str | None] | None = None,
    limit: int | None = None,
    sampling: Sampling | None = None,
    trace: Trace | None = None,
    tools: str = "paper",
    schema: bool = False,
    convention: str = DEFAULT_CONVENTION,
) -> AgentResult:
    """Answer `question` with one method over an open KG client. `limit` is the method's own cap
    (SoG turns, ARK-V1 steps K_max, R2-KG iterations T, KG-Reasoner generation rounds); `tools`
    the tool mode of SoG and R2-KG (paper, batched or follow); `schema` appends the server's KG
    summary (its relations and hubs, from its instructions) to the method's system prompt;
    `convention` names the question set's rule on the topic entity (prompts/conventions/), which
    SoG, ARK-V1 and R2-KG state (KG-Reasoner's trained protocol has no such rule)."""
    options: dict[str, Any] = {"topics": topics or {}, "sampling": sampling, "trace": trace, "schema": schema}
    ruled = {**options, "convention": convention}
    if tools != "paper" and method not in ("sog", "r2kg", "r2kg-sc"):
        raise ValueError(f"--tools {tools} is for sog and r2kg; {method} has its own tools")
    if method == "sog":
        from kg_mcp.agents.sog import run_sog

        return await run_sog(question, kg, model, **ruled, tools=tools, **({"max_turns": limit} if limit else {}))
    if method == "ark":
        from kg_mcp.agents.ark import run_ark

        return await run_ark(question, kg, model, **ruled, **({"k_max": limit} if limit else {}))
    if method == "r2kg":
        from kg_mcp.agents.r2kg import run_r2kg

        return await run_r2kg(
            question, kg, model, supervisor or model, **ruled, tools=tools, **({"max_iterations": limit} if limit else {})
        )
    if method == "r2kg-sc":
        from kg_mcp.agents.r2kg_consistency import run_r2kg_consistent

        return await run_r2kg_consistent(
            question, kg, model, **ruled, tools=tools, **({"max_iterations": limit} if limit else {})
        )
    if method == "kgr":
        from kg_mcp.agents.kg_reasoner import run_kgr

        return await run_kgr(question, kg, model, **options, **({"max_rounds": limit} if limit else {}))
    raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
