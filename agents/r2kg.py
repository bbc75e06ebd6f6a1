"""R2-KG (Jo et al., 2025): a cheap Operator explores the KG, a strong Supervisor judges and answers.

The Operator calls `get_relations` and `explore_kg` (native tool calls, schemas from the server),
may send several calls in one turn to grow several branches, keeps its whole chat log, and calls
the driver-side `verification` tool when it believes the evidence suffices. The Supervisor then
sees the question, every triple collected so far and each entity's relation list, and replies
with a JSON object: either the answer with its reasoning path, or feedback (which entity and
relations to explore next, possibly rolling back to an earlier hop), which goes back into the
Operator's chat as the result of its verification call. Past `max_iterations` Operator turns
the answer is Abstain.

Without a Supervisor the Operator answers itself (its verification call carries the answer);
`run_r2kg_consistent` runs that single-agent version several times (prompt variants or
temperatures) and gives an answer only when every run gives the same answer set.

Rules where the paper and the issue are silent (also listed in the report):
- A turn is one Operator request; Supervisor requests do not count towards the limit.
- KG calls of a turn run in the order given; a verification in the same turn runs after them,
  so the Supervisor sees the turn's fresh triples. Only the first verification of a turn counts.
- A text-only Operator reply with `Final answer: {...}` is taken as a verification; any other
  text-only reply gets a reminder to call a tool (the turn still counts).
- Arguments are checked against the tool's schema before the call; a bad call (not JSON, a
  missing or mistyped argument, an unknown tool) gets an error result saying how to fix it.
- Hops are numbered by distance from a topic entity (topics are hop 0); rollback to hop k
  points the Operator back at the entities it explored at hop k.
- The Supervisor is stateless across verifications but is shown the feedback it gave before.
  An "answer" with no answers is read as feedback. A reply that is not JSON is read as an
  answer if it has `Final answer: {...}`, else as free-text feedback.
- Answers the Supervisor writes as ids (or `label [id]`) are mapped to the entity's label.
- In the single-agent version, verification with an empty answer list is an abstention.
- A model failure (ModelError) ends the run as an abstention, with the error in `extra`.
"""

from __future__ import annotations

import json
import re
import string
import unicodedata
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage
from kg_mcp.agents.models.json_text import parse_json_object
from kg_mcp.agents.run import AgentResult, Hop, Run, final_answers, resolve_topics
from kg_mcp.agents.trace import Trace

from kg_mcp.prompt_files import read_prompt

METHOD = "r2kg"
KG_TOOLS = ("get_relations", "explore_kg")
VERIFICATION = "verification"
KG_KINDS = ("generic", "freebase", "wikidata")
PROMPT_VARIANTS = 3

SUPERVISOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["answer", "feedback"]},
        "answers": {
            "type": "array",
            "items": {"type": "string"},
            "description": "the answer labels (values for literals); empty when giving feedback",
        },
        "reasoning_path": {
            "type": "string",
            "description": "the chain of triples from the topic entity to the answers",
        },
        "feedback": {
            "type": "object",
            "properties": {
                "entity": {"type": ["string", "null"], "description": "the entity to explore next"},
                "relations": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "relations to explore on it",
                },
                "rollback_to_hop": {"type": ["integer", "null"], "description": "hop to go back to, or null"},
                "message": {"type": "string", "description": "what is missing or wrong, for the Operator"},
            },
            "required": ["entity", "relations", "rollback_to_hop", "message"],
            "additionalProperties": False,
        },
    },
    "required": ["decision", "answers", "reasoning_path", "feedback"],
    "additionalProperties": False,
}

# How to write each call, for the error messages that tell the Operator how to fix one.
_USAGE = {
    "get_relations": '{"entity": "<entity id or exact label>"}',
    "explore_kg": '{"entity": "<entity id>", "relations": ["<relation>", "~<relation walked backwards>"]}',
}


def verification_tool(single: bool) -> ToolSpec:
    """The driver-side tool that ends exploration: to the Supervisor, or (single agent) with the answer."""
    if single:
        return ToolSpec(
            VERIFICATION,
            "Give your final answer once the triples you collected are enough to answer the question. "
            "List the answer labels as the KG shows them (values for literals); an empty list means the "
            "KG does not support any answer.",
            {
                "type": "object",
                "properties": {
                    "answers": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "the answer labels",
                    },
                    "reasoning": {
                        "type": "string",
                        "description": "the chain of triples that leads to the answers",
                    },
                },
                "required": ["answers", "reasoning"],
            },
        )
    return ToolSpec(
        VERIFICATION,
        "Hand every triple and relation list collected so far to the Supervisor, once you believe they are "
        "enough to answer the question. The Supervisor answers, or tells you what to explore next.",
        {
            "type": "object",
            "properties": {"note": {"type": "string", "description": "what you found, in a sentence"}},
        },
    )


