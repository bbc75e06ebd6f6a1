"""The graph view in a real browser under a real MCP Apps host: Debian's Chromium, headless, driven
by playwright-core (tests/js/view_browser.mjs) runs a host page built on the ext-apps AppBridge
and the MCP TypeScript client (tests/js/view_host.js), connected over streamable HTTP to a real
`kg-mcp serve` on the demo KG and on MetaQA. One browser session for every check: the view draws
a search and a follow result (start, path and answers, their labels in the page, a screenshot
that is not blank), a click on a node makes a tools/call through the bridge and the graph grows,
a double click reads the entity's card, and the theme follows the host's.

KG_MCP_UPDATE_SCREENSHOTS=1 copies the screenshots into docs/images/ (shown on docs/view.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from kg_mcp.loading import load_sources
from test_transports import DEMO_TTL, http_server

ROOT = Path(__file__).resolve().parents[1]
VIEW = ROOT / "view"
DOCS_IMAGES = ROOT / "docs" / "images"
# The view's colours (view/src/style.css) for a start entity, an answer and the searched entity, light theme.
START, ANSWER, FOCUS = (0xD9, 0x82, 0x2B), (0x2F, 0x9E, 0x5B), (0x8E, 0x5B, 0xD5)
DARK_BACKGROUND = "rgb(21, 24, 30)"

DEMO_ACTIONS = [
    {"do": "show", "tool": "search", "args": {"entity": "wd:Q5582"}, "shot": "demo-search.png"},
    {"do": "click", "node": "wd:Q9883"},  # Zundert, his place of birth
    {"do": "dblclick", "node": "wd:Q9883"},
    {"do": "theme", "theme": "dark", "shot": "demo-search-dark.png"},
    {"do": "show", "tool": "follow", "args": {"entity": "wd:Q5582", "path": ["wdt:P19", "wdt:P17"]}, "theme": "dark"},
]
METAQA_ACTIONS = [
    {"do": "show", "tool": "follow", "args": {"entity": "kg:Carrie", "path": ["directed_by", "~directed_by"]}, "shot": "metaqa-follow.png"},
    {"do": "click", "node": "kg:Dressed_to_Kill", "shot": "metaqa-follow-expanded.png"},
    {"do": "show", "tool": "search", "args": {"entity": "kg:Brian_De_Palma", "direction": "incoming"}},
    {"do": "show", "tool": "follow", "args": {"entity": "kg:Drama", "path": ["~has_genre"]}, "shot": "metaqa-follow-200.png"},
    {"do": "show", "tool": "search", "args": {"entity": "kg:Drama", "direction": "incoming"}},
    {"do": "show", "tool": "get_relations", "args": {"entity": "kg:Brian_De_Palma"}},
    {"do": "show", "tool": "explore_kg", "args": {"entity": "kg:Carrie", "relations": ["directed_by", "starred_actors"]}},
    {"do": "show", "tool": "kgr_search", "args": {"entity": "kg:Carrie", "question": "Who directed Carrie?"}},
]


@pytest.fixture(scope="module")
def seen(tmp_path_factory, metaqa_store_dir):
    """Every action of both servers, run in one browser session."""
    for need in ("playwright-core", "esbuild", "@modelcontextprotocol/ext-apps", "@modelcontextprotocol/client"):
        if not (VIEW / "node_modules" / need).is_dir():
            pytest.fail(f"{need} is missing from view/node_modules: run `make install-test`")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (make install-test installs it)")
    work = tmp_path_factory.mktemp("view-browser")
    demo = work / "demo-store"
    load_sources([DEMO_TTL], demo, progress=False)
    with http_server(demo, "http") as (demo_base, _), http_server(metaqa_store_dir, "http") as (metaqa_base, _):
        spec = {
            "viewDir": str(VIEW), "hostJs": str(ROOT / "tests" / "js" / "view_host.js"), "chromium": chromium,
            "userDataDir": str(work / "profile"), "outDir": str(work),
            "servers": [{"base": demo_base, "actions": DEMO_ACTIONS}, {"base": metaqa_base, "actions": METAQA_ACTIONS}],
        }
        (work / "spec.json").write_text(json.dumps(spec))
        done = subprocess.run(["node", str(ROOT / "tests" / "js" / "view_browser.mjs"), str(work / "spec.json")],
                              capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (work / "results.json").write_text(done.stdout)  # what the browser saw, for a failure's reader
    out = json.loads(done.stdout)
    assert out["problems"] == [], out["problems"]
    results = out["results"]
    for result in results:
        assert "error" not in result, (result["action"], result.get("error"), result.get("seen"))
    if os.environ.get("KG_MCP_UPDATE_SCREENSHOTS"):
        DOCS_IMAGES.mkdir(exist_ok=True)
        for name in ("metaqa-follow.png", "metaqa-follow-expanded.png", "demo-search-dark.png", "metaqa-follow-200.png"):
            shutil.copy(work / name, DOCS_IMAGES / f"view-{name}")
    return {"demo": results[: len(DEMO_ACTIONS)], "metaqa": results[len(DEMO_ACTIONS) :], "dir": work}


def labels(result, role=None) -> set[str]:
    return {n["label"] for n in result["nodes"] if role is None or n["role"] == role}


def pixels(png: Path) -> np.ndarray:
    return np.asarray(Image.open(png).convert("RGB"), dtype=np.int16).reshape(-1, 3)


def share_of(png: Path, colour: tuple[int, int, int], tolerance: int = 12) -> float:
    """The share of the picture's pixels within `tolerance` of `colour` in each channel."""
    return float((np.abs(pixels(png) - colour) <= tolerance).all(axis=1).mean())


