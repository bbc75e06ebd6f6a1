"""`completion/complete`: the entity card's id from a typed name, and the prompts' text arguments.

The id of `kg://entity/{id}` is completed with the ids of the entities whose names fit what the
user typed, best first, from the same lookup as find_entities (the name index; an unfinished last
word counts as a prefix). A prompt's question or answer is completed at its end: the longest tail
of its words that begins an entity's name is finished with that name ("who directed Catch Me" ->
"who directed Catch Me If You Can").
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, Completion, PromptReference, ResourceTemplateReference

from kg_mcp.backends import Backend, graph_access
from kg_mcp.errors import KGError
from kg_mcp.names.fold import fold
from kg_mcp.protocol.entities import ENTITY_TEMPLATE
from kg_mcp.quoting import quoted

MAX_VALUES = 10
TAIL_WORDS = 4  # the most words at the end of a text that may be an unfinished name
MIN_CHARS = 2  # fewer typed characters complete to nothing: every name would fit


def complete_id(backend: Backend, typed: str) -> list[str]:
    """Ids (as the tools show them) of the entities whose names fit `typed`, best first."""
    typed = typed.strip()
    if len(typed) < MIN_CHARS:
        return []
    return list(dict.fromkeys(backend.vocab.compact(hit.node) for hit in backend.lookup(typed, MAX_VALUES).hits))


def complete_text(backend: Backend, typed: str) -> list[str]:
    """`typed` with the entity name it ends in finished, one value per fitting name."""
    words = typed.split(" ")
    for n in range(min(TAIL_WORDS, len(words)), 0, -1):
        tail = " ".join(words[-n:])
        if len(tail.strip()) < MIN_CHARS + 1:
            continue
        head = typed[: len(typed) - len(tail)]
        begun = fold(tail)
        names = [hit.label for hit in backend.lookup(tail, MAX_VALUES).hits if hit.label and len(hit.label) > len(tail)]
        finished = [head + name for name in names if fold(name).startswith(begun)]
        if finished:
            return list(dict.fromkeys(finished))
    return []


def add_completions(server: MCPServer, backend: Backend, prompt_arguments: dict[str, list[str]]) -> None:
    """Serve completion/complete for the entity template's id and every prompt argument."""

    @server.completion()
    async def complete(ref, argument, context) -> Completion:
        if isinstance(ref, ResourceTemplateReference):
            if ref.uri != ENTITY_TEMPLATE:
                raise MCPError(INVALID_PARAMS, f"No resource template {quoted(ref.uri)}; the one there is is {ENTITY_TEMPLATE}.")
            if argument.name != "id":
                raise MCPError(INVALID_PARAMS, f"{ENTITY_TEMPLATE} has one argument, id; not {quoted(argument.name)}.")
            how = complete_id
        elif isinstance(ref, PromptReference):
            if ref.name not in prompt_arguments:
                raise MCPError(INVALID_PARAMS, f"Unknown prompt: {quoted(ref.name)}. The prompts are: {', '.join(prompt_arguments)}.")
            if argument.name not in prompt_arguments[ref.name]:
                known = ", ".join(prompt_arguments[ref.name])
                raise MCPError(INVALID_PARAMS, f"The prompt {ref.name} has no argument {quoted(argument.name)}; it has: {known}.")
            how = complete_text
        else:
            raise MCPError(INVALID_PARAMS, "A completion refers to a prompt or a resource template.")
        try:
            # The caller's graphs only (kg_mcp.backends.graph_access), as its tool calls read them.
            graphs = server.caller_graphs(KGError) if hasattr(server, "caller_graphs") else None
            with graph_access.reading(graphs):
                # A lookup reads the name index, or asks an endpoint: off the event loop.
                values = await anyio.to_thread.run_sync(how, backend, argument.value)
        except KGError:
            values = []  # an endpoint that does not answer, or a caller granted no graph, completes nothing
        return Completion(values=values[:MAX_VALUES], total=len(values), has_more=False)
