"""`verify`: check claimed facts against the KG before trusting an answer.

Each claim is a triple (subject, relation, object; ids or exact labels) or a path of triples.
A triple is `supported` (the KG has it), `conflicting` (the KG has other values for that subject
and relation: they are listed), `not_found`, or `unknown_entity`. A path takes the status of its
first hop that is not supported.
"""

from __future__ import annotations

import re
from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel, Field

from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput, KGError, UnknownEntity, UnknownRelation
from kg_mcp.ids import check_text
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

MAX_CLAIMS = 50
MAX_HOPS = 10
MAX_CONFLICTS_SHOWN = 20
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


class HopVerdict(BaseModel):
    claim: TripleClaim
    status: Status
    reason: str
    evidence: list[Evidence] = []


class ClaimVerdict(BaseModel):
    status: Status
    hops: list[HopVerdict]


class VerifyResult(BaseModel):
    claims: list[ClaimVerdict]


def verify(backend: Backend, settings: Settings, claims: list[TripleClaim | PathClaim]) -> ToolOutput:
    if not claims:
        raise InvalidInput("claims is empty.", "Pass claims like {'subject': ..., 'relation': ..., 'object': ...}.")
    if len(claims) > MAX_CLAIMS:
        raise InvalidInput(f"At most {MAX_CLAIMS} claims at once; got {len(claims)}.")
    namer = Namer(backend, settings)
    verdicts = []
    for claim in claims:
        hops = claim.path if isinstance(claim, PathClaim) else [claim]
        checked = [_check(backend, namer, hop) for hop in hops]
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
    return ToolOutput(capped(text, settings, "Verify fewer claims at once."), VerifyResult(claims=verdicts))


def _check(backend: Backend, namer: Namer, claim: TripleClaim) -> HopVerdict:
    def verdict(status: Status, reason: str, evidence=()) -> HopVerdict:
        return HopVerdict(claim=claim, status=status, reason=reason, evidence=list(evidence))

    try:
        subjects = _entities(backend, claim.subject)
    except UnknownEntity as e:
        return verdict("unknown_entity", f"subject: {e.message}")
    try:
        predicate, direction = backend.resolve_relation(claim.relation)
    except UnknownRelation as e:
        return verdict("not_found", f"relation: {e.message}")
    target = check_text(claim.object, "object")
    namer.add([predicate])
    relation = namer.id(predicate)
    cap = namer.settings.search_p
    seen_values = []
    for subject in subjects:
        values = [n.value for n in backend.neighbours(subject, direction, [predicate], cap)]
        namer.add([subject, *values])
        matches = [v for v in values if _same(backend, namer, v, target)]
        if matches:
            evidence = [_evidence(namer, subject, relation, direction, v) for v in matches]
            shown = ", ".join(namer.value_text(v) for v in matches[:5])
            return verdict("supported", f"{namer.heading(subject)} {_arrow(relation, direction)} {shown}", evidence)
        seen_values += [(subject, v) for v in values]
    if not seen_values:
        try:
            for subject in subjects:
                backend.require(subject, claim.subject)
        except UnknownEntity as e:
            return verdict("unknown_entity", f"subject: {e.message}")
    if seen_values:
        listed = ", ".join(
            f"{namer.value_text(v)}" + (f" ({namer.label(v)})" if namer.label(v) else "") for _, v in seen_values[:MAX_CONFLICTS_SHOWN]
        )
        more = f" and {len(seen_values) - MAX_CONFLICTS_SHOWN} more" if len(seen_values) > MAX_CONFLICTS_SHOWN else ""
        evidence = [_evidence(namer, s, relation, direction, v) for s, v in seen_values[:MAX_CONFLICTS_SHOWN]]
        return verdict("conflicting", f"the KG has {relation} = {listed}{more}", evidence)
    try:
        object_node = backend.vocab.parse(target)
    except KGError:
        object_node = None
    if object_node is not None and not backend.exists(object_node):
        return verdict("unknown_entity", f"object: {target} is not in the KG")
    subject_text = ", ".join(namer.heading(s) for s in subjects)
    return verdict("not_found", f"{subject_text} has no {_arrow(relation, direction)} triples")


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


def _same(backend: Backend, namer: Namer, value, target: str) -> bool:
    """Does a KG value match what the claim wrote: its id, its label, or its literal text?"""
    if isinstance(value, ox.Literal):
        return _norm(value.value) == _norm(target) or _norm(namer.value_text(value)) == _norm(target)
    if backend.vocab.compact(value) == target or value.value == target.strip("<>"):
        return True
    try:
        node = backend.vocab.parse(target)
    except KGError:
        node = None
    if node is not None:
        return node == value
    label = namer.label(value)
    return label is not None and _norm(label) == _norm(target)


def _norm(text: str) -> str:
    return " ".join(_MIDNIGHT.sub("", text).casefold().split())


def _arrow(relation: str, direction: Direction) -> str:
    return relation if direction is Direction.OUTGOING else f"~{relation}"


def _evidence(namer: Namer, focus, relation: str, direction: Direction, value) -> Evidence:
    subject, obj = (focus, value) if direction is Direction.OUTGOING else (value, focus)
    return Evidence(subject=namer.out(subject), relation=relation, object=namer.out(obj))
