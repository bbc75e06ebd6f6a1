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
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError

from kg_mcp import __version__
from kg_mcp.arguments import ArgumentError, ToolArguments, usage
from kg_mcp.backends import Backend, graph_access
from kg_mcp.backends.graph_access import GraphAccess, grant_sets
from kg_mcp.calls.caller import Caller, caller_of, calling_as
from kg_mcp.errors import ConfigError
from kg_mcp.prompt_files import PromptFile, mcp_prompts, read_prompt
from kg_mcp.protocol import add_protocol
from kg_mcp.quoting import quoted, shown_url
from kg_mcp.schema.summary import schema_document, server_instructions
from kg_mcp.serving.audit import AuditLog, Timer, rows_of
from kg_mcp.serving.auth import ServerAuth, server_auth
from kg_mcp.serving.scopes import TOOL_SCOPES, needed_for_tool, tool_allowed
from kg_mcp.settings import Settings, sparql_offered
from kg_mcp.state import SharedState
from kg_mcp.tools import OUTPUT_MODELS, register_tools
from kg_mcp.tools.sparql import examples as sparql_examples
from kg_mcp.view import graph_view

log = logging.getLogger(__name__)


class RefusedCall(ToolError):
    """A call refused before it ran (unknown tool, arguments that do not fit, a scope it lacks)."""


