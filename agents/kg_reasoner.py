"""KG-Reasoner: one text-continuing model that searches the KG inside its own reasoning.

The model writes `<think> ... <search>entity</search>`; generation stops at `</search>` or
`</answer>`. On a search the driver resolves the entity (an exact id, else `find_entities`
limited to the topic entities and the entities already seen), calls `kgr_search` with the
question and this run's traversal session, appends the triples between `<triples>` tags and
lets the model go on. `<search>BACKTRACK</search>` is the same tool call with backtrack=true.
The answers are the `<answer>` span split at `;`; past `max_rounds` generations without one,
or when the model stops without one, the run abstains.

Slips the driver tolerates, each noted in the trace and kept in `format_errors` (which the
training reward reads): a search or answer left open when the model ended its text (closed
here and acted on), a closing tag with nothing open.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import asdict
from typing import Any

from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kgr_format import ANSWER, BACKTRACK, SEARCH, STOP_SEQUENCES, pending, split_answers
from kg_mcp.agents.models.base import Model, Sampling, Usage
from kg_mcp.agents.models.completion import TextModel, TextPrompt, TextReply
from kg_mcp.agents.run import AgentResult, Run, resolve_topics
from kg_mcp.agents.trace import Trace

from kg_mcp.prompt_files import read_prompt

TOOL = "kgr_search"
OPEN = "<think>"
ID_EXAMPLES = {"wikidata": "wd:Q42", "freebase": "m.0v1xv"}
_ID_LIKE = re.compile(r"^(?:[A-Za-z][\w.-]*:\S+|<\S+>|[QPL][1-9][0-9]*|[mg]\.[0-9a-z_]+)$")
_BRACKETED_ID = re.compile(r"\[([^\[\]\s]+)\]\s*$")


def instructions(profile: str) -> str:
    return read_prompt("kgr/instructions.md").render(id_example=ID_EXAMPLES.get(profile, "kg:Steven_Spielberg"))


def user_turn(question: str, topics: dict[str, str]) -> str:
    listed = ", ".join(f"{name} [{entity_id}]" for name, entity_id in topics.items()) or "none given"
    return read_prompt("kgr/question.md").render(question=question, topics=listed).strip()


def prompt_for(profile: str, question: str, topics: dict[str, str], text: str, schema: str | None = None) -> TextPrompt:
    """The prompt of one generation round; `schema` (the server's KG summary, --schema) follows the instructions."""
    system = instructions(profile).strip() + (f"\n\n{schema.strip()}" if schema else "")
    user = user_turn(question, topics)
    head = read_prompt("kgr/completion.md").render(instructions=system, user=user).rstrip() + " "
    return TextPrompt(system=system, user=user, head=head, prefix=OPEN + text)


async def run_kgr(
    question: str,
    kg: KGClient,
    model: Model | TextModel,
    *,
    topics: dict[str, str | None] | None = None,
    max_rounds: int = 10,
    top_k: int | None = None,
    sampling: Sampling | None = None,
    trace: Trace | None = None,
    schema: bool = False,
) -> AgentResult:
    from kg_mcp.agents.models.openai_completions import text_model_for

    run = Run("kgr", question, kg, trace)
    resolved = await resolve_topics(run, topics or {})
    reasoner = _Reasoner(run, text_model_for(model), resolved, top_k, sampling)
    reasoner.schema = kg.offered_schema() if schema else None  # its model calls no MCP tool
    return await reasoner.go(max_rounds)


class _Reasoner:
    def __init__(self, run: Run, model: TextModel, topics: dict[str, str], top_k: int | None, sampling: Sampling | None):
        self.run = run
        self.model = model
        self.topics = topics
        self.top_k = top_k
        self.sampling = sampling
        self.session = f"kgr-{uuid.uuid4().hex}"
        self.text = ""  # the model side after the opening <think>: its writing and the inserted triples
        self.since = 0  # where the model's writing since the last insertion starts
        self.known: dict[str, str | None] = {entity_id: name for name, entity_id in topics.items()}
        self.searches = 0
        self.format_errors: list[str] = []
        self.schema: str | None = None  # the server's KG summary (--schema), after the instructions

    async def go(self, max_rounds: int) -> AgentResult:
        for _ in range(max_rounds):
            reply = await self._generate()
            self.text += reply.text
            action = self._action(reply)
            if action is None:  # out of tokens mid-way: let it go on
                continue
            tag, content = action
            if tag == ANSWER:
                self.text += "</answer>"
                return self._finish(split_answers(content))
            if tag == SEARCH:
                self.text += "</search>"
                block = await self._search(content.strip())
                self.text += f"\n\n<triples>\n{block}\n</triples>\n\n"
                self.since = len(self.text)
                continue
            self.run.note("the model stopped without an answer")
            return self._finish([])
        self.run.note("round limit reached without an answer", max_rounds=max_rounds)
        return self._finish([])

    def _action(self, reply: TextReply) -> tuple[str, str] | None:
        """("search" | "answer", content), ("end", "") when the model is done without either, or
        None when it ran out of tokens and should go on."""
        written = self.text[self.since :]
        open_tag = pending(written)
        if reply.stop_sequence is not None:
            tag = reply.stop_sequence.strip("</>")
            if open_tag is not None and open_tag.tag == tag:
                return tag, open_tag.content
            self._format_error(f"{reply.stop_sequence} with no <{tag}> open")
            if tag == ANSWER:
                return "end", ""
            return SEARCH, ""  # answered with a note that says how to search
        if reply.finish == "length":
            return None
        if open_tag is None:
            return "end", ""
        if reply.ended:
            self._format_error(f"<{open_tag.tag}> left open when the model ended its text")
        return open_tag.tag, open_tag.content

    def _format_error(self, what: str) -> None:
        self.format_errors.append(what)
        self.run.note("format error", error=what)

    async def _generate(self) -> TextReply:
        run = self.run
        prompt = prompt_for(run.kg.profile, run.question, self.topics, self.text, self.schema)
        run.turns += 1
        run.trace.event(
            "model_request",
            role="model",
            model=self.model.name,
            system=prompt.system,
            user=prompt.user,
            prefix=prompt.prefix,
            stop=STOP_SEQUENCES,
        )
        started = time.perf_counter()
        reply = await self.model.generate(prompt, stop=STOP_SEQUENCES, sampling=self.sampling)
        run.usage["model"] = run.usage.get("model", Usage()) + reply.usage
        run.trace.event(
            "model_reply",
            role="model",
            text=reply.text,
            stop_reason=reply.finish,
            stop_sequence=reply.stop_sequence,
            ended=reply.ended,
            usage=asdict(reply.usage),
            seconds=round(time.perf_counter() - started, 4),
        )
        return reply

    # --- retrieval ----------------------------------------------------------------------------

    async def _search(self, query: str) -> str:
        """The text that goes between the <triples> tags for one search."""
        if not query:
            return "Nothing was searched: write one entity between <search> and </search>, or BACKTRACK."
        arguments: dict[str, Any] = {"question": self.run.question, "session": self.session}
        if self.top_k:
            arguments["top_k"] = self.top_k
        if query == BACKTRACK:
            arguments["backtrack"] = True
        else:
            entity = await self._resolve(query)
            if entity is None:
                self.run.note("unknown entity searched", query=query)
                return (
                    f"No entity called {query!r} among the topic entities and the entities in earlier triples. "
                    "Search one of those, by the id in brackets or by its exact name."
                )
            arguments["entity"] = entity
        self.searches += 1
        result = await self.run.tool(TOOL, arguments)
        if result.is_error or not result.data:
            return f"Error: {result.text}"
        self._remember(result.data)
        return result.text

    async def _resolve(self, query: str) -> str | None:
        """An entity id for what the model searched: a known or id-like id, a seen name, or a
        find_entities hit among the topic and seen entities."""
        query = query.strip().strip("'\"").strip()
        bracketed = _BRACKETED_ID.search(query)
        if bracketed and (bracketed.group(1) in self.known or _ID_LIKE.match(bracketed.group(1))):
            return bracketed.group(1)
        if query in self.known or _ID_LIKE.match(query):
            return query
        folded = query.casefold()
        for entity_id, label in reversed(list(self.known.items())):
            if label is not None and label.casefold() == folded:
                return entity_id
        result = await self.run.tool("find_entities", {"name": query, "limit": 50})
        for hit in (result.data or {}).get("entities") or []:
            if hit["id"] in self.known:
                return hit["id"]
        return None

    def _remember(self, data: dict[str, Any]) -> None:
        """Keep the entities a result showed (most recent last), and record the tree edge walked."""
        shown = [data["entity"], *(t[end] for t in data.get("triples", []) for end in ("subject", "object"))]
        for term in shown:
            if term.get("kind", "iri") == "iri":
                self.known.pop(term["id"], None)
                self.known[term["id"]] = term.get("label")
        entity = data["entity"]["id"]
        if data.get("backtracked_from"):
            self.run.note(
                "backtrack",
                left=data["backtracked_from"]["id"],
                climbed=[t["id"] for t in data.get("climbed", [])],
                parent=(data.get("parent") or {}).get("id"),
                offered=None if data.get("exhausted") else entity,
                exhausted=bool(data.get("exhausted")),
            )
        if data.get("exhausted"):
            return
        if data.get("parent"):  # an edge of the traversal tree: parent --via--> entity
            self.run.hop(data["parent"]["id"], data.get("via"), [entity])
        else:  # a topic entity (a root): what it showed
            reached = [
                t[end]["id"]
                for t in data.get("triples", [])
                for end in ("subject", "object")
                if t[end]["id"] != entity and t[end].get("kind", "iri") == "iri"
            ]
            self.run.hop(entity, None, list(dict.fromkeys(reached)))

    def _finish(self, answers: list[str]) -> AgentResult:
        return self.run.finish(
            answers,
            abstained=not answers,
            reasoning=OPEN + self.text,
            topics=self.topics,
            session=self.session,
            searches=self.searches,
            format_errors=self.format_errors,
        )
