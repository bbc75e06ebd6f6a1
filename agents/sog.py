"""Search-on-Graph: one model, one `search` tool, observe then navigate.

The question goes in with its topic entities and their ids (`Question: ... {'Name': 'id'}`;
names without ids are resolved with find_entities first). The model calls `search` until it
writes `Final answer: {...}`; the answers are the braced spans. Past `max_turns` model turns
without a final answer, the run ends as abstained.
"""

from __future__ import annotations

from kg_mcp.agents.conventions import DEFAULT_CONVENTION, topic_rule
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message, Model, Sampling, ToolCall, ToolSpec
from kg_mcp.agents.run import AgentResult, Run, final_answers, resolve_topics
from kg_mcp.agents.trace import Trace

from kg_mcp.prompt_files import read_prompt

TOOL = "search"
EXEMPLARS = {"wikidata": "wikidata", "freebase": "freebase"}  # any other profile: generic
ID_EXAMPLES = {"wikidata": "wd:Q42", "freebase": "m.0v1xv"}
# Tool modes: `paper` is the method as published (search with its three arguments); `batched`
# lets one search read several entities; `follow` adds the follow tool for whole relation paths.
TOOL_MODES = {"paper": ("search",), "batched": ("search",), "follow": ("search", "follow")}
PAPER_ARGUMENTS = ("entity", "direction", "properties_to_filter_for")


def system_prompt(profile: str, tools: str = "paper", convention: str = DEFAULT_CONVENTION) -> str:
    """The system prompt with the tool guide, the benchmark's topic-entity rule and the worked
    example for this mode and kind of KG."""
    kind = EXEMPLARS.get(profile, "generic")
    suffix = "" if tools == "paper" else f"_{tools}"
    exemplars = read_prompt(f"sog/exemplars/{kind}{suffix}.md").template
    id_example = ID_EXAMPLES.get(profile, "kg:Name")
    guide = read_prompt(f"sog/tools_{tools}.md").render(id_example=id_example)
    rule = topic_rule(convention, follow="follow" in TOOL_MODES[tools])
    return read_prompt("sog/system.md").render(
        exemplars=exemplars, tool_guide=guide, id_example=id_example, topic_rule=rule
    )


def tool_specs(kg: KGClient, tools: str) -> list[ToolSpec]:
    """The tools the model is offered in a mode; in `paper` mode, search as the paper describes it."""
    if tools not in TOOL_MODES:
        raise ValueError(f"tools must be one of {', '.join(TOOL_MODES)}, not {tools!r}")
    specs = kg.offered(TOOL_MODES[tools])
    if tools != "paper":
        return specs
    search = specs[0]
    schema = dict(search.input_schema)
    schema["properties"] = {k: v for k, v in schema.get("properties", {}).items() if k in PAPER_ARGUMENTS}
    schema["required"] = ["entity"]
    # The description's last paragraph is about the new arguments: the paper's tool goes without it.
    return [ToolSpec(search.name, search.description.rsplit("\n\n", 1)[0], schema)]


def question_message(question: str, topics: dict[str, str]) -> str:
    """`Question: ... {'Name': 'id'}`, the form the method feeds its model."""
    return f"Question: {question} {topics!r}" if topics else f"Question: {question}"


async def run_sog(
    question: str,
    kg: KGClient,
    model: Model,
    *,
    topics: dict[str, str | None] | None = None,
    max_turns: int = 20,
    sampling: Sampling | None = None,
    trace: Trace | None = None,
    tools: str = "paper",
    convention: str = DEFAULT_CONVENTION,
    schema: bool = False,
) -> AgentResult:
    run = Run("sog", question, kg, trace)
    specs = tool_specs(kg, tools)
    resolved = await resolve_topics(run, topics or {})
    # --schema: the server's KG summary, as a model with these tools reads it
    system = kg.with_schema(system_prompt(kg.profile, tools, convention), schema, [t.name for t in specs])
    messages = [Message("system", system), Message("user", question_message(question, resolved))]
    while run.turns < max_turns:
        reply = await run.ask(model, messages, tools=specs, sampling=sampling)
        messages.append(reply.as_message())
        if reply.tool_calls:
            for call in reply.tool_calls:
                messages.append(await _search(run, call, [t.name for t in specs]))
            continue
        answers = final_answers(reply.text)
        if answers is not None:
            return run.finish(answers, abstained=not answers, reasoning=reply.text, topics=resolved)
        run.note("no tool call and no final answer: asked to continue")
        messages.append(Message("user", read_prompt("sog/continue.md").template))
    run.note("turn limit reached without a final answer", max_turns=max_turns)
    return run.finish([], abstained=True, topics=resolved)


async def _search(run: Run, call: ToolCall, offered: list[str]) -> Message:
    """Run one offered tool call; anything else the model asks for gets an error it can act on."""

    def error(text: str) -> Message:
        run.note("refused tool call", tool=call.name, reason=text)
        return Message("tool", text, tool_call_id=call.id, name=call.name, is_error=True)

    if call.name not in offered:
        return error(f"Unknown tool {call.name!r}: only {', '.join(f'`{t}`' for t in offered)} can be called here.")
    if call.malformed is not None:
        return error(
            "The arguments were not a JSON object. Call search with "
            '{"entity": "<id>", "direction": "outgoing" or "incoming", "properties_to_filter_for": [...]}.'
        )
    result = await run.tool(call.name, call.arguments)
    if not result.is_error and result.data:
        _record_hops(run, call, result.data)
    return Message("tool", result.text, tool_call_id=call.id, name=call.name, is_error=result.is_error)


def _record_hops(run: Run, call: ToolCall, data: dict) -> None:
    """The trace's path: which entities a call reached from which, by which relation."""
    if call.name == "follow":
        reached = [e["entity"]["id"] for e in data.get("entities", []) if e["entity"]["kind"] == "iri"]
        for branch in data.get("branches", []):
            for start in branch["starts"]:
                run.hop(start["id"], "/".join(branch["path"]), reached)
        return
    prefix = "~" if data.get("direction") == "incoming" else ""
    relations = call.arguments.get("properties_to_filter_for") or [None]
    relation = ", ".join(prefix + r for r in relations if r) or None
    if "entity" in data:  # one entity
        reached = [row["value"]["id"] for row in data.get("rows", []) if row["value"]["kind"] == "iri"]
        run.hop(data["entity"]["id"], relation, reached)
        return
    for part in data.get("entities", []):  # the batched form
        entity = part["entity"]["id"]
        reached = [r["value"]["id"] for r in data.get("rows", []) if r["entity"] == entity and r["value"]["kind"] == "iri"]
        run.hop(entity, relation, reached)
