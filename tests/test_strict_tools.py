"""The OpenAI adapter offers kg-mcp's tools as published (optional arguments optional) unless strict
mode is asked for; in strict mode (every argument required and nullable) the nulls a model writes
come back absent. Measured over the wire to the loopback provider: how often a model that writes
what each schema requires repeats an argument's default, with and without strict mode."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from kg_mcp.agents.models import Reply, ToolSpec
from kg_mcp.agents.models.openai_chat import OpenAIChatModel
from kg_mcp.agents.models.base import Message, ToolCall
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
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_STRICT_TOOLS"):
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


def model(fake: FakeProvider, **options):
    return OpenAIChatModel("fake", base_url=fake.base_url_openai, api_key="sk-test", **options)


async def test_kg_tools_go_out_as_published_with_optional_arguments_optional(kg_tools):
    with FakeProvider(["fine"]) as fake:
        await model(fake).complete([Message("user", "Who is Vincent van Gogh?")], tools=kg_tools)
    sent = {t["function"]["name"]: t["function"] for t in fake.requests[0].body["tools"]}
    assert list(sent) == [t.name for t in kg_tools]
    for tool in kg_tools:
        assert "strict" not in sent[tool.name] and sent[tool.name]["parameters"] == tool.input_schema, tool.name
    search = sent["search"]["parameters"]
    assert search.get("required", []) == []  # entity or entities; direction and the rest have defaults
    assert search["properties"]["direction"] == {**search["properties"]["direction"], "default": "outgoing"}
    assert sent["verify"]["parameters"]["required"] == ["claims"]


async def test_strict_mode_when_asked_for_and_nulls_come_back_absent(kg_tools, monkeypatch):
    monkeypatch.setenv("OPENAI_STRICT_TOOLS", "1")  # a provider that requires it
    reply = Reply("", tool_calls=[call("search", entity="wd:Q5582", direction=None, properties_to_filter_for=None)])
    with FakeProvider([reply]) as fake:
        got = await model(fake).complete([Message("user", "Who is Vincent van Gogh?")], tools=kg_tools)
    sent = fake.requests[0].body["tools"]
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
        strict = model(fake, strict_tools=True)
        assert (await strict.complete([Message("user", "q")], tools=kg_tools)).text == "fine"
        assert (await strict.complete([Message("user", "again")], tools=kg_tools)).text == "fine"
    strict_flags = [[t["function"].get("strict", False) for t in r.body["tools"]] for r in fake.requests]
    assert strict_flags == [[True] * len(kg_tools), [False] * len(kg_tools), [False] * len(kg_tools)]
    assert fake.requests[1].body["tools"][0]["function"]["parameters"] == kg_tools[0].input_schema


async def test_other_400s_keep_strict_mode(kg_tools):
    with FakeProvider(lambda request: error(400, "context too long")) as fake:
        strict = model(fake, strict_tools=True, max_retries=0)
        with pytest.raises(Exception, match="context too long"):
            await strict.complete([Message("user", "q")], tools=kg_tools)
    assert len(fake.requests) == 2 and strict.strict_tools_supported


# --- how often calls repeat defaults ---------------------------------------------------------------

# What each call needs, as a model would write it for a question; everything else is what the schema
# it was sent makes it write.
NEEDED = {
    "search": {"entity": "kg:Jaws"},
    "follow": {"entity": "kg:Jaws", "path": ["directed_by"]},
    "get_relations": {"entity": "kg:Jaws"},
    "explore_kg": {"entity": "kg:Jaws", "relations": ["directed_by"]},
    "verify": {"claims": [{"subject": "kg:Jaws", "relation": "directed_by", "object": "kg:Steven_Spielberg"}]},
    "find_entities": {"name": "Jaws"},
    "kgr_search": {"entity": "kg:Jaws", "question": "Who directed Jaws?"},
    "sparql": {"query": "ASK { ?s ?p ?o }"},
}
_DEFAULT = re.compile(r"Default (.+?); null leaves it out\.")
_EMPTY = {"array": [], "string": "", "integer": 0, "number": 0, "boolean": False}


def required_value(schema: dict):
    """What a model that must write an argument writes when the question does not need it: the
    default the schema states, else its first choice, else an empty value of its type."""
    if "default" in schema:
        return schema["default"]
    stated = _DEFAULT.search(schema.get("description", ""))
    if stated:
        return json.loads(stated.group(1))
    if schema.get("enum"):
        return schema["enum"][0]
    kinds = schema.get("type", "string")
    kind = next(k for k in (kinds if isinstance(kinds, list) else [kinds]) if k != "null")
    return _EMPTY.get(kind)


def schema_writer(request: Request) -> Reply:
    """One call of each tool offered, with the arguments its question needs and those its schema requires."""
    calls = []
    for tool in request.body["tools"]:
        function = tool["function"]
        schema = function["parameters"]
        arguments = dict(NEEDED[function["name"]])
        for name in schema.get("required", []):
            arguments.setdefault(name, required_value(schema["properties"][name]))
        calls.append(ToolCall(f"call_{function['name']}", function["name"], arguments))
    return Reply("", tool_calls=calls)


def repeated_defaults(calls: list[ToolCall], kg_tools: list[ToolSpec]) -> list[tuple[str, str]]:
    """(tool, argument) for every argument a call sets to the default of the published schema."""
    published = {t.name: t.input_schema["properties"] for t in kg_tools}
    return [
        (c.name, name) for c in calls for name, value in c.arguments.items()
        if "default" in published[c.name].get(name, {}) and published[c.name][name]["default"] == value
    ]


async def test_optional_arguments_are_not_repeated_unless_strict_mode_makes_them_required(kg_tools):
    with FakeProvider(schema_writer) as fake:
        plain = await model(fake).complete([Message("user", "q")], tools=kg_tools)
        strict = await model(fake, strict_tools=True).complete([Message("user", "q")], tools=kg_tools)
    assert len(plain.tool_calls) == len(strict.tool_calls) == len(kg_tools)
    assert repeated_defaults(plain.tool_calls, kg_tools) == []
    # Strict mode made every argument required: the model wrote each default (direction "outgoing",
    # properties_to_filter_for [], ...). The adapter leaves out only nulls, so the calls carry them.
    repeated = repeated_defaults(strict.tool_calls, kg_tools)
    calls_with_one = {tool for tool, _ in repeated}
    print(f"calls repeating a default: {len(calls_with_one)} of {len(kg_tools)} in strict mode "
          f"({len(repeated)} arguments), 0 of {len(kg_tools)} as published")
    assert ("search", "direction") in repeated and ("search", "properties_to_filter_for") in repeated
    assert calls_with_one == {t.name for t in kg_tools if len(t.input_schema["properties"]) > len(NEEDED[t.name])}
