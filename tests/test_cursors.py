"""Listing cursors (kg_mcp.tools.cursors): opaque, bounded, read on only by the call that issued them."""

import base64

import pytest

from kg_mcp.errors import InvalidInput
from kg_mcp.tools.cursors import MAX_CURSOR_CHARS, Position, cursor_key, issue, read

KEY = cursor_key("a team's secret")
CALL = {"entity": "brick:Class", "path": ["~rdfs:subClassOf+"]}


def test_a_cursor_reads_back_its_position_for_the_same_call_whatever_the_page_size():
    token = issue("follow", CALL, 1000, key=KEY, resume="brick:Chiller", stamp="3:2026", graphs="g1")
    assert len(token) <= MAX_CURSOR_CHARS and "brick" not in token  # opaque to the client
    again = dict(CALL, limit=50, cursor=token)
    assert read("follow", again, token, key=KEY, stamp="3:2026", graphs="g1") == Position(1000, "brick:Chiller")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (dict(tool="search"), r"another tool \(follow\)"),
        (dict(arguments={"entity": "brick:Point", "path": ["~rdfs:subClassOf+"]}), "other arguments"),
        (dict(stamp="4:2026"), "reloaded"),
        (dict(graphs="g2"), "not issued by this server"),
        (dict(key=cursor_key("another server's")), "another server"),
        (dict(key=cursor_key()), "restarted"),
    ],
)
def test_a_cursor_is_refused_for_another_call_another_state_or_another_server(change, words):
    token = issue("follow", CALL, 200, key=KEY, stamp="3:2026", graphs="g1")
    asked = dict(tool="follow", arguments=CALL, key=KEY, stamp="3:2026", graphs="g1") | change
    with pytest.raises(InvalidInput, match=words) as refused:
        read(asked["tool"], asked["arguments"], token, key=asked["key"], stamp=asked["stamp"], graphs=asked["graphs"])
    assert "leave it out to start from the first page" in str(refused.value)


def test_an_edited_or_forged_cursor_is_refused_in_our_words():
    token = issue("search", {"entity": "ex:hub"}, 1000, key=KEY)
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[raw.index(b"1000")] = ord("9")  # the offset edited: 9000
    edited = base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")
    for bad in (edited, "not a cursor!", "", "A" * 40, "x" * (MAX_CURSOR_CHARS + 1)):
        with pytest.raises(InvalidInput, match="cursor"):
            read("search", {"entity": "ex:hub"}, bad, key=KEY)


def test_a_resume_key_is_bounded():
    with pytest.raises(ValueError):
        issue("search", {}, 1, key=KEY, resume="x" * 201)
