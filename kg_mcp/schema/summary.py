"""The KG's schema up front: a bounded summary of what it holds, for the server instructions.

`server_instructions(backend, settings)` is the text a client receives at initialize: the general
guide (prompts/server_instructions.md) and, after it, this KG's size, id style, relations with
their counts and hubs (prompts/server_instructions_kg.md, filled from kg_mcp.schema.census). The
summary keeps to SUMMARY_TOKENS: every relation of a small KG, the most used ones of a big one.
The census is taken once per backend; kg://schema serves the same figures (`schema_document`).
"""

from __future__ import annotations

import logging
import time
import weakref

from kg_mcp.backends import Backend, graph_access
from kg_mcp.prompt_files import read_prompt
from kg_mcp.schema.census import Census, RelationUse, take_census
from kg_mcp.settings import Settings, sparql_offered

log = logging.getLogger(__name__)

SUMMARY_TOKENS = 1400  # the whole instructions stay under 2,000 tokens with the general guide's ~530
# Tokens are estimated from characters: ids, numbers and punctuation run about 2.6 characters a
# token in o200k_base (English prose nearer 4), so 2.4 keeps the estimate on the safe side.
CHARS_PER_TOKEN = 2.4
SUMMARY_FILE = "server_instructions_kg.md"
FEW_LEFT = 5  # relations the budget may leave out before the list says "the N most used of M"
MACHINERY_SHOWN = 8  # machinery relations named in an ontology's one line about them

# One census per backend and graph set (kg_mcp.backends.graph_access): a caller's summary names
# only what its graphs hold.
_censuses: weakref.WeakKeyDictionary[Backend, dict[str, Census]] = weakref.WeakKeyDictionary()


def census_of(backend: Backend, settings: Settings) -> Census | None:
    """The backend's census for the caller's graphs, taken on first use within settings.schema_summary_s
    (None when that is 0)."""
    if settings.schema_summary_s <= 0:
        return None
    taken = _censuses.setdefault(backend, {})
    known = taken.get(graph_access.cache_key())
    if known is None:
        started = time.perf_counter()
        known = taken[graph_access.cache_key()] = take_census(backend, settings.schema_summary_s)
        log.info("KG summary for the server instructions: %.1f s%s", time.perf_counter() - started,
                 f"; not read: {', '.join(known.missing)}" if known.missing else "")
    return known


def server_instructions(backend: Backend, settings: Settings) -> str:
    """The general guide, then this KG's summary (only the guide when the summary is turned off)."""
    queries = query_guide(settings)
    guide = read_prompt("server_instructions.md").template + queries
    census = census_of(backend, settings)
    if census is None:
        return guide
    # The paragraph on queries takes its tokens from the summary's: the whole stays within budget.
    return guide.rstrip() + "\n\n" + summary_text(census, settings, SUMMARY_TOKENS - prose_tokens(queries))


PROSE_CHARS_PER_TOKEN = 3.5  # English prose runs about 3.9 characters a token in o200k_base


def prose_tokens(text: str) -> int:
    """Tokens of English prose, estimated on the safe side."""
    return int(len(text) / PROSE_CHARS_PER_TOKEN) + 1


def query_guide(settings: Settings) -> str:
    """Which questions a `sparql` query answers best and which navigation does, where the tool is
    offered (before the summary, which drivers copy and which names no tool)."""
    if not sparql_offered(settings.sparql_tool):
        return ""
    return "\n" + read_prompt("server_instructions_sparql.md").template


def summary_heading() -> str:
    """The summary's first line: where a client finds it inside the instructions."""
    return read_prompt(SUMMARY_FILE).template.splitlines()[0]


def summary_text(census: Census, settings: Settings, tokens: int = SUMMARY_TOKENS) -> str:
    """The summary as markdown, at most about `tokens` tokens: relations fill what the rest leaves."""
    template = read_prompt(SUMMARY_FILE)
    listed = _listed(census)
    fields = {
        "size": _size(census),
        "ids": _ids(census),
        "shape": _shape(census),
        "names": _names(census),
        "hubs_scope": _hubs_scope(census, settings),
        "hubs": _hubs(census, settings),
        "hierarchy": _hierarchy(census),
    }
    budget = tokens * CHARS_PER_TOKEN - len(template.render(**fields, relations="", relations_scope="", relations_rest=""))
    lines: list[str] = []
    room = budget - 200  # the scope and the pointer to the rest
    for relation in listed:
        line = _relation_line(relation)
        if room - len(line) - 1 < 0:
            break
        lines.append(line)
        room -= len(line) + 1
    if 0 < _listed_total(census, listed) - len(lines) <= FEW_LEFT and len(listed) == _listed_total(census, listed):
        lines = [_relation_line(r) for r in listed]  # "the 91 most used of 92" helps no one: show them all
    fields["relations"] = "\n".join(lines) or "- (none could be read at start: the tools list those around an entity)"
    fields["relations_scope"] = _relations_scope(census, listed, len(lines))
    fields["relations_rest"] = _relations_rest(census, listed, len(lines))
    text = template.render(**fields)
    if census.missing:
        text = text.rstrip() + f"\n\nNot read at start: {'; '.join(census.missing)}.\n"
    return _tidy(text)