# --- evidence: what the Operator has collected, as the Supervisor sees it ---


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


def _strings(value: Any) -> list[str]:
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
    answers = _strings(data.get("answers", data.get("answer")))
    reasoning = data.get("reasoning_path", data.get("reasoning", ""))
    if isinstance(reasoning, list):
        reasoning = " -> ".join(str(r) for r in reasoning)
    raw = data.get("feedback")
    feedback = Feedback()
    if isinstance(raw, dict):
        feedback = Feedback(
            entity=(str(raw["entity"]).strip() or None) if raw.get("entity") else None,
            relations=_strings(raw.get("relations", raw.get("relation"))),
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


# --- checking the Operator's calls ---

_TYPES = {
    "string": str,
    "array": list,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
}


def check_arguments(call: ToolCall, spec: ToolSpec) -> str | None:
    """What is wrong with a call's arguments (and how to write it), or None when they fit the schema."""
    usage = _USAGE.get(spec.name, json.dumps({k: f"<{k}>" for k in spec.input_schema.get("properties", {})}))
    if call.malformed is not None or not isinstance(call.arguments, dict):
        return (
            f"The arguments of {spec.name} were not a JSON object. Call it again with arguments like {usage}."
        )
    properties = spec.input_schema.get("properties", {})
    problems = [
        f"`{name}` is missing" for name in spec.input_schema.get("required", []) if name not in call.arguments
    ]
    for name, value in call.arguments.items():
        expected = properties.get(name, {}).get("type")
        if name not in properties or expected is None:
            continue
        types = expected if isinstance(expected, list) else [expected]
        if value is None and "null" in types:
            continue
        python: tuple[type, ...] = ()
        for type_name in types:
            found = _TYPES.get(type_name, ())
            python += found if isinstance(found, tuple) else (found,)
        if python and (not isinstance(value, python) or (isinstance(value, bool) and bool not in python)):
            problems.append(f"`{name}` must be {' or '.join(types)}, not {type(value).__name__}")
        elif isinstance(value, list) and properties[name].get("items", {}).get("type") == "string":
            if not value and name in spec.input_schema.get("required", []) and spec.name != VERIFICATION:
                problems.append(f"`{name}` is empty")
            elif not all(isinstance(v, str) for v in value):
                problems.append(f"`{name}` must be a list of strings")
        elif isinstance(value, str) and not value.strip() and name in spec.input_schema.get("required", []):
            problems.append(f"`{name}` is empty")
    if problems:
        return f"Bad arguments for {spec.name}: {'; '.join(problems)}. Call it again with arguments like {usage}."
    return None


# --- tool modes ---

# `paper`: get_relations and explore_kg as published; `batched`: explore_kg takes several
# entities; `follow`: the follow tool walks whole relation paths as well.
TOOL_MODES = {"paper": KG_TOOLS, "batched": KG_TOOLS, "follow": (*KG_TOOLS, "follow")}
PAPER_ARGUMENTS = {"explore_kg": ("entity", "relations")}


def mode_specs(kg: KGClient, tools: str) -> dict[str, ToolSpec]:
    """The KG tools offered in a mode; in `paper` mode explore_kg has only its published arguments."""
    if tools not in TOOL_MODES:
        raise ValueError(f"tools must be one of {', '.join(TOOL_MODES)}, not {tools!r}")
    specs = {name: kg.tool(name) for name in TOOL_MODES[tools]}
    if tools == "paper":
        for name, keep in PAPER_ARGUMENTS.items():
            spec = specs[name]
            schema = dict(spec.input_schema)
            schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k in keep}
            schema["required"] = list(keep)
            # The description's last paragraph is about the batched form.
            specs[name] = ToolSpec(spec.name, spec.description.rsplit("\n\n", 1)[0], schema)
    return specs


