"""`verify`: check claimed facts against the KG before trusting an answer.

Each claim is a triple (subject, relation, object; ids or exact labels) or a path of triples.
A triple is `supported` when the KG states it, or when RDFS and OWL entail it from what the KG
states (subclass and sub-property chains, types through superclasses, equivalent classes,
owl:sameAs, owl:inverseOf, transitive and symmetric properties; kg_mcp.tools.entailment), the
chain given as evidence. It is `conflicting` when the KG states something incompatible: a disjoint
class, a different individual, or another value of a relation that holds one value (a declared
functional property, or a relation of the data, read closed-world as before). Other values of a
relation that holds many by nature (another superclass, type or label) leave it `not_found`, with
those values listed. `unknown_entity` when a name or id is not in the KG. A name that several
entities have is checked for each and said (`ambiguous`). A path takes the status of its first hop
that is not supported.

A call is bounded: at most MAX_CLAIMS claims and MAX_TOTAL_HOPS triples in all (each read once),
the call's deadline checked before every triple, and each verdict keeps at most
MAX_CONFLICTS_SHOWN values as evidence.
"""

from __future__ import annotations

import re
from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel, Field

from kg_mcp.calls import deadline, progress
from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput, KGError, UnknownEntity, UnknownRelation
from kg_mcp.ids import check_text
from kg_mcp.quoting import clipped, quoted
from kg_mcp.settings import Settings
from kg_mcp.tools import entailment
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

MAX_CLAIMS = 50
MAX_HOPS = 10
MAX_TOTAL_HOPS = 100  # triples checked in one call, over all claims and paths
MAX_CONFLICTS_SHOWN = 20  # values a verdict's reason lists
VALUE_START = 100  # characters of a long literal a verdict's reason shows (with its length and the call that reads it)
MAX_EVIDENCE = 5  # triples a verdict's structured evidence keeps (evidence_total says how many there were)
_MIDNIGHT = re.compile(r"T00:00:00Z$")

Status = Literal["supported", "conflicting", "not_found", "unknown_entity"]


class TripleClaim(BaseModel):
    subject: str = Field(description="id or exact label of the subject")
    relation: str = Field(description="relation id or label; ~rel reads the triple backwards")
    object: str = Field(description="id, exact label, or literal value (a date, number, string)")


class PathClaim(BaseModel):
    path: list[TripleClaim] = Field(min_length=1, max_length=MAX_HOPS, description="hops checked in order")


class Evidence(BaseModel):
    subject: TermOut
    relation: str
    object: TermOut


class Ambiguity(BaseModel):
    """A name of the claim that several entities have: each was checked."""

    role: Literal["subject", "object"]
    name: str
    ids: list[str]


class HopVerdict(BaseModel):
    claim: TripleClaim
    status: Status
    reason: str
    evidence: list[Evidence] = []
    evidence_total: int = 0  # the KG's triples behind the verdict; evidence keeps the first MAX_EVIDENCE
    ambiguous: list[Ambiguity] = []  # names of the claim that several entities have


class ClaimVerdict(BaseModel):
    status: Status
    hops: list[HopVerdict]


class VerifyResult(BaseModel):
    claims: list[ClaimVerdict]