def colours(png: Path) -> int:
    return len(np.unique(pixels(png), axis=0))


def test_follow_on_metaqa_draws_start_path_and_answers(seen):
    follow = seen["metaqa"][0]
    assert not follow["answer"]["isError"]
    assert labels(follow, "start") == {"Carrie"}
    answers = labels(follow, "answer")
    # the films of both its directors (Brian De Palma's 1976 Carrie, William Wyler's 1952 one)
    assert {"Dressed to Kill", "The Untouchables", "Body Double", "Ben-Hur"} <= answers and "Carrie" not in answers
    assert len(answers) == 45
    # the path: Carrie -directed_by-> the 2 entities of hop 1 -~directed_by-> each answer
    hop = [n for n in follow["nodes"] if n["kind"] == "group"]
    assert [n["label"] for n in hop] == ["2 entities"]
    edges = {(e["source"], e["label"]) for e in follow["edges"]}
    assert ("kg:Carrie", "directed_by") in edges and (hop[0]["id"], "~directed_by") in edges
    assert all(name in follow["list"] for name in ("Carrie", "Dressed to Kill", "Ben-Hur"))  # the list beside it
    assert "follow directed_by → ~directed_by" in follow["status"]
    shot = seen["dir"] / "metaqa-follow.png"
    assert share_of(shot, START) > 0.0003 and share_of(shot, ANSWER) > 0.002  # drawn, in their colours
    assert colours(shot) > 200  # not a blank page


def test_a_click_expands_a_node_through_the_server(seen):
    follow, click = seen["metaqa"][0], seen["metaqa"][1]
    assert click["viewCalls"][-1]["name"] == "search" and click["viewCalls"][-1]["arguments"]["entity"] == "kg:Dressed_to_Kill"
    assert len(click["nodes"]) > click["before"] == len(follow["nodes"])
    assert {"Michael Caine", "Angie Dickinson"} <= labels(click)  # its actors, read from the server
    assert labels(click, "focus") == {"Dressed to Kill"}
    demo_click = seen["demo"][1]
    assert demo_click["viewCalls"][-1]["arguments"] == {"entity": "wd:Q9883", "direction": "outgoing"}
    assert "Netherlands" in labels(demo_click)


