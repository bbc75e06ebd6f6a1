"""`find_entities`: from a name to ids, so a user who does not know ids can start."""

from __future__ import annotations

from pydantic import BaseModel

from kg_mcp.backends import Backend
from kg_mcp.quoting import quoted
from kg_mcp.settings import Settings
from kg_mcp.tools._render import ToolOutput, capped, plural, table


class EntityRow(BaseModel):
    id: str
    label: str | None
    description: str | None
    degree: int
    match: str


class FindResult(BaseModel):
    name: str
    method: str  # how names were looked up (the store's name index, an engine's text search, label queries)
    entities: list[EntityRow]


def find_entities(backend: Backend, settings: Settings, name: str, limit: int = 10) -> ToolOutput:
    found = backend.lookup(name, limit)
    hits = found.hits
    cap = settings.degree_cap
    rows = [
        EntityRow(
            id=backend.vocab.compact(h.node), label=h.label, description=h.description, degree=h.degree, match=h.match
        )
        for h in hits
    ]
    if not rows:
        text = (
            f"find_entities {quoted(name)}: no entity has this name or one close to it (looked up by {found.method}). "
            "Try a shorter or differently spelled name."
        )
    else:
        text = (
            f"find_entities {quoted(name)}: {plural(len(rows), 'entity')} (best first; degree = number of edges; "
            f"looked up by {found.method}).\n"
        ) + table(
            ("id", "label", "description", "degree", "match"),
            ((r.id, r.label, r.description, f"{r.degree}+" if r.degree >= cap else str(r.degree), r.match) for r in rows),
            settings,
        )
    return ToolOutput(capped(text, settings, "Ask for fewer entities."), FindResult(name=name, method=found.method, entities=rows))
