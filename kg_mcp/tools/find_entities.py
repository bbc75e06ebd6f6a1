"""`find_entities`: from a name to ids, so a user who does not know ids can start."""

from __future__ import annotations

from pydantic import BaseModel

from kg_mcp.backends import Backend
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
    entities: list[EntityRow]


def find_entities(backend: Backend, settings: Settings, name: str, limit: int = 10) -> ToolOutput:
    hits = backend.find_entities(name, limit)
    cap = settings.degree_cap
    rows = [
        EntityRow(
            id=backend.vocab.compact(h.node), label=h.label, description=h.description, degree=h.degree, match=h.match
        )
        for h in hits
    ]
    if not rows:
        text = (
            f"find_entities {name!r}: no entity has this label, in any case, or a label starting with it. "
            "Try a shorter or differently spelled name."
        )
    else:
        text = f"find_entities {name!r}: {plural(len(rows), 'entity')} (best first; degree = number of edges).\n" + table(
            ("id", "label", "description", "degree", "match"),
            ((r.id, r.label, r.description, f"{r.degree}+" if r.degree >= cap else str(r.degree), r.match) for r in rows),
            settings,
        )
    return ToolOutput(capped(text, settings, "Ask for fewer entities."), FindResult(name=name, entities=rows))
