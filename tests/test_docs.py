"""The documentation site, built once with `mkdocs build --strict` into a temporary folder.

Checked: the pages' generated parts (tool outputs, command help, settings) are what the code gives
today; every page of the navigation was built; the command-line page names every command,
option and argument of the click group; the tools page holds what the tools answer today on the
demo KG (called here again through the MCP SDK's client); headless Chromium draws the home page and
the tools page (a PNG with more than a blank page's colours, the expected text in the DOM).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import yaml
from kg_mcp.backends import open_demo
from kg_mcp.cli import main as cli
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from mcp import Client
from PIL import Image
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parents[1]
CALL = re.compile(r"^<!-- kg-mcp (call-error|call) (\S+) ?(.*?) -->$", re.MULTILINE)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300, env=dict(os.environ, NO_MKDOCS_2_WARNING="1"))
    assert built.returncode == 0, built.stderr[-3000:]
    return out


def text_of(page: Path) -> str:
    """The page's text as a reader sees it: tags dropped, entities decoded, whitespace collapsed."""
    raw = re.sub(r"<script.*?</script>", " ", page.read_text(), flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", raw)).split())


def nav_pages(nav) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def built_path(site: Path, page: str) -> Path:
    stem = page.removesuffix(".md")
    return site / (f"{stem[: -len('index')]}index.html" if stem == "index" or stem.endswith("/index") else f"{stem}/index.html")


def test_the_committed_pages_are_what_the_code_gives_today():
    """A page read on the code host is whole and current: `make docs-pages` was run after the last change."""
    sys.path.insert(0, str(ROOT / "docs" / "scripts"))
    try:
        import reference_pages
    finally:
        sys.path.remove(str(ROOT / "docs" / "scripts"))
    assert {"docs/tools.md", "docs/cli.md"} <= {str(p.relative_to(ROOT)) for p in reference_pages.pages()}
    assert reference_pages.stale() == [], "run `make docs-pages` and commit the pages it rewrites"
    cli_page = (ROOT / "docs" / "cli.md").read_text()
    assert "Usage: kg-mcp load [OPTIONS] SOURCES..." in cli_page and "| `KG_MCP_SEARCH_K` | `50` |" in cli_page


def test_every_page_of_the_navigation_is_built_with_its_title(site):
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = nav_pages(config["nav"])
    assert len(pages) >= 20
    for page in pages:
        source = (ROOT / "docs" / page).read_text()
        title = re.search(r"^# (.+)$", source, re.MULTILINE).group(1).replace("`", "")
        built = built_path(site, page)
        assert built.is_file(), page
        assert f"<h1" in built.read_text() and title in text_of(built), page


def commands(group: click.Group, prefix: str = "kg-mcp"):
    for name, command in sorted(group.commands.items()):
        yield f"{prefix} {name}", command
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix} {name}")


def test_the_command_line_page_lists_every_command_option_and_argument(site):
    page = (site / "cli" / "index.html").read_text()
    # one section per command, from its heading to the next command's
    sections = {m.group(1): m.group(0) for m in re.finditer(r'<h[2-4] id="(kg-mcp[\w-]*)".*?(?=<h[2-4] id="kg-mcp|\Z)', page, re.S)}
    everything = [("kg-mcp", cli), *commands(cli)]
    assert len(everything) >= 13
    for name, command in everything:
        anchor = name.replace(" ", "-")
        assert anchor in sections, f"no section for {name}"
        section = html.unescape(sections[anchor])
        for param in command.params:
            if isinstance(param, click.Option):
                for flag in param.opts + param.secondary_opts:
                    assert flag in section, f"{name}: option {flag} missing"
            else:
                assert param.make_metavar(click.Context(command)) in section, f"{name}: argument {param.name} missing"


def test_the_tools_page_shows_what_the_tools_answer_on_the_demo_kg(site):
    import asyncio

    markers = CALL.findall((ROOT / "docs" / "tools.md").read_text())
    assert len(markers) >= 15

    sys.path.insert(0, str(ROOT / "docs" / "scripts"))
    try:
        from reference_pages import DOCS_CURSOR_KEY  # the pages' cursors are signed with it
    finally:
        sys.path.remove(str(ROOT / "docs" / "scripts"))

    async def replay():
        backend = open_demo(settings=Settings(sparql_tool=True, cursor_key=SecretStr(DOCS_CURSOR_KEY)))
        async with Client(build_server(backend, backend.settings)) as client:
            return [await client.call_tool(tool, json.loads(arguments or "{}")) for _, tool, arguments in markers]

    page = text_of(site / "tools" / "index.html")
    # the markers stay in the committed page (as HTML comments), each followed by its output
    assert page.count("$ kg-mcp call") >= len(markers)
    answered = asyncio.run(replay())
    tools_seen = set()
    for (kind, tool, arguments), result in zip(markers, answered):
        assert result.is_error == (kind == "call-error"), (tool, arguments)
        text = " ".join("\n".join(c.text for c in result.content).split())
        assert text in page, f"{tool} {arguments}: the page does not show today's output"
        tools_seen.add(tool)
    assert tools_seen == {"find_entities", "search", "follow", "get_relations", "explore_kg", "verify", "kgr_search", "sparql"}


@pytest.mark.parametrize(("page", "expected"), [
    ("index.html", ["Where to go", "make serve", "find_entities"]),
    ("tools/index.html", ["find_entities 'Van Gogh': 3 entities", "wd:Q5582 | Vincent van Gogh", "verify: 1 claim"]),
])
def test_headless_chromium_draws_the_page(site, tmp_path, page, expected):
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (make install-test installs it)")
    common = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    url = (site / page).as_uri()
    png = tmp_path / "page.png"
    subprocess.run([*common, f"--screenshot={png}", "--window-size=1280,1600", url], capture_output=True, timeout=120, check=True)
    image = Image.open(png).convert("RGB")
    assert image.size == (1280, 1600)
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 100  # text, the theme's header and tables, not a blank page
    background = max(colours)[0] / (1280 * 1600)
    assert background < 0.97  # something is drawn on the page, not only its background
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True).stdout
    rendered = " ".join(html.unescape(re.sub(r"<[^>]+>", "", dom)).split())
    for words in expected:
        assert words in rendered, words
    assert 'class="md-header' in dom and "md-nav" in dom  # the Material theme's header and navigation