def explored_parts(tool: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """A KG tool's result as single-entity explore_kg results: what the evidence keeps.

    A follow path counts as one relation (`rel1/rel2/...`) from each start entity to the end entities.
    """
    if tool == "follow":
        ends = [e["entity"] for e in data.get("entities") or []]
        return [
            {"entity": start, "relations": [{"relation": "/".join(b["path"]), "total": data.get("total", len(ends)), "neighbours": ends}]}
            for b in data.get("branches") or []
            for start in b["starts"]
        ]
    if "entities" in data:  # batched explore_kg: one entry per (entity, relation)
        return [{"entity": rel["entity"], "relations": [rel]} for rel in data.get("relations") or []]
    return [data]


def tool_guide(tools: str) -> str:
    return "" if tools == "paper" else read_prompt(f"r2kg/tools_{tools}.md").template.strip() + "\n"


# --- the driver ---


def kg_kind(profile: str) -> str:
    return profile if profile in KG_KINDS else "generic"


def _examples(kind: str, role: str) -> str:
    return read_prompt(f"r2kg/examples_{kind}_{role}.md").template.strip()


def _topics_text(topics: dict[str, str]) -> str:
    if not topics:
        return "(none given: start from the entities named in the question; get_relations accepts an exact label)"
    return "\n".join(f"- {name}: {ident}" for name, ident in topics.items())


@dataclass
class _Turn:
    """What the driver does with one Operator reply."""

    results: list[Message] = field(default_factory=list)
    verification: ToolCall | None = None
    text_verification: list[str] | None = None  # answers from a `Final answer:` text reply


async def run_r2kg(
    question: str,
    kg: KGClient,
    operator: Model,
    supervisor: Model | None = None,
    *,
    topics: dict[str, str | None] | None = None,
    max_iterations: int = 15,
    sampling: Sampling | None = None,
    trace: Trace | None = None,
    prompt_variant: int = 1,
    tools: str = "paper",
) -> AgentResult:
    """One R2-KG run; without a Supervisor the Operator answers itself (one single-agent run).

    `prompt_variant` (1..3) picks the single-agent Operator prompt; the dual-agent prompt has one.
    """
    single = supervisor is None
    run = Run(METHOD if not single else f"{METHOD}-single", question, kg, trace)
    kind = kg_kind(kg.profile)
    resolved = await resolve_topics(run, topics or {})
    evidence = Evidence(topics=resolved)
    kg_specs = mode_specs(kg, tools)
    guide = tool_guide(tools)
    verify_spec = verification_tool(single)
    offered = [*kg_specs.values(), verify_spec]

    if single:
        variant = (prompt_variant - 1) % PROMPT_VARIANTS + 1
        system = read_prompt("r2kg/single.md").render(
            approach=read_prompt(f"r2kg/single_variant_{variant}.md").template.strip(),
            examples=_examples(kind, "single"),
            max_iterations=str(max_iterations),
            tool_guide=guide,
        )
    else:
        system = read_prompt("r2kg/operator.md").render(
            examples=_examples(kind, "operator"), max_iterations=str(max_iterations), tool_guide=guide
        )
    messages = [
        Message("system", system),
        Message(
            "user", read_prompt("r2kg/question.md").render(question=question, topics=_topics_text(resolved))
        ),
    ]
    feedback_given: list[str] = []
    operator_turns = 0
    verifications = 0

    def finish(
        answers: list[str], *, abstained: bool = False, reasoning: str = "", stop: str, **more: Any
    ) -> AgentResult:
        return run.finish(
            answers,
            abstained=abstained or not answers,
            reasoning=reasoning,
            stop=stop,
            operator_turns=operator_turns,
            verifications=verifications,
            feedback=feedback_given,
            triples=evidence.triple_count,
            **more,
        )

    try:
        while operator_turns < max_iterations:
            operator_turns += 1
            reply = await run.ask(operator, messages, role="operator", tools=offered, sampling=sampling)
            messages.append(reply.as_message())
            turn = await _handle_operator_reply(run, reply, kg_specs, verify_spec, evidence)
            messages.extend(turn.results)
            if turn.verification is None and turn.text_verification is None:
                continue
            verifications += 1

            if single:
                if turn.text_verification is not None:
                    answers, reasoning = turn.text_verification, reply.text.strip()
                else:
                    args = turn.verification.arguments
                    answers, reasoning = _strings(args.get("answers")), str(args.get("reasoning") or "")
                answers = list(dict.fromkeys(evidence.as_label(a) for a in answers))
                if not answers:
                    run.note("operator abstained", turn=operator_turns)
                    return finish([], abstained=True, reasoning=reasoning, stop="operator abstained")
                return finish(answers, reasoning=reasoning, stop="answered")

            verdict = await _ask_supervisor(run, supervisor, question, evidence, feedback_given, sampling)
            if verdict.answers is not None:
                answers = list(dict.fromkeys(evidence.as_label(a) for a in verdict.answers))
                if turn.verification is not None:
                    messages.append(_tool_message(turn.verification, "The Supervisor answered the question."))
                return finish(answers, reasoning=verdict.reasoning, stop="answered")
            assert verdict.feedback is not None
            text = feedback_text(verdict.feedback, evidence)
            feedback_given.append(text)
            if verdict.feedback.rollback_to_hop is not None:
                run.note("rollback", hop=verdict.feedback.rollback_to_hop, entity=verdict.feedback.entity)
            run.note("supervisor feedback", turn=operator_turns, feedback=text)
            if turn.verification is not None:
                messages.append(_tool_message(turn.verification, text))
            else:
                messages.append(Message("user", text))
    except ModelError as exc:
        run.note("model error", error=str(exc))
        return finish([], abstained=True, stop="model error", error=str(exc))

    run.note("iteration limit", max_iterations=max_iterations)
    return finish([], abstained=True, stop="iteration limit")


def _tool_message(call: ToolCall, text: str, is_error: bool = False) -> Message:
    return Message("tool", text, tool_call_id=call.id, name=call.name, is_error=is_error)


async def _handle_operator_reply(
    run: Run, reply: Reply, kg_specs: dict[str, ToolSpec], verify_spec: ToolSpec, evidence: Evidence
) -> _Turn:
    """Run the reply's KG calls in order, then see whether it asked for verification."""
    turn = _Turn()
    if not reply.tool_calls:
        answers = final_answers(reply.text)
        if answers is not None:
            run.note("text verification")
            turn.text_verification = answers
        else:
            run.note("no tool call")
            turn.results.append(
                Message(
                    "user",
                    "Please reply with tool calls: get_relations or explore_kg to explore the KG, "
                    "or verification once the triples you collected are enough to answer.",
                )
            )
        return turn

    slots: list[Message | None] = []
    for call in reply.tool_calls:
        if call.name == VERIFICATION:
            problem = check_arguments(call, verify_spec)
            if problem:
                run.note("bad tool call", tool=call.name, problem=problem)
                slots.append(_tool_message(call, problem, is_error=True))
            elif turn.verification is None:
                turn.verification = call
                slots.append(None)  # answered after the Supervisor has spoken
            else:
                slots.append(_tool_message(call, "Ignored: one verification per turn is enough."))
            continue
        spec = kg_specs.get(call.name)
        if spec is None:
            known = ", ".join([*kg_specs, VERIFICATION])
            problem = f"There is no tool {call.name!r}. Use one of: {known}."
            run.note("unknown tool", tool=call.name)
            slots.append(_tool_message(call, problem, is_error=True))
            continue
        problem = check_arguments(call, spec)
        if problem:
            run.note("bad tool call", tool=call.name, problem=problem)
            slots.append(_tool_message(call, problem, is_error=True))
            continue
        arguments = {k: v for k, v in call.arguments.items() if k in spec.input_schema.get("properties", {})}
        result = await run.tool(call.name, arguments)
        if not result.is_error and result.data:
            if call.name == "get_relations":
                evidence.add_relations(result.data)
            else:
                for explored in explored_parts(call.name, result.data):
                    for hop in evidence.add_explored(explored):
                        run.hop(hop.entity, hop.relation, hop.reached)
        slots.append(_tool_message(call, result.text, is_error=result.is_error))
    # Tool results in call order; the verification's own result is appended once it is known.
    turn.results = [m for m in slots if m is not None]
    return turn


async def _ask_supervisor(
    run: Run,
    supervisor: Model,
    question: str,
    evidence: Evidence,
    earlier: list[str],
    sampling: Sampling | None,
) -> Verdict:
    kind = kg_kind(run.kg.profile)
    system = read_prompt("r2kg/supervisor.md").render(examples=_examples(kind, "supervisor"))
    request = read_prompt("r2kg/supervisor_request.md").render(
        question=question,
        topics=_topics_text(evidence.topics),
        relations=evidence.relations_text(),
        triples=evidence.triples_text(),
        earlier_feedback="\n\n".join(f"{i}. {text.strip()}" for i, text in enumerate(earlier, 1)) or "(none)",
    )
    reply = await run.ask(
        supervisor,
        [Message("system", system), Message("user", request)],
        role="supervisor",
        sampling=sampling,
        json_schema=SUPERVISOR_SCHEMA,
    )
    verdict = parse_verdict(reply.text)
    run.note("supervisor verdict", decision="answer" if verdict.answers is not None else "feedback")
    return verdict


# --- single-agent strict self-consistency ---

_PUNCTUATION = set(string.punctuation)


def normalise(answer: str) -> str:
    """Case, whitespace and punctuation folded away: `The  Wrecking-Crew!` -> `the wreckingcrew`."""
    text = unicodedata.normalize("NFKC", answer).casefold()
    text = "".join(
        ch for ch in text if ch not in _PUNCTUATION and not unicodedata.category(ch).startswith("P")
    )
    return " ".join(text.split())


def answer_set(answers: list[str]) -> frozenset[str]:
    return frozenset(a for a in (normalise(x) for x in answers) if a)


def temperatures(runs: int) -> list[float]:
    """Evenly spread from 0.2 to 1.0: three runs get 0.2, 0.6 and 1.0."""
    if runs <= 1:
        return [0.2]
    return [round(0.2 + 0.8 * i / (runs - 1), 3) for i in range(runs)]


class _RunTrace(Trace):
    """A single run's events, written into the wrapper's trace tagged with the run index."""

    def __init__(self, parent: Trace, index: int):
        super().__init__(None)
        self.parent = parent
        self.index = index

    def event(self, type_: str, **data: Any) -> None:
        self.events.append({"type": type_, **data})
        self.parent.event(type_, run=self.index, **data)

    def close(self) -> None:
        pass


async def run_r2kg_consistent(
    question: str,
    kg: KGClient,
    operator: Model,
    *,
    topics: dict[str, str | None] | None = None,
    runs: int = 3,
    vary: Literal["prompt", "temperature"] = "prompt",
    max_iterations: int = 15,
    trace: Trace | None = None,
    sampling: Sampling | None = None,
    stop_early: bool = True,
    tools: str = "paper",
) -> AgentResult:
    """Single-agent R2-KG with strict self-consistency: an answer only when all runs agree.

    Runs differ by prompt variant (1, 2, 3, ...) or by temperature (`temperatures(runs)`, on top
    of `sampling`). Any abstention or any two different answer sets (after `normalise`) abstain.
    With `stop_early`, the runs stop at the first abstention or disagreement (the outcome is the
    same; the remaining runs are not paid for).
    """
    if vary not in ("prompt", "temperature"):
        raise ValueError(f"vary must be 'prompt' or 'temperature', not {vary!r}")
    outer = Run(f"{METHOD}-consistent", question, kg, trace)
    base = sampling or Sampling()
    temps = temperatures(runs)
    results: list[AgentResult] = []
    agreed: frozenset[str] | None = None
    verdict = "unanimous"
    for index in range(runs):
        if vary == "prompt":
            variant, run_sampling = index % PROMPT_VARIANTS + 1, sampling
        else:
            variant, run_sampling = 1, replace(base, temperature=temps[index])
        outer.note(
            "self-consistency run",
            index=index,
            prompt_variant=variant,
            temperature=run_sampling.temperature if run_sampling else None,
        )
        result = await run_r2kg(
            question,
            kg,
            operator,
            None,
            topics=topics,
            max_iterations=max_iterations,
            sampling=run_sampling,
            trace=_RunTrace(outer.trace, index),
            prompt_variant=variant,
            tools=tools,
        )
        results.append(result)
        for role, usage in result.usage.items():
            outer.usage[role] = outer.usage.get(role, Usage()) + usage
        outer.turns += result.turns
        answers = answer_set(result.answers)
        if result.abstained or not answers:
            verdict = "a run abstained"
        elif agreed is not None and answers != agreed:
            verdict = "runs disagreed"
        agreed = answers if agreed is None else agreed
        if verdict != "unanimous" and stop_early:
            break
    if len(results) < runs:
        outer.note("stopped early", reason=verdict, runs_done=len(results))
    outer.note(
        "self-consistency", verdict=verdict, answer_sets=[sorted(answer_set(r.answers)) for r in results]
    )
    outer.path = list(results[0].path) if results else []
    summary = [
        {
            "answers": r.answers,
            "abstained": r.abstained,
            "turns": r.turns,
            "reasoning": r.reasoning,
            "stop": r.extra.get("stop"),
        }
        for r in results
    ]
    if verdict != "unanimous" or not results:
        return outer.finish([], abstained=True, reasoning=verdict, verdict=verdict, vary=vary, runs=summary)
    return outer.finish(
        results[0].answers, reasoning=results[0].reasoning, verdict=verdict, vary=vary, runs=summary
    )
