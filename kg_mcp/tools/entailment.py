"""What RDFS and OWL entail from what the KG states, for `verify`: the chain of stated triples
behind a claim the KG does not state outright, and what the KG states against a claim.

Entailments followed, for a claim read forwards (s, P, o):
- P = rdfs:subClassOf: s reaches o through rdfs:subClassOf and owl:equivalentClass (either way);
- P = rdfs:subPropertyOf: the same through rdfs:subPropertyOf and owl:equivalentProperty;
- P = rdf:type: s rdf:type C, and C is o or reaches it as a class does;
- P declared an owl:TransitiveProperty: s reaches o through P;
- any P: s, or a node owl:sameAs it, has o, or a node owl:sameAs it, through P, through a
  sub-property of P, through the owl:inverseOf of one backwards, or through P backwards where P is
  an owl:SymmetricProperty.

Incompatible statements (verify's `conflicting`): a class claim whose class is owl:disjointWith a
class the subject already is or is under (disjointness holds down both hierarchies), an owl:sameAs
claim against a stated owl:differentFrom, and another value of a declared owl:FunctionalProperty.
Another superclass, type or label is no conflict: those relations hold many values at once.

A class is its own subclass where a cycle of stated rdfs:subClassOf (or owl:equivalentClass) leads
back to it: the chain is the cycle. Every walk is breadth-first, one round trip per level and step, through named nodes only (a blank
node cannot be sent back in a query to an endpoint), at most MAX_DEPTH levels and MAX_REACHED
nodes, with the call's deadline checked at each level. On an endpoint one SPARQL property path
first asks whether the target is reached at all (`Backend.reaches`); the walk then finds the chain.
Vocabulary terms the KG never uses cost one ASK each per backend, and no walk after that.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.calls import deadline
from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term
from kg_mcp.namespaces import (
    OWL,
    OWL_DIFFERENT_FROM,
    OWL_DISJOINT_WITH,
    OWL_EQUIVALENT_CLASS,
    OWL_EQUIVALENT_PROPERTY,
    OWL_FUNCTIONAL,
    OWL_INVERSE_OF,
    OWL_SAME_AS,
    OWL_SYMMETRIC,
    OWL_TRANSITIVE,
    RDF_TYPE,
    RDFS,
    RDFS_SUBCLASS,
    RDFS_SUBPROPERTY,
    SH,
    SKOS,
)

MAX_DEPTH = 16  # levels of one walk (class hierarchies of published ontologies run to about 12)
MAX_REACHED = 2000  # nodes one walk may reach before it stops and says so
MAX_SAME_AS = 50  # nodes of an owl:sameAs closure
_CHUNK = 200  # nodes sent in one step query

TYPE, SUBCLASS, SUBPROPERTY = ox.NamedNode(RDF_TYPE), ox.NamedNode(RDFS_SUBCLASS), ox.NamedNode(RDFS_SUBPROPERTY)
EQ_CLASS, EQ_PROPERTY = ox.NamedNode(OWL_EQUIVALENT_CLASS), ox.NamedNode(OWL_EQUIVALENT_PROPERTY)
SAME_AS, INVERSE_OF = ox.NamedNode(OWL_SAME_AS), ox.NamedNode(OWL_INVERSE_OF)
DISJOINT, DIFFERENT = ox.NamedNode(OWL_DISJOINT_WITH), ox.NamedNode(OWL_DIFFERENT_FROM)
OUT, IN = Direction.OUTGOING, Direction.INCOMING

Step = tuple[ox.NamedNode, Direction]
CLASS_STEPS: tuple[Step, ...] = ((SUBCLASS, OUT), (EQ_CLASS, OUT), (EQ_CLASS, IN))
PROPERTY_STEPS: tuple[Step, ...] = ((SUBPROPERTY, OUT), (EQ_PROPERTY, OUT), (EQ_PROPERTY, IN))
SAME_STEPS: tuple[Step, ...] = ((SAME_AS, OUT), (SAME_AS, IN))


@dataclass(frozen=True)
class Link:
    """One stated triple of a chain."""

    subject: Term
    predicate: ox.NamedNode
    object: Term


@dataclass
class Walk:
    """What a walk reached: each node with the node and triple it was reached by (None for a start)."""

    parents: dict[Term, tuple[Term, Link] | None] = field(default_factory=dict)
    found: Term | None = None  # the first target reached
    cut: bool = False  # a bound stopped the walk before it was done
    # A target that is a start, reached again (a cycle: ClassRule → ClassLevelRule → ClassRule): the
    # node it was reached from and the link that closed the cycle.
    closing: tuple[Term, Link] | None = None

    def chain(self, node: Term | None = None) -> list[Link]:
        """The stated triples from a start to `node` (the target found, by default)."""
        if node is None and self.closing is not None:
            source, link = self.closing
            return self.chain(source) + [link]
        links, at = [], self.found if node is None else node
        while at is not None and self.parents.get(at) is not None:
            at, link = self.parents[at]
            links.append(link)
        return links[::-1]


@dataclass
class Entailment:
    chain: list[Link]  # empty when only the engine's property path showed it
    rule: str  # what made the chain count, e.g. "rdfs:subClassOf chain"
    reached: int  # nodes the walk reached
    beyond_walk: bool = False  # the engine's property path reaches it past the walk's bounds


@dataclass
class Conflict:
    reason: str  # what the KG states against the claim
    chain: list[Link]


_used: weakref.WeakKeyDictionary[Backend, dict[str, bool]] = weakref.WeakKeyDictionary()


def uses(backend: Backend, predicate: ox.NamedNode) -> bool:
    """Whether any triple of the KG has `predicate` (asked once per backend)."""
    known = _used.setdefault(backend, {})
    if predicate.value not in known:
        known[predicate.value] = backend.uses_predicate(predicate)
    return known[predicate.value]


def walk(
    backend: Backend,
    parents: dict[Term, tuple[Term, Link] | None],
    first: Sequence[Step],
    then: Sequence[Step],
    is_target: Callable[[Term], bool] = lambda _: False,
    *,
    depth: int = MAX_DEPTH,
    most: int = MAX_REACHED,
) -> Walk:
    """Breadth-first from the nodes of `parents` (kept as they are): `first` steps, then `then`
    steps for the remaining levels (none: one level only), until a node `is_target`."""
    result = Walk(dict(parents))
    frontier = [n for n in parents if isinstance(n, ox.NamedNode)]
    steps = [s for s in first if uses(backend, s[0])]
    for level in range(depth):
        if not frontier or not steps:
            return result
        deadline.check()
        reached: list[Term] = []
        for predicate, direction in steps:
            for i in range(0, len(frontier), _CHUNK):
                room = most - len(result.parents)
                if room <= 0:
                    result.cut = True
                    return result
                for source, value in backend.step(frontier[i : i + _CHUNK], predicate, direction, room):
                    link = Link(source, predicate, value) if direction is OUT else Link(value, predicate, source)
                    if value in result.parents:
                        if result.parents[value] is None and is_target(value):  # back at a start: a cycle
                            result.found, result.closing = value, (source, link)
                            return result
                        continue
                    result.parents[value] = (source, link)
                    if is_target(value):
                        result.found = value
                        return result
                    reached.append(value)
        frontier = [n for n in reached if isinstance(n, ox.NamedNode)]
        steps = [s for s in then if uses(backend, s[0])]
    result.cut = bool(frontier) and bool(steps)
    return result


def same_as(backend: Backend, nodes: Sequence[Term]) -> Walk:
    """`nodes` and what owl:sameAs links to them, at any distance (up to MAX_SAME_AS nodes)."""
    return walk(backend, {n: None for n in nodes}, SAME_STEPS, SAME_STEPS, most=MAX_SAME_AS)


def property_types(backend: Backend, predicate: ox.NamedNode) -> set[str]:
    """The classes the KG gives `predicate` (owl:TransitiveProperty, owl:FunctionalProperty, ...)."""
    if not uses(backend, TYPE):
        return set()
    return {v.value for _, v in backend.step([predicate], TYPE, OUT, 50) if isinstance(v, ox.NamedNode)}


def entailed(
    backend: Backend,
    starts: Sequence[Term],
    predicate: ox.NamedNode,
    targets: Sequence[Term],
    matches: Callable[[Term], bool],
) -> Entailment | None:
    """The chain by which (s, predicate, o) follows for some s of `starts` and o of `targets` (or
    a value `matches` accepts), or None when nothing the walks reach entails it."""
    if predicate in (SUBCLASS, SUBPROPERTY, TYPE):
        steps = CLASS_STEPS if predicate != SUBPROPERTY else PROPERTY_STEPS
        first = ((TYPE, OUT),) if predicate == TYPE else steps
        return _transitive(backend, starts, first, steps, targets, matches, _rule(backend, predicate))
    if predicate == SAME_AS:  # owl:sameAs is symmetric and transitive: one closure answers it
        closure = same_as(backend, starts) if uses(backend, SAME_AS) else Walk()
        found = next((t for t in targets if t in closure.parents and t not in starts), None)
        return Entailment(closure.chain(found), "owl:sameAs closure", len(closure.parents)) if found else None
    if OWL_TRANSITIVE in (kinds := property_types(backend, predicate)):
        found = _transitive(backend, starts, ((predicate, OUT),), ((predicate, OUT),), targets, matches, "owl:TransitiveProperty")
        if found:
            return found
    subjects = same_as(backend, starts) if uses(backend, SAME_AS) else Walk({s: None for s in starts})
    objects = same_as(backend, targets) if uses(backend, SAME_AS) and targets else Walk({t: None for t in targets})
    steps = [(p, OUT) for p in sub_properties(backend, predicate)]
    steps += [(q, IN) for q in inverses(backend, [p for p, _ in steps])]
    if OWL_SYMMETRIC in kinds:
        steps.append((predicate, IN))
    if steps == [(predicate, OUT)] and len(subjects.parents) == len(starts) and len(objects.parents) == len(targets):
        return None  # no sub-property, inverse, symmetry or owl:sameAs: the walk would be the direct check again
    hit = walk(backend, subjects.parents, steps, (), lambda v: v in objects.parents or matches(v))
    if hit.found is None:
        return None
    chain = hit.chain() + _back_to_start(objects, hit.found)
    rules = []
    if any(link.predicate == SAME_AS for link in chain):
        rules.append("owl:sameAs")
    link = next(link for link in chain if link.predicate != SAME_AS)
    forwards = link.subject in subjects.parents
    if link.predicate != predicate:
        rules.append("rdfs:subPropertyOf" if forwards else "owl:inverseOf")
    elif not forwards:
        rules.append("owl:SymmetricProperty")
    if not rules:
        return None  # stated outright: not an entailment (the direct check missed it on a literal's form)
    return Entailment(chain, " and ".join(rules), len(hit.parents))


def _rule(backend: Backend, predicate: ox.NamedNode) -> str:
    return f"{backend.vocab.compact(predicate)} chain"


def _transitive(backend, starts, first, then, targets, matches, rule: str) -> Entailment | None:
    named_targets = [t for t in targets if isinstance(t, ox.NamedNode)]
    named_starts = [s for s in starts if isinstance(s, ox.NamedNode)]
    engine = backend.reaches(named_starts, first, then, named_targets) if named_targets and named_starts else None
    if engine is False:
        return None
    wanted = set(targets)
    found = walk(backend, {s: None for s in starts}, first, then, lambda v: v in wanted or matches(v))
    if found.found is not None:
        return Entailment(found.chain(), rule, len(found.parents))
    if engine:  # the property path reaches it, past what the walk may read
        return Entailment([], rule, len(found.parents), beyond_walk=True)
    return None


def _back_to_start(walked: Walk, node: Term) -> list[Link]:
    """The links from `node` back to the start of `walked` (an owl:sameAs chain read backwards)."""
    return walked.chain(node)[::-1]


def sub_properties(backend: Backend, predicate: ox.NamedNode) -> list[ox.NamedNode]:
    """`predicate` and its sub-properties at any depth (and equivalent properties)."""
    down = ((SUBPROPERTY, IN), (EQ_PROPERTY, OUT), (EQ_PROPERTY, IN))
    found = walk(backend, {predicate: None}, down, down, most=100)
    return [p for p in found.parents if isinstance(p, ox.NamedNode)]


def inverses(backend: Backend, predicates: Sequence[ox.NamedNode]) -> list[ox.NamedNode]:
    """The properties stated owl:inverseOf any of `predicates` (either way round)."""
    if not predicates or not uses(backend, INVERSE_OF):
        return []
    pairs = backend.step(predicates, INVERSE_OF, OUT, 100) + backend.step(predicates, INVERSE_OF, IN, 100)
    return list(dict.fromkeys(v for _, v in pairs if isinstance(v, ox.NamedNode)))


def conflict(backend: Backend, starts: Sequence[Term], predicate: ox.NamedNode, targets: Sequence[Term]) -> Conflict | None:
    """What the KG states against (s, predicate, o): a disjoint class, or a different individual."""
    named = [t for t in targets if isinstance(t, ox.NamedNode)]
    if not named:
        return None
    if predicate in (SUBCLASS, TYPE) and uses(backend, DISJOINT):
        first = ((TYPE, OUT),) if predicate == TYPE else CLASS_STEPS
        mine = walk(backend, {s: None for s in starts}, first, CLASS_STEPS)
        theirs = walk(backend, {t: None for t in named}, CLASS_STEPS, CLASS_STEPS)
        # the subject's classes: itself and what is above it; for an individual, its types and above
        classes = [c for c in mine.parents if isinstance(c, ox.NamedNode) and (predicate == SUBCLASS or c not in starts)]
        for direction in (OUT, IN):
            for source, other in backend.step(classes, DISJOINT, direction, MAX_REACHED):
                if other in theirs.parents:
                    stated = Link(source, DISJOINT, other) if direction is OUT else Link(other, DISJOINT, source)
                    chain = mine.chain(source) + [stated] + _back_to_start(theirs, other)
                    return Conflict("owl:disjointWith", chain)
    if predicate == SAME_AS and uses(backend, DIFFERENT):
        for direction in (OUT, IN):
            for source, other in backend.step([s for s in starts if isinstance(s, ox.NamedNode)], DIFFERENT, direction, 100):
                if other in named:
                    stated = Link(source, DIFFERENT, other) if direction is OUT else Link(other, DIFFERENT, source)
                    return Conflict("owl:differentFrom", [stated])
    return None


def functional(backend: Backend, predicate: ox.NamedNode) -> bool:
    return OWL_FUNCTIONAL in property_types(backend, predicate)


# Relations of the RDF, RDFS, OWL, SKOS and SHACL vocabularies that hold many values at once (a
# class has several superclasses, a concept several broader ones): another value is no conflict.
MANY_VALUED = frozenset(
    {RDF_TYPE, RDFS_SUBCLASS, RDFS_SUBPROPERTY, OWL_EQUIVALENT_CLASS, OWL_EQUIVALENT_PROPERTY, OWL_SAME_AS,
     OWL_INVERSE_OF, OWL_DISJOINT_WITH, OWL_DIFFERENT_FROM}
    | {RDFS + t for t in ("domain", "range", "seeAlso", "isDefinedBy", "member", "label", "comment")}
    | {OWL + t for t in ("imports", "propertyDisjointWith", "unionOf", "intersectionOf", "annotatedProperty")}
    | {SKOS + t for t in ("broader", "narrower", "related", "broaderTransitive", "narrowerTransitive",
                           "semanticRelation", "exactMatch", "closeMatch", "broadMatch", "narrowMatch",
                           "relatedMatch", "mappingRelation", "inScheme", "hasTopConcept", "topConceptOf", "member",
                           "prefLabel", "altLabel", "hiddenLabel", "definition", "note", "scopeNote", "example", "notation")}
    | {SH + t for t in ("targetClass", "targetNode", "targetSubjectsOf", "targetObjectsOf", "property", "node",
                         "class", "rule", "sparql", "declare", "ignoredProperties")}
    | {"http://schema.org/" + t for t in ("domainIncludes", "rangeIncludes", "sameAs", "name", "description")}
)


def many_valued(backend: Backend, predicate: ox.NamedNode) -> bool:
    """Whether other values of `predicate` say nothing against a claimed one: a vocabulary relation
    that holds many values, or one of the profile's names and descriptions."""
    profile = backend.profile
    names = (*profile.label_predicates, *profile.alias_predicates, *profile.description_predicates)
    return predicate.value in MANY_VALUED or predicate.value in names
