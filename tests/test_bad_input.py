"""Bad and hostile input: every call gives a result or a clear tool error, and no query carries raw input.

The server is the real one (in-process MCP client); the backend is the real Oxigraph backend
over the MetaQA store, subclassed only to record the SPARQL it sends.
"""

from __future__ import annotations

import re

import pyoxigraph as ox
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from kg_mcp.backends import open_store
from kg_mcp.backends.oxigraph_store import OxigraphBackend
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

MARK = "INJECTED"
HOSTILE = [
    f'"}} ; {MARK} DROP ALL ; #',
    f"kg:x> ?p ?o }} {MARK} {{ <a",
    f"Steven Spielberg' }} UNION {{ ?s ?p ?o }} #{MARK}",
    f"kg:Tom_Hanks\n}} {MARK}",
    f"\\u0022 {MARK}",
    f"<http://example.org/a> . {MARK} <b>",
    f"{MARK}\x00",
    f"; DELETE WHERE {{ ?s ?p ?o }} {MARK}",
    f"~{MARK}}}",
    "",
    "   ",
    "x" * 5000,
    "ﬁnd ｍe  ＳｔｅｖｅｎＳｐｉｅｌｂｅｒｇ",  # unicode confusables
]

# Input may only appear inside a string literal or an IRI of the issued query.
_LITERAL_OR_IRI = re.compile(r'"(?:[^"\\]|\\.)*"|<[^<>"{}|^`\\\x00-\x20]*>')


class RecordingBackend(OxigraphBackend):
    """The real backend; it also keeps every query it runs."""

    def __init__(self, base: OxigraphBackend):
        super().__init__(base.store, base.profile, base.vocab, base.settings, location=base.location)
        self.queries: list[str] = []

    def _solutions(self, query):
        self.queries.append(query)
        return super()._solutions(query)


@pytest.fixture(scope="module")
def recorder(metaqa_store_dir):
    return RecordingBackend(open_store(metaqa_store_dir))


def _calls(payload: str) -> list[tuple[str, dict]]:
    return [
        ("search", {"entity": payload}),
        ("search", {"entity": "kg:Tom_Hanks", "properties_to_filter_for": [payload]}),
        ("search", {"entity": payload, "direction": "incoming"}),
        ("get_relations", {"entity": payload}),
        ("explore_kg", {"entity": "kg:Tom_Hanks", "relations": [payload]}),
        ("explore_kg", {"entity": payload, "relations": ["starred_actors"]}),
        ("verify", {"claims": [{"subject": payload, "relation": "directed_by", "object": payload}]}),
        ("verify", {"claims": [{"subject": "kg:Catch_Me_If_You_Can", "relation": "directed_by", "object": payload}]}),
        ("find_entities", {"name": payload}),
    ]


@pytest.mark.parametrize("payload", HOSTILE, ids=range(len(HOSTILE)))
async def test_hostile_arguments_get_results_or_tool_errors(recorder, payload):
    recorder.queries.clear()
    server = build_server(recorder, Settings())
    async with Client(server) as client:
        for tool, args in _calls(payload):
            result = await client.call_tool(tool, args)
            text = result.content[0].text
            assert "Traceback" not in text and "unexpected" not in text.lower(), (tool, args, text)
            if result.is_error:
                assert len(text) > 20, text  # a reason, not a bare failure
    for query in recorder.queries:
        ox.Store().query(query)  # every issued query is valid SPARQL (raises otherwise)
        outside = _LITERAL_OR_IRI.sub("", query)
        assert MARK not in outside, query


async def test_schema_violations_are_rejected_before_running(recorder):
    server = build_server(recorder, Settings())
    async with Client(server) as client:
        bad = [
            ("search", {"entity": "kg:Tom_Hanks", "direction": "sideways"}),
            ("search", {}),
            ("find_entities", {"name": "Tom", "limit": 10_000}),
            ("find_entities", {"name": "Tom", "limit": 0}),
            ("verify", {"claims": [{"subject": "a"}]}),
            ("explore_kg", {"entity": "kg:Tom_Hanks", "relations": "starred_actors"}),
        ]
        for tool, args in bad:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
        with pytest.raises(MCPError) as unknown:  # no such tool: a protocol error (-32602), not a result
            await client.call_tool("no_such_tool", {})
        assert unknown.value.error.code == INVALID_PARAMS


async def test_too_many_filters_or_relations(recorder):
    server = build_server(recorder, Settings())
    async with Client(server) as client:
        many = [f"r{i}" for i in range(500)]
        for tool, args in [
            ("search", {"entity": "kg:Tom_Hanks", "properties_to_filter_for": many}),
            ("explore_kg", {"entity": "kg:Tom_Hanks", "relations": many}),
            ("verify", {"claims": [{"subject": "a", "relation": "b", "object": "c"}] * 500}),
        ]:
            result = await client.call_tool(tool, args)
            assert result.is_error and "At most" in result.content[0].text