class KGServer(MCPServer):
    """MCPServer whose tools publish portable input schemas (kg_mcp.arguments) and answer a bad
    call with an error in our words, for every registered tool, before the SDK validates it."""

    serving_auth: ServerAuth | None = None
    audit: AuditLog | None = None
    graph_access: GraphAccess | None = None
    served_graphs: tuple[str, ...] = ()  # the graphs the backend reads (empty: the whole store or endpoint)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._arguments: dict[str, tuple[object, ToolArguments]] = {}
        self._header_schemas: dict[str, tuple[object, dict | None]] = {}

    async def list_tools(self):
        tools = [tool for tool in await super().list_tools() if tool_allowed(tool.name)]
        for tool in tools:
            tool.input_schema = self.arguments(tool.name).schema
        return tools

    async def call_tool(self, name, arguments, context=None):
        """The call, refused when the caller's token lacks the tool's scope, read through the caller's
        graphs (kg_mcp.backends.graph_access), and audited."""
        timer, outcome, result, graphs = Timer(), "refused", None, None
        try:
            if not tool_allowed(name):
                needed = " and ".join(needed_for_tool(name))
                raise RefusedCall(f"The {name} tool needs the scopes {needed}: ask for them when you sign in.")
            graphs = self.caller_graphs(RefusedCall)
            with graph_access.reading(graphs):
                result = await self._call_checked(name, arguments, context)
            outcome = "tool_error" if getattr(result, "is_error", False) else "ok"
            return result
        except RefusedCall:
            raise
        except ToolError:
            outcome = "tool_error"
            raise
        finally:
            if self.audit is not None:
                structured = getattr(result, "structured_content", None)
                self.audit.call(_caller(context), "tool", name, arguments, outcome, rows=rows_of(structured),
                                ms=timer.ms, graphs=graphs)

    async def read_resource(self, uri, context=None):
        timer, outcome, graphs = Timer(), "refused", None
        try:
            graphs = self.caller_graphs(ResourceError)
            outcome = "error"
            with graph_access.reading(graphs):
                found = await super().read_resource(uri, context)
            outcome = "ok"
            return found
        finally:
            if self.audit is not None:
                self.audit.call(_caller(context), "resource", str(uri), None, outcome, ms=timer.ms, graphs=graphs)

    async def get_prompt(self, name, arguments=None, context=None):
        """prompts/get, audited; an unknown prompt or a missing or unknown argument is the spec's -32602."""
        timer, outcome = Timer(), "error"
        try:
            self._check_prompt(name, arguments)
            found = await super().get_prompt(name, arguments, context)
            outcome = "ok"
            return found
        finally:
            if self.audit is not None:
                self.audit.call(_caller(context), "prompt", name, arguments, outcome, ms=timer.ms)

    def caller_graphs(self, refusal: type[Exception] = RefusedCall) -> frozenset[str] | None:
        """The graphs the caller of the request being served may read (None: all the server reads);
        `refusal` is raised, in our words, for a caller granted none."""
        if self.graph_access is None:
            return None
        token = get_access_token()
        if token is None:  # no sign-in: stdio or in-process use (an HTTP server with graph access has auth)
            return None
        graphs = self.graph_access.graphs_for(token.scopes, self.served_graphs)
        if graphs is not None and not graphs:
            # Named only where the public metadata names them (--metadata-scopes all).
            listed = self.serving_auth is None or set(self.graph_access.scopes) <= set(self.serving_auth.scopes_supported)
            ask = f"Its graph scopes are {', '.join(self.graph_access.scopes)}: ask" if listed else "Ask"
            raise refusal(
                f"Your sign-in grants no graph of this KG, so there is nothing to read. {ask} the server's operator "
                f"for one, then sign in again."
            )
        return graphs

    def _check_prompt(self, name: str, arguments: dict | None) -> None:
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

    async def _call_checked(self, name, arguments, context=None):
        """The call, served as its caller's (kg_mcp.calls.caller: the lanes and traversal trees are per
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
                raise RefusedCall(f"{name}: the arguments do not fit. {usage(checks.schema)}")
            except ArgumentError as error:
                raise RefusedCall(str(error)) from None

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
            # A protocol error, as the spec has it (a tool result is for a tool that ran).
            known = ", ".join(t.name for t in self._tool_manager.list_tools() if tool_allowed(t.name))
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {quoted(name)}. The tools are: {known}.")
        if name not in self._arguments or self._arguments[name][0] is not tool:
            self._arguments[name] = (tool, ToolArguments(name, tool.parameters))
        return self._arguments[name][1]


def _transport_request(context):
    """The HTTP request (Starlette's) behind a call, or None (stdio, in-process, no context)."""
    try:
        return context.request_context.request if context is not None else None
    except ValueError:  # a Context made outside a request
        return None


def _caller(context) -> Caller:
    """Who made the request `context` belongs to (the local client outside a request)."""
    return caller_of(_transport_request(context))


def build_server(
    backend: Backend,
    settings: Settings | None = None,
    *,
    auth_token: str | None = None,
    auth: ServerAuth | None = None,
    audit: AuditLog | None = None,
    graph_access: GraphAccess | None = None,
    shared: SharedState | None = None,
) -> KGServer:
    """An MCP server exposing the KG tools over `backend`. Over HTTP, callers are checked by `auth`
    (kg_mcp.serving.auth.server_auth: a shared token, named tokens, an OAuth issuer), or by the one
    `auth_token`; `audit` records every call; `graph_access` gives each caller its graphs; `shared`
    holds what outlives a call (kg_mcp.state: this process by default, or Redis)."""
    settings = settings or Settings()
    if graph_access is not None:
        _check_graphs_served(backend)
    if auth is None and auth_token:
        auth = server_auth(token=auth_token)
    sdk_auth = {"token_verifier": auth.verifier, "auth": auth.sdk_settings()} if auth else {}
    server = KGServer(
        "kg-mcp",
        title="Knowledge-graph tools",
        version=__version__,
        # The general guide, then this KG's size, ids, relations and hubs (kg_mcp.schema.summary).
        instructions=server_instructions(backend, settings),
        log_level="INFO",
        # MCP Apps: the navigation tools' results drawn as a graph (kg_mcp.view); additive.
        extensions=[graph_view()],
        **sdk_auth,
    )
    server.serving_auth = auth  # read by kg_mcp.serving when it builds the HTTP app
    server.audit = audit
    if graph_access is not None:
        _graphs_per_caller(server, backend, settings, graph_access)
    register_tools(server, backend, settings, shared)
    if auth is not None:
        auth.scoped_tools = frozenset(name for name in TOOL_SCOPES if server._tool_manager.get_tool(name))
    _add_resources(server, backend, settings, private=auth is not None)
    prompts = mcp_prompts()
    for prompt in prompts:
        server.add_prompt(_as_mcp_prompt(prompt))
    # Entity cards, completions, progress and logs (kg_mcp.protocol).
    add_protocol(server, backend, settings, {p.name: p.arguments for p in prompts})
    return server


def name_index_gaps_text(gaps: list[tuple[str, ...]], store_dir: str | None, access_file: str = "") -> str:
    """What the operator is told of graph sets without a name index (at start and in /readyz)."""
    sets = "; ".join(" + ".join(graphs) for graphs in gaps[:5]) + (f"; and {len(gaps) - 5} more" if len(gaps) > 5 else "")
    return (f"{len(gaps)} set(s) of graphs callers are granted have no name index ({sets}): their lookups match "
            f"labels by their first words only until it is built (in the background, where this server may write the "
            f"store's folder). Build them before serving: kg-mcp index --store {store_dir or 'DIR'} --graph-access "
            f"{access_file or 'FILE'}")


def _check_graphs_served(backend: Backend) -> None:
    """A store whose callers each read their graphs serves named graphs (kg_mcp.backends.open_store
    with named_graphs, as `kg-mcp serve --graph-access` opens it), never its default graph whole."""
    if backend.kind == "oxigraph" and not backend.served_graphs:
        raise ConfigError(
            "--graph-access gives each caller named graphs of the store: open it with its graphs (--graph IRI, or "
            "kg-mcp serve --graph-access, which serves every named graph), after loading each with "
            "`kg-mcp load FILE --store DIR --graph IRI`."
        )


def _graphs_per_caller(server: KGServer, backend: Backend, settings: Settings, access: GraphAccess) -> None:
    """Each caller reads the graphs its scopes grant (KGServer.caller_graphs), and its instructions
    summarise those graphs, computed when it initializes (the summary of each scope's graphs is taken
    now, so that most initializes find it ready, and so is a missing name index of a store's graphs)."""
    server.graph_access = access
    server.served_graphs = tuple(backend.served_graphs)
    try:
        granted = grant_sets(access, server.served_graphs)
    except ConfigError as too_many:  # served all the same: each set's index is built when first needed
        log.warning("%s", too_many)
        granted = [tuple(sorted(graphs)) for scope in access.scopes if (graphs := access.graphs_for([scope], server.served_graphs))]
    for graphs in granted:
        with graph_access.reading(graphs):
            backend.prepare_lookups()
    for scope in access.scopes:
        graphs = access.graphs_for([scope], server.served_graphs)
        if graphs:
            with graph_access.reading(graphs):
                server_instructions(backend, settings)
    gaps = getattr(backend, "name_index_gaps", list)()
    if gaps:
        log.warning("%s", name_index_gaps_text(gaps, getattr(backend, "path", None), access.source))
    lowlevel = server._lowlevel_server
    general = lowlevel.instructions

    def for_the_caller(_lowlevel) -> str | None:
        try:
            graphs = server.caller_graphs()
        except RefusedCall as refusal:
            return f"{read_prompt('server_instructions.md').template.rstrip()}\n\n{refusal}"
        if graphs is None:
            return general
        with graph_access.reading(graphs):
            return server_instructions(backend, settings)

    # The SDK reads `instructions` when it answers initialize (and server/discover), in the caller's
    # context: a property of this one server object computes them there.
    lowlevel.__class__ = type("KGLowLevelServer", (type(lowlevel),), {"instructions": property(for_the_caller)})


# How long an endpoint's resources are kept: its data may change (a local store is read-only while served).
ENDPOINT_RESOURCE_AGE_S = 600.0


def _add_resources(server: MCPServer, backend: Backend, settings: Settings, *, private: bool = False) -> None:
    """The KG's resources, each computed once (off the event loop) and then read for nothing: a local
    store cannot change while served; an endpoint's are computed again at most every 10 minutes.
    `private`: callers sign in, and are not told where on the server's disk its store is."""
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

    if sparql_offered(settings.sparql_tool):

        @resource("kg://examples", "examples",
                  "SPARQL queries written for this KG, each run before it is offered: a hierarchy at any depth, a "
                  "shape's constraints, a list's members, a count per class (those the KG has).")
        def query_examples() -> str:
            return json.dumps({"examples": sparql_examples(backend, settings)}, indent=1)

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
                **_shown_details(s.details, private),
            },
            indent=1,
        )


