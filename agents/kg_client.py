"""The drivers' only way to the KG: an MCP client of a kg-mcp server, wherever it runs.

`KGClient.connect(...)` opens a server in-process (a Backend or MCPServer), as a stdio
subprocess (a command line), or at an HTTP URL (with an optional bearer token).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from kg_mcp.agents.models.base import ToolSpec
from kg_mcp.schema.summary import summary_heading
from mcp import Client, StdioServerParameters


_SENTENCE_END = re.compile(r"(?<=[.;!?])\s+")


def without_mentions(text: str, tools: list[str]) -> str:
    r"""`text` without its sentences (or clauses between semicolons) that name one of `tools`; a line
    that names none is kept as it is, and a line left empty goes.

    >>> without_mentions("Rows of one hop. For a chain, use follow.", ["follow"])
    'Rows of one hop.'
    >>> without_mentions("Labels as search shows them; ~rel walks backwards.", ["search"])
    '~rel walks backwards.'
    >>> without_mentions("Relations:\n- `a`: 3\n- `b` makes a hierarchy: `follow` walks it.\n\nHubs.", ["follow"])
    'Relations:\n- `a`: 3\n\nHubs.'
    """
    if not tools:
        return text
    named = re.compile(r"\b(?:" + "|".join(map(re.escape, tools)) + r")\b")
    lines = []
    for line in text.split("\n"):
        if named.search(line):
            line = " ".join(s for s in _SENTENCE_END.split(line.strip()) if not named.search(s))
            if not line:
                continue
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n") + ("\n" if text.endswith("\n") else "")


def without_tools(spec: ToolSpec, tools: list[str]) -> ToolSpec:
    """`spec` with `without_mentions` applied to its description and every argument's."""

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(v) for v in node]
        if not isinstance(node, dict):
            return node
        out = {k: clean(v) for k, v in node.items()}
        if isinstance(node.get("description"), str):
            out["description"] = without_mentions(node["description"], tools)
        return out

    return ToolSpec(spec.name, without_mentions(spec.description, tools), clean(spec.input_schema))


@dataclass
class ToolResult:
    text: str
    data: dict[str, Any] | None
    is_error: bool
    seconds: float


MAX_PAGES = 50  # pages of one listing a driver reads at most (20,000 characters each by default)


async def read_pages(
    call: Callable[[str, dict[str, Any]], Awaitable[ToolResult]], name: str, arguments: dict[str, Any],
    *, max_pages: int = MAX_PAGES,
) -> list[ToolResult]:
    """The pages of one listing: the call, then the same call with the `next_cursor` each page's
    structured content gives, as a model reading its last line would; until the last page, an
    error or `max_pages`. `call` is KGClient.call_tool or a driver's traced call (Run.tool)."""
    pages = [await call(name, arguments)]
    while len(pages) < max_pages and not pages[-1].is_error and (pages[-1].data or {}).get("next_cursor"):
        pages.append(await call(name, {**arguments, "cursor": pages[-1].data["next_cursor"]}))
    return pages


@asynccontextmanager
async def _streamable_http(url: str, token: str | None):
    """The SDK's streamable HTTP transport with an HTTP client of its own, closed with it (the SDK
    leaves a client it is given open)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


class KGClient:
    """`async with KGClient(target) as kg: await kg.call_tool("search", {...})`."""

    def __init__(self, target: Any):
        self._target = target
        self._stack: AsyncExitStack | None = None
        self._client: Client | None = None
        self.tools: list[ToolSpec] = []
        self.instructions: str | None = None
        self.profile = "generic"  # the server's schema profile: wikidata, freebase, dbpedia, generic

    @classmethod
    def connect(
        cls,
        *,
        server: Any = None,
        command: str | None = None,
        url: str | None = None,
        token: str | None = None,
    ) -> KGClient:
        """A client for one of: an in-process server/backend, a stdio command, an HTTP URL."""
        if sum(x is not None for x in (server, command, url)) != 1:
            raise ValueError("give exactly one of server, command or url")
        if command is not None:
            program, *args = shlex.split(command)
            return cls(StdioServerParameters(command=program, args=args, env=dict(os.environ)))
        if url is not None:
            return cls(_streamable_http(url, token))
        from kg_mcp.backends.base import Backend

        if isinstance(server, Backend):
            from kg_mcp.server import build_server

            server = build_server(server, server.settings)
        return cls(server)

    async def __aenter__(self) -> KGClient:
        self._stack = AsyncExitStack()
        self._client = await self._stack.enter_async_context(Client(self._target))
        listed = await self._client.list_tools()
        self.tools = [ToolSpec(t.name, t.description or "", t.input_schema) for t in listed.tools]
        self.instructions = self._client.instructions
        profile = await self._client.read_resource("kg://profile")
        self.profile = json.loads(profile.contents[0].text).get("profile", "generic")
        return self

    @property
    def schema(self) -> str | None:
        """The server's summary of its KG (size, ids, relations, hubs): the part of its instructions
        from the summary's heading on, or None when the server sent none."""
        at = (self.instructions or "").find(summary_heading())
        return self.instructions[at:].strip() + "\n" if at >= 0 else None

    def with_schema(self, system: str, schema: bool, offered: tuple[str, ...] | list[str] = ()) -> str:
        """`system` with the server's KG summary appended when `schema` is set (`--schema`), without its
        sentences about the server's tools that are not `offered` to this model."""
        summary = self.offered_schema(offered) if schema else None
        return f"{system.rstrip()}\n\n{summary}" if summary else system

    def offered_schema(self, offered: tuple[str, ...] | list[str] = ()) -> str | None:
        """The KG summary as a model given the tools `offered` reads it (None when the server sent none)."""
        summary = self.schema
        if summary is None:
            return None
        return without_mentions(summary, [t.name for t in self.tools if t.name not in offered])

    async def stats(self) -> dict[str, Any]:
        """The server's kg://stats: kind, profile, triples (and whether a lower bound), where it is."""
        result = await self._client.read_resource("kg://stats")
        return json.loads(result.contents[0].text)

    async def __aexit__(self, *exc) -> None:
        if self._stack is not None:
            await self._stack.aclose()

    def offered(self, names: tuple[str, ...] | list[str]) -> list[ToolSpec]:
        """The tools `names` as a driver offers them: their descriptions (and their arguments') without
        the sentences that name one of the server's other tools, which this model is not given."""
        others = [t.name for t in self.tools if t.name not in names]
        return [without_tools(self.tool(name), others) for name in names]

    def tool(self, name: str) -> ToolSpec:
        for spec in self.tools:
            if spec.name == name:
                return spec
        raise KeyError(f"the KG server has no tool {name!r} (it has {', '.join(t.name for t in self.tools)})")

    async def call_pages(self, name: str, arguments: dict[str, Any], *,
                         max_pages: int = MAX_PAGES) -> list[ToolResult]:
        """Every page of a listing call (read_pages), at most `max_pages`."""
        return await read_pages(self.call_tool, name, arguments, max_pages=max_pages)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        assert self._client is not None, "use KGClient inside `async with`"
        started = time.perf_counter()
        result = await self._client.call_tool(name, arguments)
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        return ToolResult(text, result.structured_content, bool(result.is_error), time.perf_counter() - started)