def verify(backend: Backend, settings: Settings, claims: list[TripleClaim | PathClaim]) -> ToolOutput:
    if not claims:
        raise InvalidInput("claims is empty.", "Pass claims like {'subject': ..., 'relation': ..., 'object': ...}.")
    if len(claims) > MAX_CLAIMS:
        raise InvalidInput(f"At most {MAX_CLAIMS} claims at once; got {len(claims)}.", "Split them over several calls.")
    triples = sum(len(c.path) if isinstance(c, PathClaim) else 1 for c in claims)
    if triples > MAX_TOTAL_HOPS:
        raise InvalidInput(
            f"At most {MAX_TOTAL_HOPS} triples are checked in one call (over all claims and path hops); got {triples}.",
            "Split the claims over several calls.",
        )
    namer = Namer(backend, settings)
    verdicts = []
    for done, claim in enumerate(claims):
        progress.step(done, len(claims), "claims checked")
        hops = claim.path if isinstance(claim, PathClaim) else [claim]
        checked = []
        for hop in hops:
            deadline.check()
            checked.append(_check(backend, namer, hop))
        status = next((h.status for h in checked if h.status != "supported"), "supported")
        verdicts.append(ClaimVerdict(status=status, hops=checked))
    md_rows = []
    for i, verdict in enumerate(verdicts, 1):
        for j, hop in enumerate(verdict.hops, 1):
            label = f"{i}" if len(verdict.hops) == 1 else f"{i}.{j}"
            c = hop.claim
            md_rows.append((label, f"({c.subject}, {c.relation}, {c.object})", hop.status, hop.reason))
    summary = ", ".join(f"{sum(v.status == s for v in verdicts)} {s}" for s in ("supported", "conflicting", "not_found", "unknown_entity") if any(v.status == s for v in verdicts))
    text = f"verify: {plural(len(verdicts), 'claim')}: {summary}.\n" + table(("claim", "triple", "status", "evidence"), md_rows, settings)
    # Evidence the cell cuts (a chain, the values the KG has instead) follows the table whole: a
    # reason is bounded (MAX_CONFLICTS_SHOWN values, long literals by their start).
    chains = [(label, reason) for label, _, _, reason in md_rows if len(reason) > settings.max_cell_chars]
    if chains:
        text += "\n\nWhole evidence of the rows cut above:\n" + "\n".join(f"- {label}: {reason}" for label, reason in chains)
    return ToolOutput(capped(text, settings, "Verify fewer claims at once.", read_whole=not chains), VerifyResult(claims=verdicts))


def _check(backend: Backend, namer: Namer, claim: TripleClaim) -> HopVerdict:
    echo = _echo(claim, namer.settings.max_cell_chars)
    ambiguous: list[Ambiguity] = []

    def verdict(status: Status, reason: str, evidence=(), total: int = 0) -> HopVerdict:
        said = "".join(f"; {quoted(a.name)} names {len(a.ids)} entities ({', '.join(a.ids)}), each checked" for a in ambiguous)
        # Plain data, validated once in pydantic's compiled core (not a model per term in Python).
        return HopVerdict.model_validate({
            "claim": echo, "status": status, "reason": reason + said, "evidence": list(evidence),
            "evidence_total": total, "ambiguous": ambiguous,
        })

    try:
        subjects = _entities(backend, claim.subject)
    except UnknownEntity as e:
        return verdict("unknown_entity", f"subject: {e.message}")
    if len(subjects) > 1:
        ambiguous.append(Ambiguity(role="subject", name=echo.subject, ids=[namer.id(s) for s in subjects]))
    try:
        predicate, direction = backend.resolve_relation(claim.relation)
    except UnknownRelation as e:
        return verdict("not_found", f"relation: {e.message}")
    target = check_text(claim.object, "object")
    try:
        object_node = backend.vocab.parse(target)
    except KGError:
        object_node = None
    objects = [object_node] if object_node is not None else _named(backend, target)
    if len(objects) > 1:
        ambiguous.append(Ambiguity(role="object", name=echo.object, ids=[namer.id(o) for o in objects]))
    namer.add([predicate])
    relation = namer.id(predicate)
    cap = namer.settings.search_p
    seen_values = []
    for subject in subjects:
        values = [n.value for n in backend.neighbours(subject, direction, [predicate], cap)]
        # An id is matched without labels: only a name needs every value's label.
        namer.add([subject, *values] if object_node is None else [subject])
        matches = [v for v in values if _same(backend, namer, v, target, object_node)]
        if matches:
            namer.add(matches[:MAX_EVIDENCE])
            evidence = [_evidence(namer, subject, relation, direction, v) for v in matches[:MAX_EVIDENCE]]
            shown = ", ".join(namer.value_text(v) for v in matches[:5])
            return verdict("supported", f"{namer.heading(subject)} {_arrow(relation, direction)} {shown}", evidence, len(matches))
        seen_values += [(subject, v) for v in values]
    if not seen_values:
        try:
            for subject in subjects:
                backend.require(subject, claim.subject)
        except UnknownEntity as e:
            return verdict("unknown_entity", f"subject: {e.message}")
    # Read forwards, (s, P, o): what RDFS and OWL entail, then what the KG states against it.
    forward = direction is Direction.OUTGOING
    starts, ends = (subjects, objects) if forward else (objects, subjects)
    if starts:
        found = entailment.entailed(
            backend, starts, predicate, ends, (lambda v: _same(backend, namer, v, target, object_node)) if forward else _never
        )
        if found is not None:
            return _entailed(namer, found, verdict)
        stated = entailment.conflict(backend, starts, predicate, ends)
        if stated is not None:
            namer.add(_chain_terms(stated.chain))
            return verdict("conflicting", f"the KG states {stated.reason}: {_chain_text(namer, stated.chain)}",
                           _chain_evidence(namer, stated.chain), len(stated.chain))
    if seen_values:
        named = [(s, v) for s, v in seen_values if not isinstance(v, ox.BlankNode)]
        listed_values = named[:MAX_CONFLICTS_SHOWN]
        namer.add(v for _, v in listed_values)
        listed = _values_text(namer, seen_values, listed_values, relation, direction)
        evidence = [_evidence(namer, s, relation, direction, v) for s, v in (listed_values or seen_values)[:MAX_EVIDENCE]]
        if entailment.many_valued(backend, predicate) and not entailment.functional(backend, predicate):
            # Another superclass, type or label says nothing against this one.
            reason = f"neither stated nor entailed; the KG has {listed} ({relation} holds several values: no conflict)"
            return verdict("not_found", reason, evidence, len(seen_values))
        return verdict("conflicting", f"the KG has {listed}", evidence, len(seen_values))
    if object_node is not None and not backend.exists(object_node):
        return verdict("unknown_entity", f"object: {quoted(target)} is not in the KG")
    subject_text = ", ".join(namer.heading(s) for s in subjects)
    return verdict("not_found", f"{subject_text} has no {_arrow(relation, direction)} triples")