def test_search_results_are_drawn(seen):
    search = seen["demo"][0]
    assert labels(search, "focus") == {"Vincent van Gogh"}
    assert {"Zundert", "Auvers-sur-Oise", "painter"} <= labels(search)
    assert any(n["kind"] == "literal" and n["label"].startswith("1853-03-30") for n in search["nodes"])
    assert "place of birth → Zundert" in search["list"]
    incoming = seen["metaqa"][2]
    assert labels(incoming, "focus") == {"Brian De Palma"} and {"Carrie", "Dressed to Kill"} <= labels(incoming)
    assert {e["target"] for e in incoming["edges"]} == {"kg:Brian_De_Palma"}  # incoming rows point at him
    assert share_of(seen["dir"] / "demo-search.png", FOCUS) > 0.0003


def test_a_full_page_of_answers_is_laid_out_without_overlaps(seen):
    big = seen["metaqa"][3]  # the dramas of 4,016 that fit follow's first page (its 20,000-character budget)
    shown = len(labels(big, "answer"))
    assert f"Rows 1-{shown} of 4,016 shown. Next page:" in big["answer"]["text"] and shown >= 100
    assert labels(big, "start") == {"Drama"}
    assert f"{4016 - shown} more answers" in labels(big) and "4,016 entities reached" in big["status"]
    assert big["overlaps"] == 0
    assert share_of(seen["dir"] / "metaqa-follow-200.png", ANSWER) > 0.002


def test_every_navigation_tool_is_drawn(seen):
    hub, relations, explore, traversal = seen["metaqa"][4:8]
    # a hub: its incoming rows counted per property, itself marked as one
    assert labels(hub, "focus") == {"Drama"}
    assert [n["label"] for n in hub["nodes"] if n["kind"] == "group"] == ["4,016 rows"]
    assert {e["label"] for e in hub["edges"]} == {"has_genre"}
    # get_relations: one count per relation; a director's are all incoming (~rel), pointing at him
    counted = {n["label"] for n in relations["nodes"] if n["kind"] == "group"}
    assert len(counted) >= 2 and all(label.endswith(" triples") for label in counted)
    assert {e["target"] for e in relations["edges"]} == {"kg:Brian_De_Palma"}
    assert {e["label"] for e in relations["edges"]} >= {"directed_by", "written_by"}
    # explore_kg: the neighbours along the chosen relations
    assert {"Brian De Palma", "Sissy Spacek"} <= labels(explore) and labels(explore, "focus") == {"Carrie"}
    assert {e["label"] for e in explore["edges"]} == {"directed_by", "starred_actors"}
    # kgr_search: the top triples around the entity
    assert labels(traversal, "start") == {"Carrie"} and "Brian De Palma" in labels(traversal)  # the tree's root
    assert "top" in traversal["status"]
    for result in (hub, relations, explore, traversal):
        assert result["overlaps"] == 0, result["status"]


def test_a_double_click_opens_the_card(seen):
    card = seen["demo"][2]
    assert card["viewReads"] == ["kg://entity/wd%3AQ9883"]
    assert card["card"]["body"].startswith("# wd:Q9883 (Zundert)") and "## Relations:" in card["card"]["body"]


def test_the_theme_follows_the_host(seen):
    light, dark, follow_dark = seen["demo"][0], seen["demo"][3], seen["demo"][4]
    assert light["theme"] == "light" and light["background"] == "rgb(255, 255, 255)"
    assert dark["theme"] == "dark" and dark["background"] == DARK_BACKGROUND
    assert follow_dark["theme"] == "dark"  # a view opened in a dark host starts dark
    assert labels(follow_dark, "answer") == {"Netherlands"} and labels(follow_dark, "start") == {"Vincent van Gogh"}
    shot = seen["dir"] / "demo-search-dark.png"
    # the dark background where the light one was white (the graph's pane, a good part of the page)
    assert share_of(shot, (21, 24, 30), 3) > 0.25 and colours(shot) > 100
    assert share_of(seen["dir"] / "demo-search.png", (21, 24, 30), 3) < 0.01


def test_the_docs_show_a_screenshot_made_here():
    for name in ("view-metaqa-follow.png", "view-metaqa-follow-expanded.png", "view-demo-search-dark.png", "view-metaqa-follow-200.png"):
        assert Image.open(DOCS_IMAGES / name).size == (960, 600) and colours(DOCS_IMAGES / name) > 200
        assert f"images/{name}" in (ROOT / "docs" / "view.md").read_text(encoding="utf-8")
