"""The demo knowledge graph that ships with kg-mcp.

``demo.ttl`` is a small Wikidata-shaped graph (about 1,100 triples) about Dutch painters, written for
this project from Wikidata facts. It uses the real Wikidata IRIs and RDF model, so the Wikidata
schema profile applies. ``kg-mcp serve`` loads it when no store is given, so a new user can try the
tools straight away.

Good starting points: Vincent van Gogh (``wd:Q5582``), the chain Van Gogh -> place of birth
(``P19``) -> Zundert (``Q9883``) -> country (``P17``) -> Netherlands (``Q55``) -> capital (``P36``)
-> Amsterdam (``Q727``), and the hub "painter" (``Q1028181``, 82 incoming ``P106`` edges).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["demo_path"]


def demo_path() -> Path:
    """Return the path of the bundled demo graph, ``demo.ttl`` (Turtle).

    The file sits next to this module and is shipped as package data.

    >>> demo_path().name
    'demo.ttl'
    >>> demo_path().is_file()
    True
    """
    return Path(__file__).resolve().parent / "demo.ttl"