def _values_text(namer: Namer, seen: list, listed: list, relation: str, direction: Direction) -> str:
    """The values the KG has instead, as an evidence cell reads them: the call that reads them all
    first (a cell is cut), then each named value (a long literal by its start and length), then
    how many more and how many anonymous."""
    subjects = list(dict.fromkeys(s for s, _ in seen))
    values = ", ".join(_value_text(namer, v) for _, v in listed)
    more = len([v for _, v in seen if not isinstance(v, ox.BlankNode)]) - len(listed)
    blank = sum(isinstance(v, ox.BlankNode) for _, v in seen)
    rest = (f" and {more:,} more" if more else "") + (f" and {blank:,} anonymous (blank nodes)" if blank else "")
    if not values:  # every value is a blank node
        rest = f" {blank:,} anonymous values (blank nodes)"
    where = "" if direction is Direction.OUTGOING else ', direction="incoming"'
    reads = (f'; search(entity="{namer.id(subjects[0])}"{where}, properties_to_filter_for=["{relation}"]) '
             "reads them whole") if len(subjects) == 1 and (rest or values != _plain(namer, listed)) else ""
    return f"{_arrow(relation, direction)} = {values}{rest}{reads}" if values else f"{_arrow(relation, direction)} ={rest}{reads}"


def _plain(namer: Namer, listed: list) -> str:
    return ", ".join(namer.value_text(v) + (f" ({namer.label(v)})" if namer.label(v) else "") for _, v in listed)


def _value_text(namer: Namer, value) -> str:
    """A value as a cell lists it: an entity with its label; a long literal by its start and length."""
    if isinstance(value, ox.Literal) and len(value.value) > VALUE_START:
        return f"{namer.value_text(value)[:VALUE_START]}… ({len(value.value):,} characters)"
    label = namer.label(value)
    return namer.value_text(value) + (f" ({label})" if label else "")


def _never(_value) -> bool:
    return False