def _listed(census: Census) -> list[RelationUse]:
    """The relations the list shows: on an ontology its own relations and hierarchies (machinery and
    names have lines of their own), elsewhere every relation the tools list unfiltered."""
    if census.shape == "ontology":
        return [r for r in census.relations if r.kind in ("domain", "hierarchy")]
    return [r for r in census.relations if not r.hidden]


def schema_document(backend: Backend, settings: Settings) -> dict:
    """kg://schema: prefixes and the census's relations and hubs (as many as it kept)."""
    census = census_of(backend, settings)
    document = {
        "profile": backend.profile.name,
        "prefixes": backend.vocab.prefixes,
        "bare_namespaces": backend.vocab.bare_namespaces,
    }
    if census is None:
        stats = backend.stats()
        labels = backend.labels([p for p, _ in stats.top_relations])
        document["top_relations"] = [
            {"relation": backend.vocab.compact(p), "label": labels.get(p), "triples": n} for p, n in stats.top_relations
        ]
        return document
    document["top_relations"] = [
        {"relation": r.id, "label": r.label, "triples": r.triples, "kind": r.kind} for r in census.relations if not r.hidden
    ]
    document["names"] = [{"relation": r.id, "triples": r.triples} for r in census.relations if r.hidden]
    document["shape"] = census.shape
    document["relations_counted"] = _basis(census, census.relations_basis)
    document["relation_total"] = census.relation_total
    document["hubs"] = [
        {"entity": h.id, "label": h.label, "direction": h.direction, "edges": h.edges,
         "relations": [{"relation": r, "edges": n} for r, n in h.relations]}
        for h in census.hubs
    ]
    document["hubs_counted"] = _basis(census, census.hubs_basis)
    return document


# --- the pieces of the text ----------------------------------------------------------------------


def _basis(census: Census, basis: str) -> str:
    return f"in a sample of the first {census.sample:,} triples" if basis == "sample" else basis


def _size(census: Census) -> str:
    relations = f", in {census.relation_total:,} relations" if census.relation_total is not None else ""
    entities = f" about {census.entities:,} entities (named subjects)" if census.entities else ""
    if census.entities and census.blank_subjects:
        entities += f" and {census.blank_subjects:,} blank nodes"
    profile = f"(schema profile: {census.profile})"
    if census.triples is None:
        return f"Its size was not counted at start (the kg://stats resource counts it) {profile}."
    if census.triples_basis == "exact":
        return f"It holds {census.triples:,} triples{entities}{relations} {profile}."
    if census.triples_basis == "VoID":
        return f"It holds {census.triples:,} triples{entities}, as the endpoint's VoID description says {profile}."
    if census.triples_basis == "as loaded":
        return f"It holds about {census.triples:,} triples, as loaded {profile}."
    return f"It holds at least {census.triples:,} triples (not counted further) {profile}."


def _shape(census: Census) -> str:
    """An ontology's kinds of subjects, its hierarchies' roots and one line on its machinery ('' elsewhere)."""
    if census.shape != "ontology":
        return ""
    kinds = ", ".join(f"`{t}` {n:,}" for t, n in census.kinds[:4])
    lines = [f"It is an ontology: most of its named subjects are classes, properties, shapes or concepts ({kinds})."]
    if census.blank_subjects:
        lines[0] += (" Its blank nodes (restrictions, shapes' constraints, lists) are shown inside what they describe, "
                     "as `[ ... ]` and `( ... )`.")
    if census.roots:
        lines.append("\nHierarchy roots, with the nodes below each at any depth:")
        for root in census.roots:
            name = f" ({root.label})" if root.label else ""
            lines.append(f"- `{root.id}`{name}: {root.below:,} below by {root.relation}{_directly(root)}")
    machinery = [r for r in census.relations if r.kind == "machinery"]
    if machinery:
        triples = sum(r.triples for r in machinery)
        named = ", ".join(f"`{r.id}` {r.triples:,}" for r in machinery[:MACHINERY_SHOWN])
        lines.append(f"\nOWL, SHACL and RDFS machinery: {len(machinery):,} relations, {triples:,} triples ({named}"
                     f"{', ...' if len(machinery) > MACHINERY_SHOWN else ''}); a `search` filtered to one reads it.")
    return "\n".join(lines)


