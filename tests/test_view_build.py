"""The graph view shipped in the package (kg_mcp/view/graph.html) is what view/ builds: a rebuild
from the sources and the locked npm packages (view/package-lock.json, installed by `make
install-test`) gives the committed file byte for byte, so a change to view/src that was not
rebuilt, or a lock moved without a rebuild, fails here. The page is self-contained: nothing
in it is loaded from elsewhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from kg_mcp.view import VIEW_URI, graph_view, view_html

ROOT = Path(__file__).resolve().parents[1]
VIEW = ROOT / "view"
SHIPPED = ROOT / "kg_mcp" / "view" / "graph.html"


def test_a_rebuild_is_the_committed_file(tmp_path):
    if not (VIEW / "node_modules" / "esbuild").is_dir():
        pytest.fail("the view's build tools are missing: run `make install-test` (npm ci --prefix view)")
    out = tmp_path / "graph.html"
    done = subprocess.run(["node", str(VIEW / "build.mjs"), "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == SHIPPED.read_bytes(), "kg_mcp/view/graph.html is stale: run `node view/build.mjs` and commit it"


def test_the_page_is_self_contained():
    html = view_html()
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    # No script, style, image or frame comes from elsewhere (URLs in comments and strings are inert).
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", html, re.I)
    assert not re.search(r"@import|url\(\s*['\"]?(https?:)?//", html)
    assert html.count("<script") == 1 and 'type="module"' in html


def test_the_extension_serves_it_as_an_mcp_app():
    resources = {b.resource.uri: b.resource for b in graph_view().resources()}
    assert resources[VIEW_URI].mime_type == "text/html;profile=mcp-app"
    assert resources[VIEW_URI].text == SHIPPED.read_text(encoding="utf-8")
