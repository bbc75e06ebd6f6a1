"""A query's IRIs checked against the KG: those it never has where the query puts them, and the nearest it has.

A query that names `brick:hasTags` where the KG has `brick:hasTag` and `brick:hasAssociatedTag`
answers with an empty table and no word. So each IRI of the query's triple patterns (noted by the
writer with its position: a predicate, the class of `?x a C`, a subject or object) is looked up
where the query puts it, one index lookup each (Backend.uses_as), unless the answer already shows
the KG has it there: a row matched every pattern outside OPTIONAL, UNION, MINUS and EXISTS. For
an IRI the KG lacks, the nearest ones it has, by local name and by label: among its relations (the
census the instructions are made from, with their triples), its classes (counted once, on a local
store the census counts whole, with the properties it declares) and the name index (Backend.indexed_names, typos included).

On an endpoint nothing heavy is asked: the relation list and the name index are what the server
already holds, and a check is an ASK of one triple pattern, made only where those cannot tell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyoxigraph as ox
from pydantic import BaseModel
from rapidfuzz import fuzz, process

from kg_mcp.backends import Backend
from kg_mcp.calls import deadline
from kg_mcp.errors import KGError
from kg_mcp.namespaces import RDF_TYPE
from kg_mcp.schema.vocabulary import CLASS_TYPES, class_list, declared_properties
from kg_mcp.schema.summary import census_of
from kg_mcp.settings import Settings
from kg_mcp.sparql.policy import CLASS, NODE, PREDICATE

MAX_CHECKED = 16  # distinct IRIs of one query looked up in the KG
MAX_EXPLAINED = 5  # of those it lacks, the ones given their nearest
NEAREST = 3
MIN_SCORE = 55  # below this similarity (0-100) a candidate is not offered as near
_CANDIDATES = 12  # candidates scored per source before the best are verified
_SPLIT = re.compile(r"[_\-.\s/#:]+|(?<=[a-z0-9])(?=[A-Z])")
_MIN_TIME_S = 1.0  # lookups stop when less of the call's time is left


class Near(BaseModel):
    id: str
    label: str | None = None
    triples: int | None = None  # a relation's triples, or a class's instances, where known


class TermWarning(BaseModel):
    """An IRI of the query that the KG does not have where the query puts it."""

    id: str
    position: str  # predicate, class or node
    problem: str  # what the text says of it
    nearest: list[Near] = []


def unknown_terms(backend: Backend, settings: Settings, terms, *, proven: bool) -> list[TermWarning]:
    """Warnings for the query's `terms` ((position, IRI, certain) from kg_mcp.sparql) that the KG does
    not have where the query puts them; `proven`: the answer has rows, so the certain ones are had."""
    todo = [(position, iri) for position, iri, certain in terms if not (proven and certain)]
    todo = [(position, iri) for position, iri in todo if not iri.startswith(("bif:", "sql:"))][:MAX_CHECKED]
    if not todo:
        return []
    kg = _KnownTerms(backend, settings)
    warnings: list[TermWarning] = []
    for position, iri in todo:
        if _short_of_time():
            break
        try:
            node = ox.NamedNode(iri)
            if kg.has(node, position):
                continue
            warnings.append(kg.warning(node, position, explain=len(warnings) < MAX_EXPLAINED))
        except (KGError, ValueError):  # an IRI the store cannot take, or a lookup the endpoint refused
            continue
    return warnings


def warning_lines(warnings: list[TermWarning]) -> list[str]:
    return [f"- {w.problem}" for w in warnings]


@dataclass
class _Relation:
    id: str
    label: str | None
    triples: int


class _KnownTerms:
    """What the server knows of the KG's relations and classes, and how near a name is to them."""

    def __init__(self, backend: Backend, settings: Settings):
        self.backend = backend
        self.settings = settings
        census = census_of(backend, settings)
        self.relations: dict[str, _Relation] = {
            r.iri: _Relation(r.id, r.label, r.triples) for r in (census.relations if census else [])
        }
        # Every predicate is listed (a small KG, counted whole): the list answers without a lookup.
        self.all_relations = census is not None and census.relation_total is not None and \
            census.relation_total <= len(self.relations)
        self._census = census

    def has(self, node: ox.NamedNode, position: str) -> bool:
        if position == PREDICATE and (node.value in self.relations or self.all_relations):
            return node.value in self.relations
        return self.backend.uses_as(node, position)

    def warning(self, node: ox.NamedNode, position: str, *, explain: bool) -> TermWarning:
        shown = self.backend.vocab.compact(node)
        elsewhere = position != NODE and self.backend.exists(node)
        if position == PREDICATE and node.value in declared_properties(self.backend, self._census):
            return TermWarning(id=shown, position=position, problem=(
                f"{shown} is declared here as a property, but no triple of this KG uses it as its relation"))
        if position == PREDICATE:
            problem = f"{shown} is no relation of this KG" + (" (it is one of its nodes)" if elsewhere else "")
        elif position == CLASS and elsewhere:
            return TermWarning(id=shown, position=position, problem=(
                f"no node of this KG has the class {shown} (`?x a {shown}` matches nothing); it is in the KG, "
                f"with no instances: its subclasses are `?c rdfs:subClassOf+ {shown}`"))
        elif position == CLASS:
            problem = f"{shown} is no class of this KG (no node has it as its rdf:type)"
        else:
            problem = f"{shown} is not in this KG"
        nearest = self.nearest(node, position) if explain else []
        if nearest:
            problem += "; nearest: " + ", ".join(_near_text(n, position) for n in nearest)
        return TermWarning(id=shown, position=position, problem=problem, nearest=nearest)

    # --- the nearest known -------------------------------------------------------------------------
    def nearest(self, node: ox.NamedNode, position: str) -> list[Near]:
        """Up to NEAREST terms the KG has in `position`, nearest to `node` by local name and label."""
        namespace, local = _split(node.value, self.backend)
        wanted = _words(local)
        if not wanted:
            return []
        scored: dict[str, float] = {}
        counts: dict[str, int | None] = {}
        labels: dict[str, str | None] = {}
        listed = self._listed(position)
        if listed:
            keys = list(listed)
            forms = [_words(_split(iri, self.backend)[1]) for iri in keys]
            for _, score, i in process.extract(wanted, forms, scorer=fuzz.ratio, limit=_CANDIDATES):
                iri = keys[i]
                scored[iri] = max(scored.get(iri, 0), score)
                counts[iri], labels[iri] = listed[iri]
            label_forms = {iri: _words(label) for iri, (_, label) in listed.items() if label}
            for _, score, iri in process.extract(wanted, label_forms, scorer=fuzz.ratio, limit=_CANDIDATES):
                scored[iri] = max(scored.get(iri, 0), score)
                counts[iri], labels[iri] = listed[iri]
        for found, name in self.backend.indexed_names(wanted, _CANDIDATES):
            score = max(fuzz.ratio(wanted, _words(name)), fuzz.ratio(wanted, _words(_split(found.value, self.backend)[1])))
            if score > scored.get(found.value, 0):
                scored[found.value] = score
                labels.setdefault(found.value, name)
                counts.setdefault(found.value, None)
        scored.pop(node.value, None)
        for iri in scored:  # the same namespace first among equals (a misspelled local name)
            scored[iri] += 5 if _split(iri, self.backend)[0] == namespace else 0
        ranked = sorted(scored, key=lambda iri: (-scored[iri], -(counts.get(iri) or 0), iri))
        chosen: list[Near] = []
        for iri in ranked:
            if scored[iri] < MIN_SCORE or len(chosen) == NEAREST or _short_of_time():
                break
            if iri not in listed and not self._fits(ox.NamedNode(iri), position):
                continue
            label = labels.get(iri)
            compact = self.backend.vocab.compact(ox.NamedNode(iri))
            if label and _words(label) == _words(_split(iri, self.backend)[1]):
                label = None  # `brick:hasTag` needs no "has tag" beside it
            chosen.append(Near(id=compact, label=label, triples=counts.get(iri)))
        return chosen

    def _listed(self, position: str) -> dict[str, tuple[int | None, str | None]]:
        """The terms of `position` the server holds a list of: IRI -> (triples or instances, label)."""
        if position == PREDICATE:  # the relations used, and those declared that no triple uses
            declared = dict.fromkeys(declared_properties(self.backend, self._census), (0, None))
            return {**declared, **{iri: (r.triples, r.label) for iri, r in self.relations.items()}}
        if position == CLASS:
            return {iri: (n, None) for iri, n in class_list(self.backend, self._census).items()}
        return {}

    def _fits(self, node: ox.NamedNode, position: str) -> bool:
        """Whether a name-index hit is a term of `position` (a class: has instances, or is declared one)."""
        if self.backend.uses_as(node, position):
            return True
        return position == CLASS and any(
            self.backend.has_triple(node, ox.NamedNode(RDF_TYPE), ox.NamedNode(kind)) for kind in CLASS_TYPES)


