"""Wikidata JSON dumps (``latest-all.json``: a JSON array written one entity per line) as quads.

The entity → RDF mapping itself lives in kg_mcp.loading.wikidata_json; this module only frames
the dump into entities and says which line a problem is on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from kg_mcp.loading.errors import BadLines, LoadError


def _entity_text(line: str) -> str:
    # The dump is "[\n{...},\n{...}\n]": drop the array brackets and each line's trailing comma.
    text = line.strip()
    if text.startswith("["):
        text = text[1:].lstrip()
    if text.endswith("]"):
        text = text[:-1].rstrip()
    return text.removesuffix(",").rstrip()


def read_wikidata_json(stream: BinaryIO, path: Path, bad: BadLines) -> Iterator[ox.Quad]:
    """Quads of every entity in a Wikidata JSON dump; a bad line is raised or skipped via ``bad``."""
    try:
        from kg_mcp.loading.wikidata_json import entity_to_quads
    except ImportError as e:
        raise LoadError(path, None, f"Wikidata JSON conversion is unavailable ({e})") from e
    for lineno, raw in enumerate(stream, 1):
        try:
            text = _entity_text(raw.decode("utf-8"))
            if not text:
                continue
            entity = json.loads(text)
        except (UnicodeDecodeError, ValueError) as e:
            bad.handle(LoadError(path, lineno, f"invalid JSON ({e})"))
            continue
        if not isinstance(entity, dict):
            bad.handle(
                LoadError(path, lineno, f"expected one JSON object per line, got {type(entity).__name__}")
            )
            continue
        try:
            # Materialised first so that a skipped entity leaves no half of itself behind.
            quads = list(entity_to_quads(entity))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            # The converter's ValueErrors name the entity; anything else gets its id here.
            detail = (
                str(e) if isinstance(e, ValueError) else f"{entity.get('id', '?')}: {type(e).__name__}: {e}"
            )
            bad.handle(LoadError(path, lineno, f"cannot convert entity {detail}"))
            continue
        yield from quads