def _shown_details(details: dict, private: bool) -> dict:
    """A store's details as kg://stats shows them: an endpoint's URL without its password or query;
    where callers sign in, neither the store's place on disk nor the endpoint (an internal host)."""
    shown = {k: v for k, v in details.items() if not (private and k in ("location", "endpoint"))}
    if isinstance(shown.get("endpoint"), str):
        shown["endpoint"] = shown_url(shown["endpoint"])
    return shown


class Computed:
    """A resource's text, computed on a worker thread at its first read (one computation however
    many read at once) and kept: for good (`max_age_s` None) or for `max_age_s` seconds. One text
    per graph set (kg_mcp.backends.graph_access): a caller reads what its own graphs hold."""

    def __init__(self, compute: Callable[[], str], max_age_s: float | None):
        self.compute = compute
        self.max_age_s = max_age_s
        self._texts: dict[str, tuple[str, float]] = {}  # graph set -> (text, when it was made)
        self._lock = threading.Lock()

    async def read(self) -> str:
        text = self._fresh()
        if text is not None:
            return text
        return await anyio.to_thread.run_sync(self._computed)

    def _fresh(self) -> str | None:
        text, at = self._texts.get(graph_access.cache_key(), (None, 0.0))
        if text is None or (self.max_age_s is not None and time.monotonic() - at > self.max_age_s):
            return None
        return text

    def _computed(self) -> str:
        with self._lock:  # the reads that came meanwhile wait here, then take the text just made
            text = self._fresh()
            if text is None:
                text = self.compute()
                self._texts[graph_access.cache_key()] = (text, time.monotonic())
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
