"""Tool input schemas that strict clients accept, and argument errors in our words, for every tool.

Every check iterates over the server's own tool list, so a tool added later is covered without
touching this file. The schemas are checked with google-genai's own types (what a Gemini client
builds its function declarations with); the errors come back through the SDK's client.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from google.genai import types as genai
from mcp import Client

from kg_mcp.backends import open_backend
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

LIBRARY_TEXT = ("validation error", "pydantic", "https://", "Input should", "Error executing tool", "Traceback")


@pytest.fixture(scope="module")
def server():
    settings = Settings(sparql_tool=True)
    return build_server(open_backend(settings=settings), settings)


@pytest.fixture(scope="module")
def tools(server):
    return {t.name: t for t in asyncio.run(server.list_tools())}


def walk(node):
    yield node
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
    for child in children:
        yield from walk(child)


def test_every_schema_is_portable(tools):
    assert {"search", "get_relations", "explore_kg", "verify", "find_entities", "kgr_search", "sparql"} <= set(tools)
    for name, tool in tools.items():
        nodes = [n for n in walk(tool.input_schema) if isinstance(n, dict)]
        assert not any("$ref" in n or "$defs" in n or "definitions" in n for n in nodes), name
        assert not any(n.get("type") == "null" or "null" in (n.get("type") or []) for n in nodes), name
        assert not any("default" in n and n["default"] is None for n in nodes), name
        objects = [n for n in nodes if n.get("type") == "object"]
        assert objects and all(n["additionalProperties"] is False for n in objects), name


def descriptions(schema) -> dict[str, str]:
    return {key: sub.get("description") for key, sub in (schema.get("properties") or {}).items()}


def test_google_genai_takes_every_schema_as_a_function_declaration(tools):
    for name, tool in tools.items():
        # Schema itself forbids unknown keys ($ref, $defs) as pydantic extra fields.
        direct = genai.Schema.model_validate(tool.input_schema)
        converted = genai.Schema.from_json_schema(
            json_schema=genai.JSONSchema.model_validate(tool.input_schema), raise_error_on_unsupported_field=True
        )
        for parameters in (direct, converted):
            declaration = genai.FunctionDeclaration(name=name, description=tool.description, parameters=parameters)
            assert set(declaration.parameters.properties or {}) == set(tool.input_schema["properties"]), name
            # The nullable conversion of `X | None` used to drop the argument's description.
            got = {k: v.description for k, v in (declaration.parameters.properties or {}).items()}
            assert got == descriptions(tool.input_schema), name


# Values no lenient reading accepts (pydantic takes "yes" for true and "10" for 10, and so do we).
WRONG = {"string": 12345, "integer": "ten", "number": "ten", "boolean": "maybe", "array": "not a list", "object": "not an object"}
WANTED = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "true or false",
          "array": "a list of", "object": "an object"}


def cases(tools):
    """(tool, arguments, words the error must contain) for each way to get every tool wrong."""
    for name, tool in tools.items():
        schema = tool.input_schema
        properties, required = schema["properties"], schema.get("required", [])
        minimal = {key: valid(properties[key]) for key in required}
        yield name, {**minimal, "bogus_argument": 1}, [f"{name}: unknown argument 'bogus_argument'", "the arguments are"]
        for key in required:
            yield name, {k: v for k, v in minimal.items() if k != key}, [f"{name}: '{key}' is required", "Pass "]
        for key, sub in properties.items():
            if "enum" in sub:
                yield name, {**minimal, key: "sideways"}, [f"{name}: {key} must be {' or '.join(map(repr, sub['enum']))}", "got 'sideways'"]
            elif sub.get("type") in WRONG:
                wrong = WRONG[sub["type"]]
                yield name, {**minimal, key: wrong}, [f"{name}: {key} must be {WANTED[sub['type']]}", f"got {json.dumps(wrong)}"]


def valid(schema):
    if "enum" in schema:
        return schema["enum"][0]
    return {"string": "wd:Q5582", "integer": schema.get("minimum", 1), "boolean": False, "number": 1,
            "array": [], "object": {}}[schema["type"]]


async def call_all(server, calls):
    async with Client(server) as client:
        return [await client.call_tool(name, arguments) for name, arguments in calls]


def test_every_tool_answers_bad_arguments_in_our_words(server, tools):
    wanted = list(cases(tools))
    assert {name for name, _, _ in wanted} == set(tools)
    results = asyncio.run(call_all(server, [(name, arguments) for name, arguments, _ in wanted]))
    for (name, arguments, words), result in zip(wanted, results):
        text = result.content[0].text
        assert result.is_error, (name, arguments, text)
        for word in words:
            assert word.replace('"', "'") in text.replace('"', "'"), (name, arguments, text)
        assert not any(bad in text for bad in LIBRARY_TEXT), text


def test_nested_errors_name_the_place(server):
    calls = [
        ("verify", {"claims": [{"subject": "wd:Q5582"}]}),
        ("verify", {"claims": [{"path": []}]}),
        ("verify", {"claims": [{"path": [{"subject": 1, "relation": "wdt:P31", "object": "wd:Q5"}]}]}),
        ("search", {"entity": "wd:Q5582", "direction": "sideways"}),
    ]
    texts = [r.content[0].text for r in asyncio.run(call_all(server, calls))]
    assert texts == [
        "verify: claims[0]: 'relation' and 'object' are required. Pass subject (a string), relation (a string), object (a string).",
        "verify: claims[0].path must have at least 1 item, got 0.",
        "verify: claims[0].path[0].subject must be a string, got 1.",
        "search: direction must be 'outgoing' or 'incoming', got 'sideways'.",
    ]


def test_null_for_an_optional_argument_means_left_out(server):
    # What a client that followed the old nullable schema sends, and what OpenAI strict mode sends.
    calls = [("search", {"entity": "wd:Q5582", "properties_to_filter_for": None, "direction": None}),
             ("search", {"entity": "wd:Q5582"}), ("get_relations", {"entity": None}), ("search", {"entity": None})]
    with_null, without, required_null, no_entity = asyncio.run(call_all(server, calls))
    assert not with_null.is_error and with_null.content[0].text == without.content[0].text
    assert required_null.is_error and required_null.content[0].text == "get_relations: entity must be a string, got null."
    # search's entity may be left out for entities (the batched form), so null reads as neither given
    assert no_entity.is_error and "Pass entity (one id or label) or entities" in no_entity.content[0].text
