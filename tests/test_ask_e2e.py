"""`kg-mcp ask` end to end: a real subprocess, the model behind an OpenAI-compatible base URL
(a loopback server speaking the Chat Completions JSON to the real openai SDK), and the kg-mcp
server over stdio and over streamable HTTP. The model is scripted: these runs check the plumbing
and each method's loop, not any model's accuracy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from providers import FakeProvider
from test_sog import gold_path_policy
from test_transports import http_server

from agents.models.base import ToolSpec
from agents.trace import read_trace

QUESTION = "what are the languages spoken in the films directed by [Joel Zwick]"  # 2-hop-dev-0
GOLD_PATH = ["~directed_by", "in_language"]


def over_the_wire(policy):
    """A (messages, tools) policy, answering requests that arrive in the provider's JSON."""

    def answer(request):
        return policy(request.messages(), [ToolSpec(name, "", {}) for name in request.tool_names()])

    return answer


def kg_mcp_ask(*args: str, base_url: str, trace) -> dict:
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key")
    env.pop("OPENAI_BASE_URL", None)
    command = [sys.executable, "-m", "kg_mcp", "ask", *args, "--model", "openai:scripted-gold", "--base-url", base_url]
    done = subprocess.run(command + ["--trace", str(trace), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def expected_answers(data_dir) -> set[str]:
    questions = json.loads((data_dir / "metaqa" / "2hop_dev.json").read_text())
    return set(next(q for q in questions if q["question"] == QUESTION)["answers"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sog_over_stdio_and_http(metaqa_store_dir, data_dir, tmp_path, transport):
    gold = expected_answers(data_dir)
    with FakeProvider(over_the_wire(gold_path_policy(GOLD_PATH))) as fake:
        args = [QUESTION, "--agent", "sog", "--topic", "Joel Zwick"]
        if transport == "stdio":
            server = f"{sys.executable} -m kg_mcp serve --store {metaqa_store_dir}"
            out = kg_mcp_ask(*args, "--server-cmd", server, base_url=fake.base_url_openai, trace=tmp_path / "t.jsonl")
        else:
            with http_server(metaqa_store_dir, "http") as (base, _):
                out = kg_mcp_ask(*args, "--url", base + "/mcp", base_url=fake.base_url_openai, trace=tmp_path / "t.jsonl")
        assert fake.errors == []
        # the openai SDK sent real Chat Completions requests, with the search tool and tool results
        bodies = [r.body for r in fake.requests]
        assert all(b["model"] == "scripted-gold" for b in bodies)
        assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["search"]
        assert any(m["role"] == "tool" for m in bodies[-1]["messages"])
    assert set(out["answers"]) == gold and out["abstained"] is False
    assert [hop["relation"] for hop in out["path"]][:1] == ["~directed_by"]
    events = read_trace(out["trace"])
    assert [e["type"] for e in events][-1] == "final"
    assert sum(e["type"] == "tool_call" for e in events) >= 2
