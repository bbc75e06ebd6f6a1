"""Target 7: the time an agent step spends outside the model, with a scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import sys
from pathlib import Path

from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.sog import run_sog
from kg_mcp.agents.trace import Trace, read_trace

from bench.common import DATA, Row
from bench.store_measures import metaqa_store


def agent_overhead(work: Path, questions: int) -> list[Row]:
    """Search-on-Graph driven by a gold-path policy against `kg-mcp serve` over stdio: per step,
    wall time minus model time (tool round trips, parsing, prompt building, trace writing)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_sog import gold_path_policy  # the same scripted model the tests use

    store = metaqa_store(work)
    chosen = random.Random(2).sample(json.loads((DATA / "metaqa" / "2hop_dev.json").read_text()), questions)
    command = f"{sys.executable} -m kg_mcp serve --store {store}"
    outside: list[float] = []

    async def run() -> None:
        async with KGClient.connect(command=command) as kg:
            for i, q in enumerate(chosen):
                path = work / "traces" / f"{i}.jsonl"
                model = ScriptedModel(gold_path_policy(q["gold_relation_path"]))
                await run_sog(q["question"], kg, model, topics={q["topic_entity"]: None}, trace=Trace(path))
                outside.extend(_outside_model(read_trace(path)))

    os.makedirs(work / "traces", exist_ok=True)
    asyncio.run(run())
    p50 = statistics.median(outside)
    return [
        Row(
            f"agent step outside the model, p50 ({len(outside)} steps)",
            p50 * 1e3,
            5.0,
            "ms",
            "<= 1.0",
            "baseline column is the 5 ms goal itself; SoG over stdio, scripted model",
        )
    ]


def _outside_model(events: list[dict]) -> list[float]:
    """Seconds between one model reply and the next request: everything a step does besides the model."""
    steps, replied_at = [], None
    for event in events:
        if event["type"] == "model_reply":
            replied_at = event["t"]
        elif event["type"] == "model_request" and replied_at is not None:
            steps.append(event["t"] - replied_at)
            replied_at = None
    return steps
