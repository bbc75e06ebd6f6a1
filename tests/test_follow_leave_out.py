"""`follow` leaves out the paths back through its start (and through entities named in `exclude`),
and says what that left out: on the real MetaQA store, checked against the KB file walked by hand
and against single-entity `search` calls, directly and over MCP."""

from __future__ import annotations

from collections import defaultdict
from functools import lru_cache

import pytest
from mcp import Client

from kg_mcp.errors import InvalidInput, UnknownEntity
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools.follow import LEFT_OUT_SHOWN, follow

NICKY = ["written_by", "~written_by", "directed_by"]  # who directed the films written by the writers of X


@lru_cache(maxsize=1)
def kb(data_dir) -> tuple[dict, dict]:
    """(outgoing, incoming) {name: {relation: {name}}} of MetaQA's kb.txt."""
    out, inc = defaultdict(lambda: defaultdict(set)), defaultdict(lambda: defaultdict(set))
    for line in (data_dir / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines():
        head, rel, tail = line.split("|")
        out[head][rel].add(tail)
        inc[tail][rel].add(head)
    return out, inc


def kb_ends(data_dir, start: str, path: list[str], drop: set[str]) -> set[str]:
    """The names a path reaches from `start` in the KB file when no path may pass through `drop`."""
    out, inc = kb(data_dir)
    frontier = {start}
    for relation in path:
        step = inc if relation.startswith("~") else out
        frontier = {n for e in frontier for n in step[e][relation.lstrip("~")]} - drop
    return frontier


def labels(entities) -> set[str]:
    return {e.entity.label or e.entity.id for e in entities}


def test_little_nicky_the_writer_reached_only_through_the_start_is_left_out(metaqa, settings, data_dir):
    out = follow(metaqa, settings, "Little Nicky", NICKY)
    keep = follow(metaqa, settings, "Little Nicky", NICKY, exclude_through="none")
    # Adam Sandler directed Little Nicky (which he wrote) and none of his other films: only back through it.
    assert "Adam Sandler" not in labels(out.data.entities) and "Adam Sandler" in labels(keep.data.entities)
    assert labels(out.data.entities) == kb_ends(data_dir, "Little Nicky", NICKY, {"Little Nicky"})
    assert labels(keep.data.entities) == kb_ends(data_dir, "Little Nicky", NICKY, set())
    assert labels(keep.data.entities) - labels(out.data.entities) == {"Adam Sandler"}
    # Steven Brill directed Little Nicky and another film Sandler wrote: kept, with fewer paths.
    paths = {e.entity.label: e.paths for e in out.data.entities}
    all_paths = {e.entity.label: e.paths for e in keep.data.entities}
    assert 0 < paths["Steven Brill"] < all_paths["Steven Brill"]
    # What was left out is said, in the text and in the structured content.
    assert out.data.left_out_total == 1 and [e.entity.id for e in out.data.left_out] == ["kg:Adam_Sandler"]
    assert out.data.left_out[0].paths == all_paths["Adam Sandler"] and out.data.left_out_counted
    assert "Left out: 1 end entity reached only by paths back through the start: kg:Adam_Sandler (Adam Sandler)" in out.text
    assert 'exclude_through="none"' in out.text and "| kg:Adam_Sandler |" not in out.text
    branch, whole = out.data.branches[0], keep.data.branches[0]
    assert branch.sizes_before_leave_out == whole.sizes == [2, 13, 7] and branch.sizes == [2, 12, 6]
    assert "entities after each hop 2 → 12 → 6 (before leaving out the paths back through the start: 2 → 13 → 7)" in out.text
    assert keep.data.left_out_total == 0 and keep.data.exclude_through == "none" and "Left out" not in keep.text


def test_the_start_is_never_an_end_entity(metaqa, settings, data_dir):
    out = follow(metaqa, settings, "kg:Carrie", ["directed_by", "~directed_by"])
    films = kb_ends(data_dir, "Carrie", ["directed_by", "~directed_by"], set())
    assert "Carrie" in films and labels(out.data.entities) == films - {"Carrie"}
    assert [e.entity.id for e in out.data.left_out] == ["kg:Carrie"] and out.data.total == len(films) - 1


def test_a_walk_left_with_only_paths_through_the_start(metaqa, settings):
    """10 MPH's only director made only 10 MPH: hop 2 holds nothing but the start, and hop 3 its genre."""
    out = follow(metaqa, settings, "10 MPH", ["directed_by", "~directed_by", "has_genre"])
    assert out.data.complete and out.data.total == 0 and out.data.branches[0].sizes == [1, 0, 0]
    assert out.data.branches[0].sizes_before_leave_out == [1, 1, 1]
    assert [e.entity.id for e in out.data.left_out] == ["kg:Documentary"]
    assert "No entity at hop 2 (~directed_by) other than by paths back through the start." in out.text
    assert "has: " not in out.text  # not told the relations are missing: they are not


def test_exclude_named_entities(metaqa, settings, data_dir):
    path = ["directed_by", "~directed_by"]
    out = follow(metaqa, settings, "kg:Carrie", path, exclude=["Sisters", "kg:Obsession"])
    films = kb_ends(data_dir, "Carrie", path, set())
    assert labels(out.data.entities) == films - {"Carrie", "Sisters", "Obsession"}
    assert labels(out.data.left_out) == {"Carrie", "Sisters", "Obsession"} and out.data.left_out_total == 3
    assert [e.id for e in out.data.excluded] == ["kg:Sisters", "kg:Obsession"]
    assert "back through the start or through an excluded entity" in out.text
    # exclude alone, the start's paths kept: Carrie is back among the films
    only = follow(metaqa, settings, "kg:Carrie", path, exclude_through="none", exclude=["Sisters"])
    assert labels(only.data.entities) == films - {"Sisters"} and "through an excluded entity" in only.text
    assert "Call without exclude to keep them." in only.text
    # a path through an excluded entity in the middle is dropped, not the entities it reaches by other ways
    genres = follow(metaqa, settings, "kg:Ben-Hur", ["has_genre", "~has_genre"], exclude=["kg:Drama"])
    assert labels(genres.data.entities) == kb_ends(data_dir, "Ben-Hur", ["has_genre", "~has_genre"], {"Ben-Hur", "Drama"})
    assert genres.data.branches[0].sizes == [1, 27] and genres.data.left_out_total > 3000


def test_paths_through_left_out_entities_that_grow_too_big_are_not_counted(metaqa, settings, data_dir):
    """Through Drama, Ben-Hur's genres reach 4,016 films before hop 3: past the budget, so that side
    walk stops and says so, while the answer (through History only) is walked to the end."""
    path = ["has_genre", "~has_genre", "release_year"]
    out = follow(metaqa, settings, "kg:Ben-Hur", path, exclude=["kg:Drama"])
    assert out.data.complete and labels(out.data.entities) == kb_ends(data_dir, "Ben-Hur", path, {"Ben-Hur", "Drama"})
    branch = out.data.branches[0]
    assert len(branch.sizes) == 3 and branch.sizes_before_leave_out == [2]
    assert not out.data.left_out_counted and out.data.left_out == [] and out.data.left_out_total == 0
    assert "not counted from hop 2: too many" in out.text and "were not counted (too many)" in out.text


def test_left_out_list_is_bounded(metaqa, settings):
    out = follow(metaqa, settings, "kg:Ben-Hur", ["has_genre", "~has_genre"], exclude=["kg:Drama"])
    assert len(out.data.left_out) == LEFT_OUT_SHOWN < out.data.left_out_total
    assert f"and {out.data.left_out_total - LEFT_OUT_SHOWN:,} more." in out.text


def test_intersections_leave_out_each_branch_own_start(metaqa, settings, data_dir):
    """Films written by Little Nicky's writers that Steven Brill directed: Little Nicky itself only
    comes back through the first path's start, so it is left out; a hub branch checked backwards
    (Comedy: 3,759 films) keeps to the same rule."""
    written = ["kg:Little_Nicky", "written_by", "~written_by"]
    films = kb_ends(data_dir, "Little Nicky", ["written_by", "~written_by"], set())
    brills = kb_ends(data_dir, "Steven Brill", ["~directed_by"], set())
    out = follow(metaqa, settings, paths=[written, ["kg:Steven_Brill", "~directed_by"]])
    assert "Little Nicky" in films & brills
    assert labels(out.data.entities) == (films & brills) - {"Little Nicky"} and labels(out.data.entities)
    assert labels(out.data.left_out) == {"Little Nicky"}
    assert "back through a path's own start entity" in out.text
    keep = follow(metaqa, settings, paths=[written, ["kg:Steven_Brill", "~directed_by"]], exclude_through="none")
    assert labels(keep.data.entities) == films & brills
    # exclude applies to every branch
    some = sorted(labels(out.data.entities))[0]
    fewer = follow(metaqa, settings, paths=[written, ["kg:Steven_Brill", "~directed_by"]], exclude=[some])
    assert labels(fewer.data.entities) == labels(out.data.entities) - {some}
    assert labels(fewer.data.left_out) == {"Little Nicky", some}
    # a hub branch, checked backwards from the other branch's end entities
    comedies = kb_ends(data_dir, "Comedy", ["~has_genre"], set())
    small = Settings(search_p=200)
    hub = follow(metaqa, small, paths=[written, ["kg:Comedy", "~has_genre"]])
    assert hub.data.branches[1].checked_backwards and hub.data.complete
    assert labels(hub.data.entities) == (films & comedies) - {"Little Nicky"}
    assert labels(hub.data.left_out) == {"Little Nicky"} and hub.data.left_out[0].paths > 0
    hub_kept = follow(metaqa, small, paths=[written, ["kg:Comedy", "~has_genre"]], exclude_through="none")
    assert labels(hub_kept.data.entities) == films & comedies


def test_bad_exclude_arguments_are_refused_in_our_words(metaqa, settings):
    with pytest.raises(UnknownEntity, match="^exclude: "):
        follow(metaqa, settings, "kg:Carrie", ["directed_by"], exclude=["No Such Film At All"])
    with pytest.raises(InvalidInput, match='exclude_through must be "start" or "none"'):
        follow(metaqa, settings, "kg:Carrie", ["directed_by"], exclude_through="everything")
    with pytest.raises(InvalidInput, match="At most 50 entities in exclude"):
        follow(metaqa, settings, "kg:Carrie", ["directed_by"], exclude=["kg:Carrie"] * 51)


async def test_over_mcp(metaqa):
    async with Client(build_server(metaqa)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        schema = tools["follow"].input_schema["properties"]
        assert schema["exclude_through"]["enum"] == ["start", "none"] and schema["exclude"]["maxItems"] == 50
        result = await client.call_tool("follow", {"entity": "Little Nicky", "path": NICKY})
        assert not result.is_error and "kg:Adam_Sandler (Adam Sandler)" in result.content[0].text
        data = result.structured_content
        assert data["left_out_total"] == 1 and data["left_out"][0]["entity"]["id"] == "kg:Adam_Sandler"
        assert data["branches"][0]["sizes_before_leave_out"] == [2, 13, 7]
        result = await client.call_tool("follow", {"entity": "Little Nicky", "path": NICKY, "exclude_through": "none"})
        assert "| kg:Adam_Sandler | Adam Sandler |" in result.content[0].text
        result = await client.call_tool("follow", {"entity": "Little Nicky", "path": NICKY, "exclude_through": "all"})
        assert result.is_error and "Traceback" not in result.content[0].text
        result = await client.call_tool("follow", {"entity": "Little Nicky", "path": NICKY, "exclude": ["kg:Carrie"] * 51})
        assert result.is_error and "exclude" in result.content[0].text
