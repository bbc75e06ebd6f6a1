"""R2-KG's record of what the Operator collected (as the Supervisor is shown it) and the reading
of the Supervisor's reply: an answer with its path, or feedback on what to explore next."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kg_mcp.agents.models.json_text import parse_json_object
from kg_mcp.agents.run import Hop, final_answers

from kg_mcp.prompt_files import read_prompt


def _node(term: dict[str, Any]) -> str:
    """`label [id]` for an entity with a label of its own, else the id or literal value."""
    ident, label = str(term.get("id", "")), term.get("label")
    if term.get("kind") == "literal" or not label or label == ident:
        return ident
    return f"{label} [{ident}]"


@dataclass
class Step:
    """One relation explored from one entity."""

    number: int
    hop: int
    entity: dict[str, Any]
    relation: str
    total: int
    neighbours: list[dict[str, Any]]


@dataclass
class Evidence:
    topics: dict[str, str] = field(default_factory=dict)  # name -> id
    relation_lists: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = field(default_factory=dict)
    steps: dict[tuple[str, str], Step] = field(default_factory=dict)
    depth: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, ident in self.topics.items():
            self.depth[ident] = 0
            self.labels.setdefault(ident, name)

    def add_relations(self, data: dict[str, Any]) -> None:
        entity = data.get("entity") or {}
        self._know(entity)
        self.relation_lists[entity.get("id", "?")] = (entity, list(data.get("relations") or []))

    def add_explored(self, data: dict[str, Any]) -> list[Hop]:
        entity = data.get("entity") or {}
        self._know(entity)
        source = entity.get("id", "?")
        hop = self.depth.setdefault(source, 0) + 1
        walked = []
        for rel in data.get("relations") or []:
            neighbours = list(rel.get("neighbours") or [])
            for n in neighbours:
                self._know(n)
                if n.get("kind", "iri") != "literal":
                    self.depth[n["id"]] = min(self.depth.get(n["id"], hop), hop)
            key = (source, rel["relation"])
            number = self.steps[key].number if key in self.steps else len(self.steps) + 1
            self.steps[key] = Step(
                number, hop, entity, rel["relation"], int(rel.get("total", len(neighbours))), neighbours
            )
            walked.append(Hop(source, rel["relation"], [n["id"] for n in neighbours]))
        return walked

    def _know(self, term: dict[str, Any]) -> None:
        if term.get("id") and term.get("kind", "iri") != "literal":
            self.labels[term["id"]] = term.get("label") or self.labels.get(term["id"])

    @property
    def triple_count(self) -> int:
        return sum(len(s.neighbours) for s in self.steps.values())

    def relations_text(self) -> str:
        if not self.relation_lists:
            return "(none yet)"
        lines = []
        for entity, rows in self.relation_lists.values():
            listed = ", ".join(f"{r['relation']} ({r.get('triples', '?')})" for r in rows) or "no relations"
            lines.append(f"- {_node(entity)}: {listed}")
        return "\n".join(lines)

    def triples_text(self) -> str:
        if not self.steps:
            return "(none yet)"
        blocks = []
        for step in sorted(self.steps.values(), key=lambda s: s.number):
            shown = len(step.neighbours)
            noun = "triple" if step.total == 1 else "triples"
            count = f"{step.total} {noun}" if shown == step.total else f"{shown} of {step.total} {noun} shown"
            lines = [
                f"Step {step.number} (hop {step.hop}): {_node(step.entity)} via {step.relation}: {count}"
            ]
            forward = step.relation.removeprefix("~")
            for n in step.neighbours:
                s, o = (
                    (_node(n), _node(step.entity))
                    if step.relation.startswith("~")
                    else (_node(step.entity), _node(n))
                )
                lines.append(f"  ({s}, {forward}, {o})")
            blocks.append("\n".join(lines))
        return "\n".join(blocks)

    def explored_at_hop(self, hop: int) -> list[str]:
        return list(
            dict.fromkeys(
                _node(s.entity) for s in sorted(self.steps.values(), key=lambda s: s.number) if s.hop == hop
            )
        )

    def entity_id(self, text: str) -> str | None:
        """The id of an entity named by id, `label [id]` or exact label, among those seen."""
        text = text.strip()
        bracketed = re.fullmatch(r"(.*?)\s*\[([^\[\]]+)\]", text)
        if bracketed and bracketed.group(2) in self.labels:
            return bracketed.group(2)
        if text in self.labels:
            return text
        for ident, label in self.labels.items():
            if label and label == text:
                return ident
        return None

    def as_label(self, answer: str) -> str:
        answer = answer.strip()
        ident = self.entity_id(answer)
        if (
            ident is not None
            and self.labels.get(ident)
            and (answer == ident or answer.endswith(f"[{ident}]"))
        ):
            return self.labels[ident] or answer
        return answer


# --- the Supervisor's reply, read leniently ---


@dataclass
class Feedback:
    entity: str | None = None
    relations: list[str] = field(default_factory=list)
    rollback_to_hop: int | None = None
    message: str = ""


@dataclass
class Verdict:
    answers: list[str] | None  # None: feedback
    reasoning: str = ""
    feedback: Feedback | None = None


def string_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value)]


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None and str(value).strip() != "" else None
    except (TypeError, ValueError):
        match = re.search(r"\d+", str(value))
        return int(match.group()) if match else None


def parse_verdict(text: str) -> Verdict:
    """The Supervisor's decision from its reply: JSON as asked, or the nearest reading of it."""
    data = parse_json_object(text)
    if data is None:
        answers = final_answers(text)
        if answers:
            return Verdict(answers, reasoning=text.strip())
        return Verdict(None, feedback=Feedback(message=text.strip()))
    decision = str(data.get("decision") or data.get("action") or "").strip().lower()
    answers = string_list(data.get("answers", data.get("answer")))
    reasoning = data.get("reasoning_path", data.get("reasoning", ""))
    if isinstance(reasoning, list):
        reasoning = " -> ".join(str(r) for r in reasoning)
    raw = data.get("feedback")
    feedback = Feedback()
    if isinstance(raw, dict):
        feedback = Feedback(
            entity=(str(raw["entity"]).strip() or None) if raw.get("entity") else None,
            relations=string_list(raw.get("relations", raw.get("relation"))),
            rollback_to_hop=_int_or_none(raw.get("rollback_to_hop", raw.get("rollback"))),
            message=str(raw.get("message") or ""),
        )
    elif raw:
        feedback = Feedback(message=str(raw))
    if decision.startswith("answer") and answers:
        return Verdict(answers, reasoning=str(reasoning))
    if decision.startswith("feedback") or not answers:
        if not (feedback.entity or feedback.relations or feedback.rollback_to_hop or feedback.message):
            feedback.message = "The evidence does not answer the question yet."
        return Verdict(None, reasoning=str(reasoning), feedback=feedback)
    return Verdict(answers, reasoning=str(reasoning))


def feedback_text(feedback: Feedback, evidence: Evidence) -> str:
    """The Supervisor's feedback as the Operator reads it (prompts/r2kg/feedback.md)."""
    lines = []
    if feedback.rollback_to_hop is not None:
        k = feedback.rollback_to_hop
        where = evidence.explored_at_hop(k)
        start = f" — you explored {', '.join(where)} there" if where else ""
        lines.append(
            f"Roll back to hop {k}{start}: the path after that looks wrong; explore a different relation."
        )
    if feedback.entity or feedback.relations:
        ident = evidence.entity_id(feedback.entity) if feedback.entity else None
        who = feedback.entity or "the entity above"
        if ident and ident != feedback.entity:
            who = f"{feedback.entity} (id {ident})"
        rels = (
            ", ".join(feedback.relations)
            if feedback.relations
            else "the relations that fit the question (call get_relations first)"
        )
        lines.append(f"Explore {who} with: {rels}.")
    if feedback.message:
        lines.append(feedback.message.strip())
    return read_prompt("r2kg/feedback.md").render(instructions="\n".join(f"- {line}" for line in lines))
