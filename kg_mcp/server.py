"""The MCP server: the KG tools over one backend, with instructions, resources and prompts.

`build_server` makes the server object (used in-process by tests and agents); kg_mcp.serving runs
it over stdio, streamable HTTP or SSE. Logs go to stderr: stdout belongs to the stdio protocol.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

import anyio

from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from pydantic import ValidationError

from kg_mcp import __version__
from kg_mcp.arguments import ArgumentError, ToolArguments, usage
from kg_mcp.backends import Backend
from kg_mcp.caller import caller_of, calling_as
from kg_mcp.prompt_files import PromptFile, mcp_prompts
from kg_mcp.quoting import quoted
from kg_mcp.schema_summary import schema_document, server_instructions
from kg_mcp.serving.auth import StaticTokenVerifier
from kg_mcp.settings import Settings
from kg_mcp.state import SharedState
from kg_mcp.tools import OUTPUT_MODELS, register_tools

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
        """The call, served as its caller's (kg_mcp.caller: the lanes and traversal trees are per
        caller), its arguments checked first: an unknown or oversized one is refused at once."""
        checks = self.arguments(name)
        with calling_as(caller_of(_transport_request(context))):
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

    def arguments(self, name: str) -> ToolArguments:
        """The tool's published schema and checker, made once per registration."""
        # The tool manager is the SDK's registry of record (its own _tool_input_schema reads it too).
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            known = ", ".join(t.name for t in self._tool_manager.list_tools())
            raise ToolError(f"Unknown tool: {quoted(name)}. The tools are: {known}.")
        if name not in self._arguments or self._arguments[name][0] is not tool:
            self._arguments[name] = (tool, ToolArguments(name, tool.parameters))
        return self._arguments[name][1]


def _transport_request(context):
    """The HTTP request (Starlette's) behind a call, or None (stdio, in-process, no context)."""
    try:
        return context.request_context.request if context is not None else None
    except ValueError:  # a Context made outside a request
        return None


def build_server(
    backend: Backend,
    settings: Settings | None = None,
    *,
    auth_token: str | None = None,
    public_url: str = "http://127.0.0.1:8000",
    shared: SharedState | None = None,
) -> KGServer:
    """An MCP server exposing the KG tools over `backend` (bearer auth on HTTP if a token is given);
    `shared` holds what outlives a call (kg_mcp.state: this process by default, or Redis)."""
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
        **auth,
    )
    register_tools(server, backend, settings, shared)
    _add_resources(server, backend, settings)
    for prompt in mcp_prompts():
        server.add_prompt(_as_mcp_prompt(prompt))
    return server


# How long an endpoint's resources are kept: its data may change (a local store is read-only while served).
ENDPOINT_RESOURCE_AGE_S = 600.0


def _add_resources(server: MCPServer, backend: Backend, settings: Settings) -> None:
    """The KG's resources, each computed once (off the event loop) and then read for nothing: a local
    store cannot change while served; an endpoint's are computed again at most every 10 minutes."""
    max_age = None if backend.kind == "oxigraph" else ENDPOINT_RESOURCE_AGE_S

    def resource(uri: str, name: str, description: str):
        def register(compute: Callable[[], str]) -> None:
            server.resource(uri, name=name, description=description, mime_type="application/json")(Computed(compute, max_age).read)

        return register

    @resource("kg://profile", "profile", "The KG's schema profile and prefixes (cheap).")
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

    @resource("kg://schema", "schema", "Prefixes, the most used relations of the KG with their triples, and its hubs.")
    def schema() -> str:
        return json.dumps(schema_document(backend, settings), indent=1)

    @resource("kg://output-schemas", "output-schemas", "JSON Schemas of each tool's structured content.")
    def output_schemas() -> str:
        return json.dumps({name: model.model_json_schema() for name, model in OUTPUT_MODELS.items()})

    @resource("kg://stats", "stats", "Size of the KG: triples, entities, relations.")
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


class Computed:
    """A resource's text, computed on a worker thread at its first read (one computation however
    many read at once) and kept: for good (`max_age_s` None) or for `max_age_s` seconds."""

    def __init__(self, compute: Callable[[], str], max_age_s: float | None):
        self.compute = compute
        self.max_age_s = max_age_s
        self._text: str | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    async def read(self) -> str:
        text = self._fresh()
        if text is not None:
            return text
        return await anyio.to_thread.run_sync(self._computed)

    def _fresh(self) -> str | None:
        if self._text is None or (self.max_age_s is not None and time.monotonic() - self._at > self.max_age_s):
            return None
        return self._text

    def _computed(self) -> str:
        with self._lock:  # the reads that came meanwhile wait here, then take the text just made
            text = self._fresh()
            if text is None:
                text = self._text = self.compute()
                self._at = time.monotonic()
            return text


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