def _near_text(near: Near, position: str) -> str:
    details = []
    if near.label:
        details.append(near.label)
    if near.triples == 0:
        details.append("no instances" if position == CLASS else "declared, no triples")
    elif near.triples is not None:
        unit = "instance" if position == CLASS else "triple"
        details.append(f"{near.triples:,} {unit}{'' if near.triples == 1 else 's'}")
    return f"{near.id} ({', '.join(details)})" if details else near.id


def _split(iri: str, backend: Backend) -> tuple[str, str]:
    """(namespace, local name): the longest namespace the server has a prefix for, else the IRI cut
    after its last # or /."""
    vocab = backend.vocab
    for namespace in sorted([*vocab.prefixes.values(), *vocab.bare_namespaces], key=len, reverse=True):
        if iri.startswith(namespace) and len(iri) > len(namespace):
            return namespace, iri[len(namespace):]
    cut = max(iri.rfind("#"), iri.rfind("/"))
    return (iri[: cut + 1], iri[cut + 1 :]) if 0 <= cut < len(iri) - 1 else ("", iri)


def _words(name: str) -> str:
    """A name as lower-case words: `hasAssociatedTag`, `has_associated_tag` and `has associated tag`
    alike.

    >>> _words("hasAssociatedTag"), _words("film.film.directed_by")
    ('has associated tag', 'film film directed by')
    """
    return " ".join(part.lower() for part in _SPLIT.split(name) if part)


def _short_of_time() -> bool:
    left = deadline.left()
    return left is not None and left < _MIN_TIME_S
