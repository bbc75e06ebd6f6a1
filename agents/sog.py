"""Search-on-Graph: one model, one `search` tool, observe then navigate.

The question goes in with its topic entities and their ids (`Question: ... {'Name': 'id'}`;
names without ids are resolved with find_entities first). The model calls `search` until it
writes `Final answer: {...}`; the answers are the braced spans. Past `max_turns` model turns
without a final answer, the run ends as abstained.
"""

from __future__ import annotations

from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message, Model, Sampling, ToolCall
from kg_mcp.agents.run import AgentResult, Run, final_answers, resolve_topics
from kg_mcp.agents.trace import Trace

from kg_mcp.prompt_files import read_prompt

TOOL = "search"
EXEMPLARS = {"wikidata": "wikidata", "freebase": "freebase"}  # any other profile: generic
ID_EXAMPLES = {"wikidata": "wd:Q42", "freebase": "m.0v1xv"}


def system_prompt(profile: str) -> str:
    """The system prompt with the worked example for this kind of KG."""
    kind = EXEMPLARS.get(profile, "generic")
    exemplars = read_prompt(f"sog/exemplars/{kind}.md").template
    return read_prompt("sog/system.md").render(exemplars=exemplars, id_example=ID_EXAMPLES.get(profile, "kg:Name"))


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
) -> AgentResult:
    run = Run("sog", question, kg, trace)
    resolved = await resolve_topics(run, topics or {})
    messages = [Message("system", system_prompt(kg.profile)), Message("user", question_message(question, resolved))]
    tools = [kg.tool(TOOL)]
    while run.turns < max_turns:
        reply = await run.ask(model, messages, tools=tools, sampling=sampling)
        messages.append(reply.as_message())
        if reply.tool_calls:
            for call in reply.tool_calls:
                messages.append(await _search(run, call))
            continue
        answers = final_answers(reply.text)
        if answers is not None:
            return run.finish(answers, abstained=not answers, reasoning=reply.text, topics=resolved)
        run.note("no tool call and no final answer: asked to continue")
        messages.append(Message("user", read_prompt("sog/continue.md").template))
    run.note("turn limit reached without a final answer", max_turns=max_turns)
    return run.finish([], abstained=True, topics=resolved)


async def _search(run: Run, call: ToolCall) -> Message:
    """Run one search call; anything else the model asks for gets an error it can act on."""

    def error(text: str) -> Message:
        run.note("refused tool call", tool=call.name, reason=text)
        return Message("tool", text, tool_call_id=call.id, name=call.name, is_error=True)

    if call.name != TOOL:
        return error(f"Unknown tool {call.name!r}: only `search` is available here.")
    if call.malformed is not None:
        return error(
            "The arguments were not a JSON object. Call search with "
            '{"entity": "<id>", "direction": "outgoing" or "incoming", "properties_to_filter_for": [...]}.'
        )
    result = await run.tool(TOOL, call.arguments)
    if not result.is_error and result.data:
        reached = [row["value"]["id"] for row in result.data.get("rows", []) if row["value"]["kind"] == "iri"]
        prefix = "~" if result.data.get("direction") == "incoming" else ""
        relations = call.arguments.get("properties_to_filter_for") or [None]
        relation = ", ".join(prefix + r for r in relations if r) or None
        run.hop(result.data["entity"]["id"], relation, reached)
    return Message("tool", result.text, tool_call_id=call.id, name=TOOL, is_error=result.is_error)
