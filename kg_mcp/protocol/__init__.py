"""What the server offers besides its tools' results: entity resources, completions, progress and logs.

- `kg://entity/{id}`, a resource template returning an entity's card (entities.py);
- `completion/complete` for its id and for the prompts' arguments (completion.py);
- a scope per request (requests.py): `notifications/progress` from the tools' long loops
  (kg_mcp.calls.progress) with cancellation honoured there, and the `kg_mcp` log records sent to the
  client at the levels it asked for (client_log.py, `logging/setLevel`).
"""

from __future__ import annotations

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.server.mcpserver.resources.templates import ResourceSecurity
from mcp.types import SetLevelRequestParams

from kg_mcp.calls import deadline
from kg_mcp.backends import Backend
from kg_mcp.errors import KGError, UnknownEntity
from kg_mcp.protocol import client_log, requests
from kg_mcp.protocol.completion import add_completions
from kg_mcp.protocol.entities import ENTITY_TEMPLATE, entity_card
from kg_mcp.settings import Settings

__all__ = ["add_protocol", "ENTITY_TEMPLATE", "entity_card"]


def add_protocol(server: MCPServer, backend: Backend, settings: Settings, prompt_arguments: dict[str, list[str]]) -> None:
    """Add the entity resources, completions, progress and logging to `server`."""

    # The id is an entity id or label, never a path: the resolver checks it, as the tools' do.
    @server.resource(
        ENTITY_TEMPLATE,
        name="entity",
        title="Entity card",
        description="An entity's label, description, types, relations with counts and first triples. "
        "id: as the tools show it (wd:Q42, kg:Steven_Spielberg, m.0v1xv), percent-encoded; completion offers ids from names.",
        mime_type="text/markdown",
        security=ResourceSecurity(exempt_params={"id"}),
    )
    async def entity(id: str) -> str:
        def card() -> str:
            with deadline.within(settings.tool_timeout_s):
                return entity_card(backend, settings, id)

        try:
            return await anyio.to_thread.run_sync(card)
        except UnknownEntity as error:
            raise ResourceNotFoundError(str(error)) from None
        except KGError as error:
            raise ResourceError(str(error)) from None

    add_completions(server, backend, prompt_arguments)
    # logging/setLevel has no MCPServer decorator (the 2026-07-28 revision drops it; the SDK's
    # runner still serves it on the handshake versions): registered on the low-level server.
    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, client_log.set_level)
    requests.install()
    server.middleware.append(requests.request_scope)
