"""The OpenAI adapter offers kg-mcp's own tools in strict mode, over the wire to the loopback
provider, and turns the nulls strict mode makes a model write back into absent arguments."""

from __future__ import annotations

import asyncio

import pytest
from kg_mcp.agents.models import Reply, ToolSpec, get_model
from kg_mcp.agents.models.base import Message
from kg_mcp.agents.models.scripted import call
from providers import FakeProvider, Request, error

from kg_mcp.backends import open_backend
from kg_mcp.server import build_server
from kg_mcp.settings import Settings


@pytest.fixture(scope="module")
def kg_tools() -> list[ToolSpec]:
    settings = Settings(sparql_tool=True)
    tools = asyncio.run(build_server(open_backend(settings=settings), settings).list_tools())
    return [ToolSpec(t.name, t.description or "", t.input_schema) for t in tools]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def nodes(schema):
    yield schema
    for value in schema.values() if isinstance(schema, dict) else schema if isinstance(schema, list) else ():
        yield from nodes(value)


def obeys_strict_rules(schema) -> list[str]:
    """What OpenAI's strict function calling demands of a schema (its documented subset)."""
    broken = []
    for node in nodes(schema):
        if not isinstance(node, dict):
            continue
        if "default" in node or "$ref" in node:
            broken.append(f"unsupported keyword in {node}")
        if node.get("type") == "object":
            if node.get("additionalProperties") is not False:
                broken.append(f"open object {node}")
            if sorted(node.get("required", [])) != sorted(node.get("properties", {})):
                broken.append(f"not every property required in {node}")
    return broken


async def test_kg_tools_go_out_strict_and_nulls_come_back_absent(kg_tools):
    reply = Reply("", tool_calls=[call("search", entity="wd:Q5582", direction=None, properties_to_filter_for=None)])
    with FakeProvider([reply]) as fake:
        model = get_model("openai:fake", base_url=fake.base_url_openai, api_key="sk-test")
        got = await model.complete([Message("user", "Who is Vincent van Gogh?")], tools=kg_tools)
    sent = fake.requests[0].body["tools"]
    assert [t["function"]["name"] for t in sent] == [t.name for t in kg_tools]
    for tool in sent:
        assert tool["function"]["strict"] is True, tool["function"]["name"]
        assert obeys_strict_rules(tool["function"]["parameters"]) == [], tool["function"]["name"]
    search = next(t["function"]["parameters"] for t in sent if t["function"]["name"] == "search")
    assert search["properties"]["direction"]["type"] == ["string", "null"]
    assert search["properties"]["direction"]["enum"] == ["outgoing", "incoming", None]
    assert 'Default "outgoing"; null leaves it out.' in search["properties"]["direction"]["description"]
    assert got.tool_calls[0].arguments == {"entity": "wd:Q5582"}


async def test_a_provider_without_strict_mode_gets_the_tools_as_they_are(kg_tools):
    def policy(request: Request):
        if any(t["function"].get("strict") for t in request.body.get("tools", [])):
            return error(400, "strict is not supported")
        return "fine"

    with FakeProvider(policy) as fake:
        model = get_model("openai:fake", base_url=fake.base_url_openai, api_key="sk-test")
        assert (await model.complete([Message("user", "q")], tools=kg_tools)).text == "fine"
        assert (await model.complete([Message("user", "again")], tools=kg_tools)).text == "fine"
    strict_flags = [[t["function"].get("strict", False) for t in r.body["tools"]] for r in fake.requests]
    assert strict_flags == [[True] * len(kg_tools), [False] * len(kg_tools), [False] * len(kg_tools)]
    assert fake.requests[1].body["tools"][0]["function"]["parameters"] == kg_tools[0].input_schema


async def test_other_400s_keep_strict_mode(kg_tools):
    with FakeProvider(lambda request: error(400, "context too long")) as fake:
        model = get_model("openai:fake", base_url=fake.base_url_openai, api_key="sk-test", max_retries=0)
        with pytest.raises(Exception, match="context too long"):
            await model.complete([Message("user", "q")], tools=kg_tools)
    assert len(fake.requests) == 2 and model.strict_tools_supported
