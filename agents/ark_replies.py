"""ARK-V1's vocabulary (kg_mcp.agents.ark): the JSON schemas of the model's replies, the records
a run keeps (triples shown with their keys, the steps taken) and the readers of reply fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

VERDICTS = ("True", "False", "None")


def _schema(title: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": title,
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


_TEXT = {"type": "string"}
ANCHOR_SCHEMA = _schema("ark_anchor", {"reason": _TEXT, "anchor": _TEXT})
RELATION_SCHEMA = _schema("ark_relation", {"reason": _TEXT, "relation": _TEXT})
STEP_SCHEMA = _schema(
    "ark_step",
    {"triples": {"type": "array", "items": _TEXT}, "implication": _TEXT, "continue": {"type": "boolean"}},
)
VERDICT_SCHEMA = _schema(
    "ark_verdict", {"reason": _TEXT, "answer": {"type": "string", "enum": list(VERDICTS)}}
)
ANSWERS_SCHEMA = _schema("ark_answers", {"reason": _TEXT, "answers": {"type": "array", "items": _TEXT}})

_AUXILIARIES = frozenset(
    ("is", "are", "was", "were", "am", "do", "does", "did", "can", "could", "has", "have", "had")
    + ("will", "would", "shall", "should", "may", "might", "must")
    + ("isn't", "aren't", "wasn't", "weren't", "don't", "doesn't", "didn't", "can't", "couldn't")
    + ("hasn't", "haven't", "won't", "wouldn't")
)
_WORD = re.compile(r"[a-z']+")


def looks_yes_no(question: str) -> bool:
    """Whether a question reads as yes/no: it (or its last comma clause) opens with an auxiliary.

    >>> looks_yes_no("Was Catch Me If You Can directed by Steven Spielberg?")
    True
    >>> looks_yes_no("If both grow equally, is Horsens going to reach 60000 first?")
    True
    >>> looks_yes_no("what are the languages spoken in the films directed by [Joel Zwick]")
    False
    """
    for clause in (question, question.rsplit(",", 1)[-1]):
        words = _WORD.findall(clause.lower().replace("\u2019", "'"))
        if words and words[0] in _AUXILIARIES:
            return True
    return False


_MIDNIGHT = re.compile(r"^(-?\d+-\d\d-\d\d)T00:00:00Z$")


def show_entity(entity: dict[str, Any]) -> str:
    """`Label [id]` for a node, `"text"` for a literal (midnight datetimes as dates)."""
    if entity.get("kind") == "literal":
        match = _MIDNIGHT.match(entity["id"])
        return json.dumps(match.group(1) if match else entity["id"], ensure_ascii=False)
    label = entity.get("label")
    return f"{label} [{entity['id']}]" if label else f"[{entity['id']}]"


@dataclass
class Triple:
    key: str
    head: dict[str, Any]
    relation: str  # as stored, never `~`
    label: str | None
    tail: dict[str, Any]

    def text(self) -> str:
        relation = (
            f"{self.label} [{self.relation}]" if self.label and self.label != self.relation else self.relation
        )
        return f"{show_entity(self.head)} | {relation} | {show_entity(self.tail)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "head": self.head["id"],
            "relation": self.relation,
            "tail": self.tail["id"],
            "text": self.text(),
        }


@dataclass
class Step:
    number: int
    anchor: dict[str, Any]
    relation: str
    shown: list[Triple]
    cited: list[Triple]
    implication: str
    go_on: bool

    def summary(self) -> str:
        lines = [f"Step {self.number}: anchor {show_entity(self.anchor)}, relation {self.relation}"]
        lines.append(f"  Implication: {self.implication}")
        lines += [f"  - {t.text()}" for t in self.cited]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.number,
            "anchor": self.anchor["id"],
            "anchor_label": self.anchor.get("label"),
            "relation": self.relation,
            "shown": len(self.shown),
            "triples": [t.to_dict() for t in self.cited],
            "implication": self.implication,
            "continue": self.go_on,
        }


class OutOfAttempts(Exception):
    """A selection used its `c_max` attempts without a valid reply."""

    def __init__(self, stage: str):
        super().__init__(stage)
        self.stage = stage


BACK = object()  # a valid choice that sends the step back to anchor selection


@dataclass
class Check:
    value: Any = None
    rule: str | None = None  # the rule that failed, None when the reply is accepted
    reason: str = ""


def accept(value: Any) -> Check:
    return Check(value)


def reject(rule: str, reason: str) -> Check:
    return Check(None, rule, reason)


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no"):
        return False
    return None


def read_verdict(value: Any) -> str | None:
    if value is None:
        return "None"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        word = value.strip().strip(".").lower()
        return {"true": "True", "yes": "True", "false": "False", "no": "False"}.get(
            word, "None" if word in ("none", "null", "unknown", "") else None
        )
    return None


def tool_error_text(text: str) -> str:
    """A KG error as the model should read it: no tool-call framing, no hints about other tools."""
    text = re.sub(r"^Error executing tool \w+:\s*", "", text.strip())
    message, _, hint = text.partition(" Hint: ")
    return message if "find_entities" in hint or not hint else f"{message} {hint}"
