"""The MCP server: the KG tools over one backend, with instructions, resources and prompts.

`build_server` makes the server object (used in-process by tests and agents); kg_mcp.serving runs
it over stdio, streamable HTTP or SSE. Logs go to stderr: stdout belongs to the stdio protocol.
"""

from __future__ import annotations

import json
import logging

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError

from kg_mcp import __version__
from kg_mcp.arguments import ArgumentError, ToolArguments, usage
from kg_mcp.backends import Backend
from kg_mcp.prompt_files import PromptFile, mcp_prompts
from kg_mcp.protocol import add_protocol
from kg_mcp.quoting import quoted
from kg_mcp.schema_summary import schema_document, server_instructions
from kg_mcp.serving.auth import StaticTokenVerifier
from kg_mcp.settings import Settings
from kg_mcp.tools import OUTPUT_MODELS, register_tools
from kg_mcp.view import graph_view

log = logging.getLogger(__name__)


class KGServer(MCPServer):
    """MCPServer whose tools publish portable input schemas (kg_mcp.arguments) and answer a bad
    call with an error in our words, for every registered tool, before the SDK validates it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._arguments: dict[str, tuple[object, ToolArguments]] = {}
        self._header_schemas: dict[str, tuple[object, dict | None]] = {}

    async def list_tools(self):
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema = self.arguments(tool.name).schema
        return tools

    async def call_tool(self, name, arguments, context=None):
        checks = self.arguments(name)
        try:
            arguments = checks.prepare(arguments)
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as error:
                if not isinstance(error.__cause__, ValidationError) or isinstance(error, UnexpectedToolError):
                    raise
            # The SDK refused the arguments (pydantic's words): say what is wrong in ours.
            checks.explain(arguments)
            raise ToolError(f"{name}: the arguments do not fit. {usage(checks.schema)}")
        except ArgumentError as error:
            raise ToolError(str(error)) from None

    def _tool_input_schema(self, name: str) -> dict | None:
        """The schema the SDK checks a call's Mcp-Param-* headers against over HTTP, or None when it
        declares no such header (nothing to check, the SDK's own reading of None). The SDK would
        otherwise walk the whole schema twice on every call to find none; this looks once per tool."""
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return None
        known = self._header_schemas.get(name)
        if known is None or known[0] is not tool:
            schema = tool.parameters
            declared = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
            known = self._header_schemas[name] = (tool, schema if declared else None)
        return known[1]

    async def get_prompt(self, name, arguments=None, context=None):
        """prompts/get; an unknown prompt or a missing or unknown argument is the spec's -32602, in our words."""
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts())
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {quoted(name)}. The prompts are: {known}.")
        expected = {a.name: a.required for a in prompt.arguments or []}
        given = arguments or {}
        missing = [a for a, required in expected.items() if required and a not in given]
        unknown = [a for a in given if a not in expected]
        if missing or unknown:
            problem = f"missing {', '.join(missing)}" if missing else f"no argument {', '.join(map(quoted, unknown))}"
            raise MCPError(INVALID_PARAMS, f"Prompt {name}: {problem}. Its arguments are: {', '.join(expected) or 'none'}.")
        return await super().get_prompt(name, arguments, context)

    def arguments(self, name: str) -> ToolArguments:
        """The tool's published schema and checker, made once per registration."""
        # The tool manager is the SDK's registry of record (its own _tool_input_schema reads it too).
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            # A protocol error, as the spec has it (a tool result is for a tool that ran).
            known = ", ".join(t.name for t in self._tool_manager.list_tools())
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {quoted(name)}. The tools are: {known}.")
        if name not in self._arguments or self._arguments[name][0] is not tool:
            self._arguments[name] = (tool, ToolArguments(name, tool.parameters))
        return self._arguments[name][1]


def build_server(
    backend: Backend,
    settings: Settings | None = None,
    *,
    auth_token: str | None = None,
    public_url: str = "http://127.0.0.1:8000",
) -> KGServer:
    """An MCP server exposing the KG tools over `backend` (bearer auth on HTTP if a token is given)."""
    settings = settings or Settings()
    auth = {}
    if auth_token:
        auth = {
            "token_verifier": StaticTokenVerifier(auth_token),
            "auth": AuthSettings(issuer_url=public_url, resource_server_url=None, validate_token_resource=False),
        }
    server = KGServer(
        "kg-mcp",
        title="Knowledge-graph tools",
        version=__version__,
        # The general guide, then this KG's size, ids, relations and hubs (kg_mcp.schema_summary).
        instructions=server_instructions(backend, settings),
        log_level="INFO",
        # MCP Apps: the navigation tools' results drawn as a graph (kg_mcp.view); additive.
        extensions=[graph_view()],
        **auth,
    )
    register_tools(server, backend, settings)
    _add_resources(server, backend, settings)
    prompts = mcp_prompts()
    for prompt in prompts:
        server.add_prompt(_as_mcp_prompt(prompt))
    # Entity cards, completions, progress and logs (kg_mcp.protocol).
    add_protocol(server, backend, settings, {p.name: p.arguments for p in prompts})
    return server


def _add_resources(server: MCPServer, backend: Backend, settings: Settings) -> None:
    @server.resource("kg://profile", name="profile", description="The KG's schema profile and prefixes (cheap).", mime_type="application/json")
    def profile() -> str:
        vocab = backend.vocab
        return json.dumps(
            {
                "profile": backend.profile.name,
                "prefixes": vocab.prefixes,
                "bare_namespaces": vocab.bare_namespaces,
                # "profile" unless the store, a --prefix setting or the endpoint (VoID, a sample) gave it
                "prefix_sources": {ns: vocab.sources.get(ns, "profile") for ns in [*vocab.prefixes.values(), *vocab.bare_namespaces]},
            }
        )

    @server.resource(
        "kg://schema",
        name="schema",
        description="Prefixes, the most used relations of the KG with their triples, and its hubs.",
        mime_type="application/json",
    )
    def schema() -> str:
        return json.dumps(schema_document(backend, settings), indent=1)

    @server.resource(
        "kg://output-schemas",
        name="output-schemas",
        description="JSON Schemas of each tool's structured content.",
        mime_type="application/json",
    )
    def output_schemas() -> str:
        return json.dumps({name: model.model_json_schema() for name, model in OUTPUT_MODELS.items()})

    @server.resource("kg://stats", name="stats", description="Size of the KG: triples, entities, relations.", mime_type="application/json")
    def stats() -> str:
        s = backend.stats()
        return json.dumps(
            {
                "kind": s.kind,
                "profile": s.profile,
                "triples": s.triples,
                "entities": s.entities,
                "relations": s.relations,
                "lower_bounds": s.bounded,  # true: each count is "at least" that many
                **s.details,
            },
            indent=1,
        )


def _as_mcp_prompt(prompt: PromptFile) -> Prompt:
    arguments = prompt.arguments

    def render(**values: str) -> str:
        return prompt.render(**values)

    # The SDK reads a prompt's arguments from its function signature: give it one per field.
    render.__signature__ = _signature(arguments)  # type: ignore[attr-defined]
    render.__annotations__ = {name: str for name in arguments} | {"return": str}
    return Prompt.from_function(render, name=prompt.name, description=prompt.description)


def _signature(names: list[str]):
    import inspect

    return inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=str) for n in names], return_annotation=str
    )
