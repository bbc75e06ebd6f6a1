"""The KG tools, registered with an MCP server in one place.

Each tool is a plain function of (backend, settings, arguments) in its own module, tested
directly against real stores. Here they get their MCP signatures (type hints become the input
schema, validated before they run), read-only annotations, and the translation of KG errors into
tool errors that tell the model how to fix the call.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from functools import partial
from typing import Annotated, Literal

import anyio
from anyio.lowlevel import RunVar
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, SecretStr

from kg_mcp.calls import deadline
from kg_mcp.backends import Backend, graph_access
from kg_mcp.calls.caller import current as current_caller
from kg_mcp.errors import KGError
from kg_mcp.observability import metrics
from kg_mcp.kg_reasoner import ranker_from_env
from kg_mcp.settings import Settings, sparql_offered
from kg_mcp.state import SharedState, SharedStateError
from kg_mcp.state.memory import InProcessState
from kg_mcp.tools._render import ToolOutput, bounded_data
from kg_mcp.tools.find_entities import FindResult, find_entities
from kg_mcp.tools.lanes import Busy, Lane
from kg_mcp.tools.follow import FollowResult, follow
from kg_mcp.tools.relations import ExploreResult, RelationsResult, explore_kg, get_relations
from kg_mcp.tools.search import SearchResult, search
from kg_mcp.tools.search_batch import BatchExploreResult, BatchSearchResult
from kg_mcp.tools.sparql import SparqlResult, sparql, sparql_description
from kg_mcp.tools.traverse import DEFAULT_TOP_K, MAX_TOP_K, TraverseResult, kgr_search, traversal_key
from kg_mcp.tools.verify import PathClaim, TripleClaim, VerifyResult, verify
from kg_mcp.view import VIEW_META

log = logging.getLogger(__name__)

__all__ = ["register_tools", "search", "follow", "get_relations", "explore_kg", "verify", "find_entities", "sparql", "ToolOutput"]

Entity = Annotated[
    str,
    Field(description="Entity id as the tools show it (e.g. wd:Q42, kg:Steven_Spielberg, m.0v1xv) or its exact label."),
]

Entities = Annotated[
    list[str],
    Field(description="Several entities in one call instead of entity: one table with an entity column."),
]

Cursor = Annotated[
    str,
    Field(description="The next_cursor of the call before (same arguments otherwise), to read its next page."),
]

AnonymousRows = Annotated[
    Literal["summary", "list"],
    Field(description='"summary" (the default): named rows listed, blank nodes (OWL restrictions, SHACL shapes, '
          'lists) counted by kind in one line; "list": blank nodes listed too, with their content.'),
]


# The structured content of each tool, described by its model. The schemas are offered as the
# resource kg://output-schemas rather than as each tool's outputSchema: the SDK client checks
# every result against an advertised schema in pure Python, several milliseconds per call.
OUTPUT_MODELS = {
    "search": SearchResult,
    "search (entities)": BatchSearchResult,  # the batched form's structured content
    "follow": FollowResult,
    "get_relations": RelationsResult,
    "explore_kg": ExploreResult,
    "explore_kg (entities)": BatchExploreResult,
    "verify": VerifyResult,
    "find_entities": FindResult,
    "kgr_search": TraverseResult,
    "sparql": SparqlResult,
}


# A call that may read more rows than this (with their labels) is a long one: tens of milliseconds
# on a hub, too long to hold the event loop (see the lanes in register_tools).
LIGHT_ROWS = 200
PLACE_POLL_S = 0.05  # how often a long call waiting for its caller's place on another replica looks again
PLACE_LEASE_S = 5.0  # a long call's place outlives its replica this long (renewed while the call runs)


def register_tools(server: MCPServer, backend: Backend, settings: Settings, shared: SharedState | None = None) -> None:
    """Add the KG tools over `backend` to `server` (`sparql` where kg_mcp.settings.sparql_offered); state that
    outlives a call (kgr_search's traversals) lives in `shared` (kg_mcp.state; this process by default)."""
    annotations = ToolAnnotations(
        read_only_hint=True,
        destructive_hint=False,
        idempotent_hint=True,
        open_world_hint=backend.kind == "remote",
    )

    # Where calls run. On a local store the ordinary one-entity tools run on the event loop when they
    # read at most LIGHT_ROWS rows: their queries take well under a millisecond, less than the two
    # hand-offs of a thread (each a wake-up that waits for a free core on a busy machine). Every
    # other call runs on a thread, in one of three lanes (kg_mcp.tools.lanes), each with its own
    # places and threads and each fair between callers (kg_mcp.calls.caller: the signed-in subject, else
    # the address): "long" for calls whose work grows with their arguments (verify, follow,
    # kgr_search, batches); "sparql" for the sparql tool (on a local store as many places as query
    # workers, so one caller holds at most one worker); "short" for the rest (every call that waits
    # on an endpoint, name lookups). A burst can then neither stall the event loop (every other
    # client's calls, even a 401) nor take every thread, nor keep another caller from its turn.
    # Every call has a deadline (kg_mcp.calls.deadline) from the moment it arrives: its loops stop past
    # it, and a call that cannot get a place in time is told the server is busy.
    # Where state that outlives a call lives (kg_mcp.state): kgr_search's trees, and with Redis the
    # caller's long calls across every replica, so that its share holds on the team's servers together.
    shared = shared or InProcessState()
    # Replicas sign listing cursors with one key, so any of them reads on a page another issued.
    if not settings.cursor_key.get_secret_value() and shared.between_processes:
        if secret := shared.shared_secret("cursor-key"):
            settings = settings.model_copy(update={"cursor_key": SecretStr(secret)})
        else:
            log.warning("the shared store did not answer: this replica signs cursors with a key of its own, so a "
                        "page it issues is read on only here (set KG_MCP_CURSOR_KEY to share one)")

    local = backend.kind == "oxigraph"
    share = max(1, settings.heavy_calls // 2)
    sparql_places = settings.query_workers if local else settings.sparql_calls
    lanes = {
        "long": _lane_of_loop("long calls", settings.heavy_calls, share, settings),
        "sparql": _lane_of_loop("sparql queries", sparql_places, 1, settings),
        "short": _lane_of_loop("calls", settings.short_calls, max(1, settings.short_calls // 4), settings),
    }

    async def place_across_replicas(caller: str) -> str | None:
        """One of the caller's `share` long-call places over all replicas, waited for until the
        deadline; None when the state is this process's (the lane's share is all there is) or Redis
        does not answer (each replica's share holds meanwhile)."""
        if not shared.between_processes:
            return None
        while True:
            try:
                token = await anyio.to_thread.run_sync(
                    partial(shared.take_place, "long", caller, share, PLACE_LEASE_S, renewed=True))
            except SharedStateError:
                return None
            if token is not None:
                return token
            if (deadline.left() or 0) <= PLACE_POLL_S:
                raise Busy(f"Busy: you already have {share} long call(s) running on this team's servers, the most "
                           "one client may at once. Retry once one of them has finished.")
            await anyio.sleep(PLACE_POLL_S)

    # Long calls in worker processes (kg_mcp.tools.processes) when settings.worker_processes says so.
    pool = None
    if settings.worker_processes and local and getattr(backend, "path", None):
        if not settings.cursor_key.get_secret_value():  # the workers sign the cursors the server reads, and back
            settings = settings.model_copy(update={"cursor_key": SecretStr(secrets.token_urlsafe(32))})
        from kg_mcp.tools.processes import WorkerPool

        pool = WorkerPool(backend.path, backend.profile.name, settings, settings.worker_processes)

    def call(tool: Callable[..., ToolOutput], *args, in_worker: bool = False) -> CallToolResult:
        try:
            with deadline.within(settings.tool_timeout_s):
                if in_worker and pool is not None and tool.__name__ in pool.TOOLS:
                    out, _ = pool.run(tool.__name__, args)
                else:
                    out = tool(backend, settings, *args)
        except KGError as error:
            raise ToolError(str(error)) from None
        data = out.data.model_dump(mode="json")
        # A listing's page holds as many rows as its text, within the budget (kg_mcp.tools.pages);
        # any other result is held to the budget here.
        if "next_cursor" not in data:
            data = bounded_data(data, out.limit_chars or settings.max_output_chars)
        return CallToolResult(content=[TextContent(type="text", text=out.text)], structured_content=data)

    async def run(tool: Callable[..., ToolOutput], *args, lane: str | None = None) -> CallToolResult:
        """`tool` in its lane (None: a light call, on the event loop on a local store, else a short one)."""
        with deadline.within(settings.tool_timeout_s):
            if lane is None:
                if local:
                    return call(tool, *args)
                lane = "short"
            chosen = lanes[lane]()
            if lane == "long":
                metrics.watch_long_calls(chosen)
            # Long calls go to the worker processes when there are some (kg_mcp.tools.processes).
            fn = partial(call, in_worker=True) if lane == "long" else call
            caller, place = current_caller().key, None
            try:
                if lane == "long":
                    place = await place_across_replicas(caller)
                return await chosen.run_sync(caller, deadline.left(), fn, tool, *args)
            except Busy as busy:
                raise ToolError(str(busy)) from None
            finally:
                if place is not None:
                    with anyio.CancelScope(shield=True):
                        await anyio.to_thread.run_sync(shared.give_back_place, "long", caller, place)

    @server.tool(name="search", annotations=annotations, meta=VIEW_META)
    async def search_tool(
        entity: Entity = "",
        direction: Annotated[
            Literal["outgoing", "incoming"],
            Field(description="outgoing: the entity is the subject; incoming: the entity is the object."),
        ] = "outgoing",
        properties_to_filter_for: Annotated[
            list[str],
            Field(description="Only these properties (ids or labels as listed by an earlier search)."),
        ] = [],
        limit: Annotated[
            int, Field(ge=0, description="Most rows a page holds, when you need only some (0: the default, up to 1000).")
        ] = 0,
        entities: Entities = [],
        anonymous: AnonymousRows = "summary",
        cursor: Cursor = "",
    ) -> CallToolResult:
        """One-hop neighbours of an entity in one direction, as property | propertyLabel | value | valueLabel rows.

        When there are more rows than fit and no filter is given, only the properties (with row
        counts) are listed: call again with properties_to_filter_for. Rows come in pages: when
        more remain, the last line (and next_cursor) gives the cursor that reads on. Literal values
        (dates, numbers, strings) have an empty label; a long one is cut, ending in …[N of M chars],
        and a search filtered to that one property gives it whole. Blank nodes (SHACL shapes, OWL
        restrictions, lists) are counted by kind in one line; with anonymous="list" they are
        listed, their content in valueLabel, [ p v ; ... ] or ( a b c ); a _: handle works in
        every tool.

        To read the same properties of several entities (every film of a director), pass them
        all in entities: one call instead of one per entity. limit caps the rows when a few will
        do. For a chain of relations whose intermediate rows you do not need, use follow.
        """
        rows = (limit or settings.search_p) if properties_to_filter_for else settings.search_k + 1
        heavy = bool(entities) or rows > LIGHT_ROWS
        return await run(search, entity, direction, properties_to_filter_for, limit, entities, anonymous, cursor,
                         lane="long" if heavy else None)

    @server.tool(name="follow", annotations=annotations, meta=VIEW_META)
    async def follow_tool(
        entity: Entity = "",
        path: Annotated[
            list[str],
            Field(
                description="Relations to walk in order, ids or labels as search shows them; ~rel walks backwards; "
                "rel+ repeats it one or more times, rel* zero or more (e.g. rdfs:subClassOf+, ~skos:broader*)."
            ),
        ] = [],
        entities: Annotated[list[str], Field(description="Several start entities instead of entity.")] = [],
        paths: Annotated[
            list[list[str]],
            Field(
                description="Instead of entity and path: several paths, each [start entity, relation, ...]; "
                "the entities every path reaches are returned (an intersection)."
            ),
        ] = [],
        limit: Annotated[int, Field(ge=0, description="Most end entities a page lists (0: the default, 200).")] = 0,
        exclude_through: Annotated[
            Literal["start", "none"],
            Field(
                description='"start" (the default): leave out paths that pass back through a start entity, so the '
                "start is never an answer and neither is an entity reached only through it; \"none\": keep every path."
            ),
        ] = "start",
        exclude: Annotated[
            list[str],
            Field(description="Entities (ids or exact labels) whose paths are left out too, as the start's are."),
        ] = [],
        anonymous: AnonymousRows = "summary",
        cursor: Cursor = "",
    ) -> CallToolResult:
        """Walk a chain of relations from an entity and list the entities at the end, with how many paths reach each.

        Use it once you know the relations (from search): "genres of films directed by X's
        director" is follow(entity=X, path=["directed_by", "~directed_by", "has_genre"]), one
        call instead of a search per film. The size of each hop is reported; a hop that reaches
        too many entities stops the walk and says where. For "which A is both B and C", pass
        paths=[[B, rel...], [C, rel...]]: only entities reached by every path are returned.

        A step written rel+ (one or more) or rel* (zero or more) walks a hierarchy to any depth, as
        in SPARQL: every superclass is follow(entity=X, path=["rdfs:subClassOf+"]), every subclass
        path=["~rdfs:subClassOf+"]; the new entities at each depth are counted. Blank nodes (SHACL
        shapes, OWL restrictions, RDF lists) are walked through like any node: a SHACL shape's
        classes are path=["sh:property", "sh:class"]. Reached as end entities, they are counted by
        kind in one line (anonymous="list" lists them). End entities come in pages: when more
        remain, the last line (and next_cursor) gives the cursor that reads on.

        Paths back through the start are left out by default: "directors of the films written by
        the writer of X" lists the directors of the writer's *other* films, not X's own director
        unless another film reaches them too. The output says how much that shrank each hop and
        names the end entities reached only that way; exclude_through="none" keeps them.
        """
        return await run(follow, entity, path, entities, paths, limit, exclude_through, exclude, anonymous, cursor,
                         lane="long")

    @server.tool(name="get_relations", annotations=annotations, meta=VIEW_META)
    async def get_relations_tool(entity: Entity, cursor: Cursor = "") -> CallToolResult:
        """Every relation around an entity with its number of triples: outgoing as rel, incoming as ~rel."""
        return await run(get_relations, entity, cursor)

    @server.tool(name="explore_kg", annotations=annotations, meta=VIEW_META)
    async def explore_kg_tool(
        entity: Entity = "",
        relations: Annotated[
            list[str],
            Field(description="Relations from get_relations; ~rel walks backwards (entities whose rel points here)."),
        ] = [],
        entities: Entities = [],
        limit: Annotated[int, Field(ge=0, description="Most triples of each relation a page holds (0: the default, 100).")] = 0,
        anonymous: AnonymousRows = "summary",
        cursor: Cursor = "",
    ) -> CallToolResult:
        """The entities linked to an entity by the chosen relations, with labels, each relation's count told.

        Pass several entities in entities to walk the same relations from all of them in one call.
        A page holds the same rows of every relation; when more remain, the last line (and
        next_cursor) gives the cursor that reads on. Blank nodes are counted by kind in one line
        (anonymous="list" lists them).
        """
        heavy = bool(entities) or len(relations) * (limit or settings.explore_limit) > LIGHT_ROWS
        return await run(explore_kg, entity, relations, entities, limit, anonymous, cursor, lane="long" if heavy else None)

    @server.tool(name="verify", annotations=annotations)
    async def verify_tool(
        claims: Annotated[
            list[TripleClaim | PathClaim],
            Field(description="Triples {subject, relation, object} or paths {path: [triples...]}."),
        ],
    ) -> CallToolResult:
        """Check claimed facts against the KG: supported (stated, or entailed through RDFS/OWL, with the chain),
        conflicting (what the KG says instead), not_found or unknown_entity."""
        return await run(verify, claims, lane="long")

    @server.tool(name="find_entities", annotations=annotations)
    async def find_entities_tool(
        name: Annotated[str, Field(description="A name to look up, e.g. 'Catch Me If You Can'.")],
        limit: Annotated[int, Field(ge=1, le=50, description="Most entities to return.")] = 10,
    ) -> CallToolResult:
        """Entities by name, as people type it: exact label first, then aliases, all words in any order and near
        spellings (typos). Rows give id, label, description, degree and how each matched."""
        # A typo search reads many name rows: on a thread, off the event loop.
        return await run(find_entities, name, limit, lane="short")

    # KG-Reasoner's retrieval keeps a traversal tree per session (see kg_mcp/kg_reasoner/traversal.py), so it
    # is not idempotent: the same call after a backtrack lands elsewhere.
    ranker = ranker_from_env()

    @server.tool(
        name="kgr_search",
        annotations=annotations.model_copy(update={"idempotent_hint": False}),
        meta=VIEW_META,
    )
    async def kgr_search_tool(
        ctx: Context,
        entity: Annotated[
            str | None,
            Field(description="The entity to search (id or exact label). Leave out with backtrack=true."),
        ] = None,
        question: Annotated[
            str | None,
            Field(description="The question being answered: ranks the triples; a new question starts a new traversal."),
        ] = None,
        backtrack: Annotated[
            bool,
            Field(description="Leave the current entity for its parent and explore the parent's next-best unexplored neighbour."),
        ] = False,
        session: Annotated[
            str | None,
            Field(description="A traversal id of your choosing, one per question (needed over stateless HTTP to backtrack)."),
        ] = None,
        top_k: Annotated[int, Field(ge=1, le=MAX_TOP_K, description="Most triples a page holds.")] = DEFAULT_TOP_K,
        anonymous: AnonymousRows = "summary",
        cursor: Annotated[str, Field(description="The next_cursor of an earlier page of this entity's triples.")] = "",
    ) -> CallToolResult:
        """Triples around an entity (both directions), ranked by relevance to the question, top k.

        Every search extends a traversal tree (which entity was reached from which). With
        backtrack=true the search returns to the parent of the current entity and explores its
        next-best unexplored neighbour, climbing further up while a parent has none left, up to the
        topic entity.
        """
        caller = current_caller().key
        key = traversal_key(session, ctx.headers, caller)
        if key is not None and (graphs := graph_access.cache_key()):
            key = f"{key}|graphs:{graphs}"  # a tree holds what one graph set showed: never read through another
        # A proxy's retry of this very request (the answer was lost with a replica) carries the same id.
        request_id = next((v for k, v in (ctx.headers or {}).items() if k.lower() == "x-request-id"), None)

        def search_tree(backend, settings, *args) -> ToolOutput:
            with shared.checkout(key, question, request_id, caller) as taken:
                if taken.replayed is not None:
                    return ToolOutput(taken.replayed["text"], TraverseResult.model_validate(taken.replayed["data"]))
                if pool is not None:
                    with taken.tree.lock:  # one step at a time on a tree, as kgr_search itself holds it
                        out, moved = pool.run("kgr_search", args, taken.tree)
                    taken.tree = moved
                else:
                    out = kgr_search(backend, settings, taken.tree, ranker, *args)
                taken.answer = {"text": out.text, "data": out.data.model_dump(mode="json")}
                return out

        return await run(search_tree, entity, backtrack, top_k, anonymous, cursor, lane="long")

    if sparql_offered(settings.sparql_tool):

        @server.tool(name="sparql", annotations=annotations, description=sparql_description(backend))
        async def sparql_tool(
            query: Annotated[
                str, Field(description="A SPARQL SELECT or ASK query; ids as the tools print them (prefixes declared).")
            ],
            cursor: Annotated[
                str, Field(description="The next_cursor of this query's previous page: reads on from there.")
            ] = "",
        ) -> CallToolResult:
            return await run(sparql, query, cursor, lane="sparql")


def _lane_of_loop(what: str, places: int, share: int, settings: Settings) -> Callable[[], Lane]:
    """A getter of this lane for the running event loop (made on first use: a lane belongs to one loop)."""
    var: RunVar[Lane] = RunVar(f"kg_mcp_lane_{what}")

    def lane() -> Lane:
        try:
            return var.get()
        except LookupError:
            made = Lane(what, places, share, queue_per_caller=settings.queued_calls_per_caller,
                        queue_total=settings.queued_calls)
            var.set(made)
            return made

    return lane