def _named(backend: Backend, name: str) -> list[ox.NamedNode]:
    """The entities whose exact label is `name` (up to 5; none for a literal value)."""
    try:
        return backend.labelled(name, 5)
    except KGError:  # a text no label query takes
        return []


def _entailed(namer: Namer, found: entailment.Entailment, verdict) -> HopVerdict:
    if found.beyond_walk:
        return verdict("supported", f"entailed ({found.rule}): the engine's property path reaches it, further than the "
                                    f"{entailment.MAX_DEPTH} levels or {entailment.MAX_REACHED} nodes a walk shows")
    namer.add(_chain_terms(found.chain))
    return verdict("supported", f"entailed ({found.rule}): {_chain_text(namer, found.chain)}",
                   _chain_evidence(namer, found.chain), len(found.chain))


def _chain_terms(chain: list[entailment.Link]) -> list:
    return [t for link in chain for t in (link.subject, link.predicate, link.object)]


def _chain_text(namer: Namer, chain: list[entailment.Link]) -> str:
    """A chain as it reads: "brick:Chiller → brick:HVAC_Equipment → brick:Equipment (rdfs:subClassOf)"
    when one relation links it all, else each link with its relation."""
    if not chain:
        return ""
    relations = {link.predicate for link in chain}
    if len(chain) > 1 and len(relations) == 1 and all(a.object == b.subject for a, b in zip(chain, chain[1:])):
        nodes = [chain[0].subject, *(link.object for link in chain)]
        return " → ".join(namer.value_text(n) for n in nodes) + f" ({namer.id(chain[0].predicate)})"
    return "; ".join(f"{namer.value_text(l.subject)} {namer.id(l.predicate)} {namer.value_text(l.object)}" for l in chain)


def _chain_evidence(namer: Namer, chain: list[entailment.Link]) -> list[dict]:
    """Evidence as plain data."""
    return [{"subject": namer.term(l.subject), "relation": namer.id(l.predicate), "object": namer.term(l.object)}
            for l in chain[:MAX_EVIDENCE]]


def _echo(claim: TripleClaim, chars: int) -> TripleClaim:
    """The claim as the verdict repeats it, each part cut as a table cell is."""
    return TripleClaim(
        subject=clipped(claim.subject, chars), relation=clipped(claim.relation, chars), object=clipped(claim.object, chars)
    )


def _entities(backend: Backend, ref: str) -> list[ox.NamedNode]:
    """The entities `ref` may mean: one for an id, all exact-label matches (up to 5) for a name."""
    try:
        # Not looked up yet: _check requires the subject only when it finds no triples for it.
        return [backend.resolve_entity(ref, check=False)]
    except InvalidInput:  # an ambiguous label: check the claim against each candidate
        hits = [h.node for h in backend.find_entities(ref, 5) if h.match in ("exact", "id")]
        if hits:
            return hits
        raise


def _same(backend: Backend, namer: Namer, value, target: str, node: ox.NamedNode | None) -> bool:
    """Does a KG value match what the claim wrote (`node`: the claim's object parsed as an id, or
    None): its id, its label, or its literal text?"""
    if isinstance(value, ox.Literal):
        return _norm(value.value) == _norm(target) or _norm(namer.value_text(value)) == _norm(target)
    if node is not None:
        return node == value or value.value == target.strip("<>")
    if backend.vocab.compact(value) == target or value.value == target.strip("<>"):
        return True
    label = namer.label(value)
    return label is not None and _norm(label) == _norm(target)


def _norm(text: str) -> str:
    return " ".join(_MIDNIGHT.sub("", text).casefold().split())


def _arrow(relation: str, direction: Direction) -> str:
    return relation if direction is Direction.OUTGOING else f"~{relation}"


def _evidence(namer: Namer, focus, relation: str, direction: Direction, value) -> dict:
    """An Evidence as plain data."""
    subject, obj = (focus, value) if direction is Direction.OUTGOING else (value, focus)
    return {"subject": namer.term(subject), "relation": relation, "object": namer.term(obj)}