def _directly(root) -> str:
    """The nodes directly below a root: how many, and some of them ("; directly 7, e.g. `a`, `b`")."""
    if not root.children:
        return ""
    named = ", ".join(f"`{c}`" for c in root.children)
    count = max(root.direct, len(root.children))
    return f"; directly {count:,}, e.g. {named}" if count > len(root.children) else f"; directly {count:,}: {named}"


def _names(census: Census) -> str:
    """Where names and descriptions come from, and how to read all of them."""
    names = sorted((r for r in census.relations if r.kind == "name"), key=lambda r: -r.triples)
    if not names:
        return ""
    shown = [f"`{r.id}` {r.triples:,}" + (" (shown beside each id)" if r.hidden else "") for r in names]
    return (f"Names and descriptions: {', '.join(shown)}. A `search` filtered to one of them lists every value "
            "(labels in every language, aliases, whole definitions).")


def _ids(census: Census) -> str:
    if census.example_id is None:
        return "Copy ids exactly as the tools show them."
    text = f"Ids look like `{census.example_id}`: copy them exactly as the tools show them."
    if census.label_is_id:
        text += (
            f" An entity's exact label also works in place of its id when no other entity has it "
            f"(`{census.example_label}` is `{census.example_id}`)."
        )
    return text


def _relation_line(relation: RelationUse) -> str:
    label = relation.label
    named = label and label.replace(" ", "_").lower() != relation.id.rsplit(":", 1)[-1].lower()
    return f"- `{relation.id}`{' ' + label if named else ''}: {relation.triples:,}"


def _relations_scope(census: Census, listed: list[RelationUse], shown: int) -> str:
    own = "its own relations and hierarchies: " if census.shape == "ontology" else ""
    if census.relations_basis == "sample":
        return f"{own}the {shown} most used {_basis(census, 'sample')}"
    total = _listed_total(census, listed)
    return f"{own}all {total:,}" if shown >= total else f"{own}the {shown} most used of {total:,}"


def _listed_total(census: Census, listed: list[RelationUse]) -> int:
    """How many relations the list is of, counting those past the census's own cut."""
    kinds = ("domain", "hierarchy") if census.shape == "ontology" else tuple(census.listed_by_kind)
    return max(len(listed), sum(census.listed_by_kind.get(kind, 0) for kind in kinds))


def _relations_rest(census: Census, listed: list[RelationUse], shown: int) -> str:
    if census.relations_basis != "sample" and shown >= _listed_total(census, listed):
        return ""
    return (
        f"More: the relations around one entity are in its neighbourhood, and the `kg://schema` resource "
        f"lists the {len(census.relations):,} most used."
    )


# Relations that make a hierarchy (class, property, concept): follow walks them to any depth with rel+.
HIERARCHY_RELATIONS = (
    "http://www.w3.org/2000/01/rdf-schema#subClassOf",
    "http://www.w3.org/2000/01/rdf-schema#subPropertyOf",
    "http://www.w3.org/2004/02/skos/core#broader",
    "http://www.w3.org/2004/02/skos/core#narrower",
    "http://www.wikidata.org/prop/direct/P279",
)


def _hierarchy(census: Census) -> str:
    """One sentence on transitive steps, when the KG has a hierarchy relation among those listed."""
    found = next((r.id for r in census.relations if r.iri in HIERARCHY_RELATIONS), None)
    if found is None:
        return ""
    return (
        f"`{found}` makes a hierarchy: `follow` walks it to any depth with `{found}+` (every ancestor) "
        f"or `~{found}+` (every descendant)."
    )


def _hubs_scope(census: Census, settings: Settings) -> str:
    if census.hubs_basis == "load-time statistics":
        return f"entities with {census.hub_threshold or 0:,} edges or more in one direction, counted at load time"
    if census.hubs_basis == "sample":
        return f"the most linked entities {_basis(census, 'sample')}"
    own = " of the ontology's own relations" if census.shape == "ontology" else ""
    return f"the entities with the most incoming edges{own}, if more than {settings.search_k}"


def _hubs(census: Census, settings: Settings) -> str:
    shown = census.hubs if census.hubs_basis != "exact" else [h for h in census.hubs if h.edges > settings.search_k]
    if not shown:
        if "hubs" in " ".join(census.missing):
            return "- (not read at start)"
        return f"- none: no entity has more than {settings.search_k} incoming edges, so every neighbourhood is listed whole"
    lines = []
    for hub in shown:
        name = f" ({hub.label})" if hub.label else ""
        via = ", ".join(f"{r} {n:,}" for r, n in hub.relations)
        lines.append(f"- `{hub.id}`{name}: {hub.edges:,} {hub.direction}" + (f" ({via})" if via else ""))
    return "\n".join(lines)


def _tidy(text: str) -> str:
    """No runs of blank lines where a field came out empty."""
    lines: list[str] = []
    for line in text.splitlines():
        if not line.strip() and lines and not lines[-1].strip():
            continue
        lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"

