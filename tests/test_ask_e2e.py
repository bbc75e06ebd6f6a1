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
from kg_mcp.agents.models.base import ToolSpec
from kg_mcp.agents.trace import read_trace
from providers import FakeProvider
from test_ark import Follower
from test_r2kg import gold_supervisor, gold_walker
from test_sog import gold_path_policy
from test_transports import http_server

QUESTION = "what are the languages spoken in the films directed by [Joel Zwick]"  # 2-hop-dev-0
GOLD_PATH = ["~directed_by", "in_language"]


def over_the_wire(policy):
    """A (messages, tools) policy, answering requests that arrive in the provider's JSON."""

    def answer(request):
        return policy(request.messages(), [ToolSpec(name, "", {}) for name in request.tool_names()])

    return answer


def ark_over_the_wire(follower: Follower):
    """ARK-V1's follower reads the stage from the reply schema, which travels as response_format."""

    def answer(request):
        schema = request.body["response_format"]["json_schema"]["schema"]
        follower.model.seen.append({"json_schema": schema})
        return follower(request.messages(), [])

    return answer


def policy_for(method: str):
    if method == "sog":
        return over_the_wire(gold_path_policy(GOLD_PATH)), []
    if method == "ark":
        return ark_over_the_wire(Follower(None, GOLD_PATH)), []
    operator = over_the_wire(gold_walker(GOLD_PATH))
    supervisor = over_the_wire(gold_supervisor(GOLD_PATH, exclude="Joel Zwick"))
    # One provider serves both roles; the model name in each request says which one is asked.
    return (lambda request: (supervisor if request.body["model"] == "supervisor" else operator)(request)), [
        "--supervisor",
        "openai:supervisor",
    ]


def kg_mcp_ask(*args: str, base_url: str, trace, model: str = "openai:scripted-gold") -> dict:
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key")
    env.pop("OPENAI_BASE_URL", None)
    command = [sys.executable, "-m", "kg_mcp", "ask", *args, "--model", model, "--base-url", base_url]
    done = subprocess.run(command + ["--trace", str(trace), "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def expected_answers(data_dir) -> set[str]:
    questions = json.loads((data_dir / "metaqa" / "2hop_dev.json").read_text())
    return set(next(q for q in questions if q["question"] == QUESTION)["answers"])


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("method", ["sog", "ark", "r2kg"])
def test_each_method_over_stdio_and_http(metaqa_store_dir, data_dir, tmp_path, method, transport):
    gold = expected_answers(data_dir)
    policy, extra_args = policy_for(method)
    model = "openai:operator" if method == "r2kg" else "openai:scripted-gold"
    with FakeProvider(policy) as fake:
        args = [QUESTION, "--agent", method, "--topic", "Joel Zwick", *extra_args]
        trace = tmp_path / "t.jsonl"
        if transport == "stdio":
            server = f"{sys.executable} -m kg_mcp serve --store {metaqa_store_dir}"
            out = kg_mcp_ask(*args, "--server-cmd", server, base_url=fake.base_url_openai, trace=trace, model=model)
        else:
            with http_server(metaqa_store_dir, "http") as (base, _):
                out = kg_mcp_ask(*args, "--url", base + "/mcp", base_url=fake.base_url_openai, trace=trace, model=model)
        assert fake.errors == []
        # the openai SDK sent real Chat Completions requests, with tools and tool results where the method uses them
        bodies = [r.body for r in fake.requests]
        assert {b["model"] for b in bodies} == ({"operator", "supervisor"} if method == "r2kg" else {"scripted-gold"})
    assert set(out["answers"]) == gold and out["abstained"] is False
    assert out["path"] and out["path"][0]["relation"] == "~directed_by"
    events = read_trace(out["trace"])
    assert [e["type"] for e in events][-1] == "final"
    assert sum(e["type"] == "tool_call" for e in events) >= 2
    if method == "sog":
        assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["search"]
        assert any(m["role"] == "tool" for m in bodies[-1]["messages"])
    if method == "r2kg":
        assert set(out["usage"]) == {"operator", "supervisor"}
