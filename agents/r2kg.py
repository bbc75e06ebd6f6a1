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
`kg_mcp.agents.r2kg_consistency` runs that single-agent version several times (prompt variants or
temperatures) and gives an answer only when every run gives the same answer set.

The two-agent `verification` call takes no arguments, as the paper's Verification(G, R) hands the
Supervisor the collected triples G and relation lists R, and nothing the Operator writes: the
Supervisor judges the evidence itself, not the cheaper model's reading of it.

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
from dataclasses import dataclass, field
from typing import Any

from kg_mcp.agents.conventions import DEFAULT_CONVENTION, topic_rule
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec
from kg_mcp.agents.r2kg_evidence import Evidence, Verdict, feedback_text, parse_verdict, string_list
from kg_mcp.agents.run import AgentResult, Run, final_answers, resolve_topics
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
        "Hand every triple and relation list collected so far, with the question, to the Supervisor, once you "
        "believe they are enough to answer the question. The Supervisor answers, or tells you what to explore next.",
        {"type": "object", "properties": {}},
    )


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
    specs = {spec.name: spec for spec in kg.offered(TOOL_MODES[tools])}
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


def operator_prompt(
    kind: str,
    tools: str,
    *,
    single: bool,
    variant: int = 1,
    max_iterations: int = 15,
    convention: str = DEFAULT_CONVENTION,
) -> str:
    """The Operator's system prompt: two-agent, or single-agent with prompt `variant` (1..3)."""
    guide = tool_guide(tools)
    rule = topic_rule(convention, follow="follow" in TOOL_MODES[tools])
    if single:
        variant = (variant - 1) % PROMPT_VARIANTS + 1
        return read_prompt("r2kg/single.md").render(
            approach=read_prompt(f"r2kg/single_variant_{variant}.md").template.strip(),
            examples=_examples(kind, "single"),
            max_iterations=str(max_iterations),
            tool_guide=guide,
            topic_rule=rule,
        )
    return read_prompt("r2kg/operator.md").render(
        examples=_examples(kind, "operator"), max_iterations=str(max_iterations), tool_guide=guide, topic_rule=rule
    )


def supervisor_prompt(kind: str, convention: str = DEFAULT_CONVENTION) -> str:
    """The Supervisor's system prompt (it calls no tools: the rule without `follow`)."""
    return read_prompt("r2kg/supervisor.md").render(examples=_examples(kind, "supervisor"), topic_rule=topic_rule(convention))


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
    convention: str = DEFAULT_CONVENTION,
    schema: bool = False,
) -> AgentResult:
    """One R2-KG run; without a Supervisor the Operator answers itself (one single-agent run).

    `prompt_variant` (1..3) picks the single-agent Operator prompt; the dual-agent prompt has one.
    `convention` names the benchmark's rule on the topic entity (prompts/conventions/).
    """
    single = supervisor is None
    run = Run(METHOD if not single else f"{METHOD}-single", question, kg, trace)
    kind = kg_kind(kg.profile)
    resolved = await resolve_topics(run, topics or {})
    evidence = Evidence(topics=resolved)
    kg_specs = mode_specs(kg, tools)
    verify_spec = verification_tool(single)
    offered = [*kg_specs.values(), verify_spec]
    system = operator_prompt(
        kind, tools, single=single, variant=prompt_variant, max_iterations=max_iterations, convention=convention
    )
    # --schema: the server's KG summary, for the Operator that explores (as a model with its tools reads it)
    system = kg.with_schema(system, schema, [t.name for t in kg_specs.values()])
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
                    answers, reasoning = string_list(args.get("answers")), str(args.get("reasoning") or "")
                answers = list(dict.fromkeys(evidence.as_label(a) for a in answers))
                if not answers:
                    run.note("operator abstained", turn=operator_turns)
                    return finish([], abstained=True, reasoning=reasoning, stop="operator abstained")
                return finish(answers, reasoning=reasoning, stop="answered")

            verdict = await _ask_supervisor(run, supervisor, question, evidence, feedback_given, sampling, convention)
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
    convention: str,
) -> Verdict:
    system = supervisor_prompt(kg_kind(run.kg.profile), convention)
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
