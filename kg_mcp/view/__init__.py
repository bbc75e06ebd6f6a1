"""The graph view of the navigation tools, served as an MCP App (the `io.modelcontextprotocol/ui` extension).

The tools named in VIEW_TOOLS carry `_meta.ui.resourceUri` = VIEW_URI; a host that speaks MCP Apps
reads that `ui://` resource (one self-contained HTML page, `text/html;profile=mcp-app`) and renders
it beside the tool's result, which it hands to the page. The page draws the result's structured
content as a graph and calls `search` and reads `kg://entity/{id}` through the host.

The page is built from view/ (cytoscape.js and the ext-apps App class, bundled by esbuild) into
graph.html here, which ships in the wheel: no Node at install time, nothing fetched at run time.
The extension is additive: a client that did not negotiate Apps sees the same tools and results.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from mcp.server.apps import Apps

VIEW_URI = "ui://kg-mcp/graph.html"
# The tools whose results the view draws (their structured content: kg_mcp/tools/*.py).
VIEW_TOOLS = ("search", "follow", "get_relations", "explore_kg", "kgr_search")
VIEW_META = {"ui": {"resourceUri": VIEW_URI}}


@cache
def view_html() -> str:
    return resources.files(__name__).joinpath("graph.html").read_text(encoding="utf-8")


def graph_view() -> Apps:
    """The Apps extension holding the view's page; pass it to the server's `extensions`."""
    apps = Apps()
    apps.add_html_resource(
        VIEW_URI,
        view_html(),
        name="graph-view",
        title="Knowledge-graph view",
        description="Draws the results of search, follow, get_relations, explore_kg and kgr_search as a graph.",
        # Self-contained: no domain to reach, so the host's default (strictest) policy fits.
        prefers_border=True,
    )
    return apps
