"""The wheel as a user gets it: built from this checkout, installed with the OpenAI Agents SDK
(import name `agents`) in a fresh virtualenv from PyPI, then `kg-mcp ask` and `from agents
import Agent` run there. No --system-site-packages: every dependency is installed for real.

It takes a minute or two (the full dependency set, from pip's cache when warm), so it runs as its
own CI step: `make test-packaging` (in .ci/run after `make test`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from mcp import Client

from kg_mcp.backends import open_backend
from kg_mcp.server import build_server
from providers import FakeProvider
from test_ask_e2e import over_the_wire
from test_sog import gold_path_policy

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Where was Vincent van Gogh born?"


def run(*command, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    # Never from the checkout: there, `python -c` would import its kg_mcp/ instead of the wheel's.
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=540, cwd=cwd, **kwargs)
    assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    return done


def birthplaces() -> set[str]:
    """What the demo KG says, asked through this checkout's own server."""

    async def ask():
        async with Client(build_server(open_backend())) as client:
            return await client.call_tool("search", {"entity": "wd:Q5582", "properties_to_filter_for": ["wdt:P19"]})

    return {row["value"]["label"] for row in asyncio.run(ask()).structured_content["rows"]}


def test_wheel_installs_beside_openai_agents(tmp_path):
    run(sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--quiet", "-w", tmp_path / "dist", cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("kg_mcp-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if ".dist-info/" not in n} == {"kg_mcp"}
    assert {"kg_mcp/agents/ask.py", "kg_mcp/cli/agent_commands.py", "kg_mcp/demo/demo.ttl"} <= set(names)
    # the JSON-LD context `kg-mcp load` reads for "https://schema.org", with its licence note
    assert {"kg_mcp/data/jsonld/schema.org.jsonld", "kg_mcp/data/jsonld/README.md"} <= set(names)
    assert any(n.startswith("kg_mcp/prompts/") and n.endswith(".md") for n in names)

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, "openai-agents", cwd=tmp_path)

    probe = "import agents, kg_mcp.agents.ask; from agents import Agent; print(agents.__file__)"
    where = run(venv / "bin" / "python", "-c", probe, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)) and where.endswith("site-packages/agents/__init__.py")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "KG_MCP_", "PYTHON"))}
    env["OPENAI_API_KEY"] = "sk-test-not-a-real-key"
    with FakeProvider(over_the_wire(gold_path_policy(["wdt:P19"]))) as fake:
        done = run(venv / "bin" / "kg-mcp", "ask", QUESTION, "--topic", "Vincent van Gogh", "--model", "openai:scripted",
                   "--base-url", fake.base_url_openai, "--trace", tmp_path / "t.jsonl", "--json", env=env, cwd=tmp_path)
        assert fake.errors == [] and len(fake.requests) == 2
    out = json.loads(done.stdout)
    assert set(out["answers"]) == birthplaces() and out["answers"]
    assert out["path"][0]["relation"] == "wdt:P19"
