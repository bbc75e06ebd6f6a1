"""ARK-V1 (Klein & Ohnemus, 2025): reasoning steps built from an anchor, one relation and cited triples.

Each reasoning step k runs a fixed procedure, every selection a structured JSON reply:

1. Anchor: the model names an entity (id or exact label; topic entities and the entities of
   earlier steps are offered as candidates). It is valid only if `get_relations` knows it and
   lists at least one relation around it (the paper's "head entity"; here a relation in either
   direction counts). Invalid: feedback, another attempt.
2. Relations: those `get_relations` listed are shown (`~rel` = incoming), read over its pages
   (at most RELATION_PAGES; the number left out is said).
3. Relation: the model picks one; it must be listed (exact name, any case, or a label that
   names exactly one listed relation). An empty choice means "dead end": back to step 1,
   which costs one more anchor attempt.
4. Triples: `explore_kg` on that one relation; each triple shown gets a key `T1`, `T2`, ...
5. Reasoning: the model cites keys (all must have been shown), states the implication and
   says whether to continue. An empty list of keys means "nothing useful": back to step 1.

A reply that holds no JSON object, misses a field or breaks a rule is a failed attempt: the
reason goes back to the model and it tries again. Each selection (the anchor of a step, the
relation of an anchor, the reasoning over a relation's triples, the final answer) has at most
`c_max` attempts. After each valid step the context is reset to the system prompt, the
question and a summary of all steps so far (implications and the triples they rest on).
When the model stops continuing, when `k_max` steps are done or when a selection runs out of
attempts, the agent asks for the final answer from that same reset context: True / False /
None (abstain) for yes/no questions, answer labels otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kg_mcp.agents.ark_replies import (
    ANCHOR_SCHEMA,
    ANSWERS_SCHEMA,
    BACK,
    RELATION_SCHEMA,
    STEP_SCHEMA,
    VERDICT_SCHEMA,
    Check,
    OutOfAttempts,
    Step,
    Triple,
    accept,
    as_bool,
    looks_yes_no,
    read_verdict,
    reject,
    show_entity,
    tool_error_text,
)
from kg_mcp.agents.conventions import DEFAULT_CONVENTION, topic_rule
from kg_mcp.agents.kg_client import KGClient, read_pages
from kg_mcp.agents.models.base import Message, Model, Sampling
from kg_mcp.agents.models.json_text import parse_json_object
from kg_mcp.agents.run import AgentResult, Run, resolve_topics
from kg_mcp.agents.trace import Trace

from kg_mcp.prompt_files import read_prompt

EXEMPLARS = {"wikidata": "wikidata", "freebase": "freebase"}  # any other profile: generic
ID_EXAMPLES = {"wikidata": "wd:Q42", "freebase": "m.0jcx"}
MAX_CANDIDATES = 60
# pages of get_relations read for one anchor: 60,000 characters at the default budget, what one
# output held before listings were paged (Douglas Adams's 294 relations in the tests' Wikidata
# sample take 2 pages)
RELATION_PAGES = 3


@dataclass
class _Ark:
    run: Run
    model: Model
    question: str
    topics: dict[str, str]
    yes_no: bool
    c_max: int
    k_max: int
    sampling: Sampling | None
    profile: str
    convention: str = DEFAULT_CONVENTION
    steps: list[Step] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # every entity shown: id -> label
    system: str = ""
    schema: bool = False  # --schema: the server's KG summary goes after the system prompt

    # --- context --------------------------------------------------------------------------------

    def system_prompt(self) -> str:
        kind = EXEMPLARS.get(self.profile, "generic")
        answer_form = (
            "This is a yes/no question: the final answer is True, False, or None if the KG facts "
            "and commonsense do not settle it."
            if self.yes_no
            else "The final answer lists the answer entities by their labels as the KG shows them."
        )
        return read_prompt("ark/system.md").render(
            exemplars=read_prompt(f"ark/exemplars_{kind}.md").template,
            id_example=ID_EXAMPLES.get(self.profile, "kg:Name"),
            k_max=str(self.k_max),
            answer_form=answer_form,
            topic_rule=topic_rule(self.convention),
        )

    def question_text(self) -> str:
        text = f"Question: {self.question}"
        if self.topics:
            text += "\nTopic entities: " + ", ".join(f"{name} [{i}]" for name, i in self.topics.items())
        return text

    def base(self) -> list[Message]:
        """System prompt + question (+ the summary of all steps): the context after every reset."""
        messages = [Message("system", self.system), Message("user", self.question_text())]
        if self.steps:
            summary = "\n".join(step.summary() for step in self.steps)
            messages.append(Message("user", read_prompt("ark/summary.md").render(steps=summary).strip()))
        return messages

    def candidates(self) -> list[str]:
        seen: dict[str, str] = {i: f"{name} [{i}]" for name, i in self.topics.items()}
        for step in self.steps:
            for triple in step.cited:
                for entity in (triple.head, triple.tail):
                    if entity.get("kind") == "iri" and entity["id"] not in seen:
                        seen[entity["id"]] = show_entity(entity)
        return list(seen.values())

    def anchor_prompt(self, number: int) -> str:
        shown = self.candidates()
        lines = [f"- {c}" for c in shown[:MAX_CANDIDATES]]
        if len(shown) > MAX_CANDIDATES:
            lines.append(f"- ... and {len(shown) - MAX_CANDIDATES} more from your steps")
        return (
            read_prompt("ark/anchor.md")
            .render(step=str(number), candidates="\n".join(lines) or "(none yet)")
            .strip()
        )

    # --- one selection, with retries ------------------------------------------------------------

    async def select(self, stage: str, schema: dict[str, Any], check) -> Any:
        """Ask until `check` accepts the reply; at most c_max attempts for this selection."""
        while self.attempts.get(stage, 0) < self.c_max:
            attempt = self.attempts[stage] = self.attempts.get(stage, 0) + 1
            reply = await self.run.ask(self.model, self.messages, json_schema=schema, sampling=self.sampling)
            self.messages.append(Message("assistant", reply.text))
            data = parse_json_object(reply.text)
            if data is None:
                verdict = reject("unparseable reply", "The reply holds no JSON object.")
            else:
                verdict = await check(data)
            if verdict.rule is None:
                return verdict.value
            retry = attempt < self.c_max
            self.run.note(
                verdict.rule,
                stage=stage,
                attempt=attempt,
                c_max=self.c_max,
                reason=verdict.reason,
                retry=retry,
            )
            if retry:
                self.messages.append(
                    Message(
                        "user",
                        f"Not accepted (attempt {attempt} of {self.c_max}): {verdict.reason} "
                        "Reply again with one JSON object as asked.",
                    )
                )
        raise OutOfAttempts(stage)

    # --- the stages -----------------------------------------------------------------------------

    async def check_anchor(self, data: dict[str, Any]) -> Check:
        raw = data.get("anchor")
        if not isinstance(raw, str) or not raw.strip():
            return reject("invalid anchor", 'The reply names no anchor: give an entity id in "anchor".')
        wanted = raw.strip()
        by_label = [i for i, label in self.labels.items() if label.lower() == wanted.lower()]
        if wanted in self.topics:
            entity = self.topics[wanted]
        elif wanted not in self.labels and len(by_label) == 1:
            entity = by_label[0]
        else:
            entity = wanted
        pages = await read_pages(self.run.tool, "get_relations", {"entity": entity}, max_pages=RELATION_PAGES)
        result = pages[0]
        if result.is_error or not result.data:
            return reject(
                "invalid anchor", f"{wanted!r} is not an entity of the KG: {tool_error_text(result.text)}"
            )
        # a later page that fails (a cursor gone stale) ends the list there
        listed = [page.data or {} for page in pages if not page.is_error]
        relations = [r for data in listed for r in data.get("relations") or ()]
        if not relations:
            return reject(
                "invalid anchor", f"{wanted!r} has no relations in the KG, so it cannot be an anchor."
            )
        anchor = result.data["entity"]
        if anchor.get("label"):
            self.labels.setdefault(anchor["id"], anchor["label"])
        return accept((anchor, relations, result.data.get("total", len(relations))))

    def relation_prompt(self, anchor: dict[str, Any], relations: list[dict[str, Any]], total: int) -> str:
        done = {s.relation: s.number for s in self.steps if s.anchor["id"] == anchor["id"]}
        lines = []
        for r in relations:
            name, label = r["relation"], r.get("label")
            line = f"- {name}" + (f" ({label})" if label and label != name.lstrip("~") else "")
            line += f": {r['triples']} triple{'s' if r['triples'] != 1 else ''}"
            if name in done:
                line += f" (explored in step {done[name]})"
            lines.append(line)
        if total > len(relations):
            lines.append(f"- ... and {total - len(relations):,} more, not shown")
        return (
            read_prompt("ark/relation.md")
            .render(anchor=show_entity(anchor), relations="\n".join(lines))
            .strip()
        )

    def check_relation(self, anchor: dict[str, Any], relations: list[dict[str, Any]]):
        names = [r["relation"] for r in relations]

        async def check(data: dict[str, Any]) -> Check:
            if "relation" not in data:
                return reject("invalid reply", 'The reply has no "relation" field.')
            raw = data["relation"]
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                return accept(BACK)
            if not isinstance(raw, str):
                return reject("invalid reply", '"relation" must be a string.')
            wanted = raw.strip()
            if wanted in names:
                return accept(wanted)
            folded = [n for n in names if n.lower() == wanted.lower()]
            if len(folded) == 1:
                return accept(folded[0])
            by_label = [r["relation"] for r in relations if (r.get("label") or "").lower() == wanted.lower()]
            if len(by_label) == 1:
                return accept(by_label[0])
            return reject(
                "relation not listed",
                f"{wanted!r} is not among the relations of {show_entity(anchor)}; pick one exactly as listed "
                f'({", ".join(names[:30])}{", ..." if len(names) > 30 else ""}), or "" for another anchor.',
            )

        return check

    async def explore(self, anchor: dict[str, Any], relation: str) -> tuple[list[Triple], int] | None:
        result = await self.run.tool("explore_kg", {"entity": anchor["id"], "relations": [relation]})
        if result.is_error or not result.data or not result.data.get("relations"):
            self.run.note(
                "no triples",
                anchor=anchor["id"],
                relation=relation,
                error=result.text if result.is_error else None,
            )
            return None
        walked = result.data["relations"][0]
        neighbours = walked.get("neighbours") or []
        self.run.hop(anchor["id"], relation, [n["id"] for n in neighbours if n.get("kind") != "blank"])
        if not neighbours:
            self.run.note("no triples", anchor=anchor["id"], relation=relation)
            return None
        bare, backwards = relation.lstrip("~"), relation.startswith("~")
        triples = []
        for number, n in enumerate(neighbours, 1):
            head, tail = (n, anchor) if backwards else (anchor, n)
            triples.append(Triple(f"T{number}", head, bare, walked.get("label"), tail))
            for entity in (head, tail):
                if entity.get("label"):
                    self.labels.setdefault(entity["id"], entity["label"])
        return triples, walked.get("total", len(triples))

    def triples_prompt(self, anchor: dict[str, Any], relation: str, triples: list[Triple], total: int) -> str:
        shown = f" (showing {len(triples)} of {total})" if total > len(triples) else ""
        return (
            read_prompt("ark/triples.md")
            .render(
                relation=relation,
                anchor=show_entity(anchor),
                shown=shown,
                triples="\n".join(f"{t.key}: {t.text()}" for t in triples),
            )
            .strip()
        )

    def check_step(self, number: int, anchor: dict[str, Any], relation: str, triples: list[Triple]):
        by_key = {t.key: t for t in triples}

        async def check(data: dict[str, Any]) -> Check:
            keys = data.get("triples")
            if isinstance(keys, str):
                keys = [k for k in re.split(r"[,\s]+", keys) if k]
            if not isinstance(keys, list):
                return reject("invalid reply", '"triples" must be a list of keys such as ["T1", "T2"].')
            wanted = [str(k).strip().upper() if not isinstance(k, int) else f"T{k}" for k in keys]
            unknown = [k for k in wanted if k not in by_key]
            if unknown:
                verb = "is" if len(unknown) == 1 else "are"
                shown = f"T1 to T{len(triples)}"
                return reject(
                    "bad triple keys", f"{', '.join(unknown)} {verb} not among the keys shown ({shown})."
                )
            if not wanted:
                return accept(BACK)
            implication = data.get("implication")
            if not isinstance(implication, str) or not implication.strip():
                return reject(
                    "invalid reply", 'The reply has no "implication": say what the cited triples imply.'
                )
            go_on = as_bool(data.get("continue"))
            if go_on is None:
                return reject("invalid reply", '"continue" must be true (another step) or false (answer now).')
            cited = [by_key[k] for k in dict.fromkeys(wanted)]
            return accept(Step(number, anchor, relation, triples, cited, implication.strip(), go_on))

        return check

    async def step(self, number: int) -> Step:
        """One reasoning step from a reset context; raises OutOfAttempts when a selection runs dry."""
        self.messages = self.base() + [Message("user", self.anchor_prompt(number))]
        self.attempts["anchor"] = 0
        while True:
            anchor, relations, total = await self.select("anchor", ANCHOR_SCHEMA, self.check_anchor)
            self.attempts["relation"] = 0
            self.messages.append(Message("user", self.relation_prompt(anchor, relations, total)))
            relation = await self.select("relation", RELATION_SCHEMA, self.check_relation(anchor, relations))
            if relation is BACK:
                self.back(
                    number, "no relation chosen: back to anchor selection", anchor, "You chose no relation"
                )
                continue
            explored = await self.explore(anchor, relation)
            if explored is None:
                self.back(number, None, anchor, f"{relation} gave no triples")
                continue
            triples, total = explored
            self.attempts["triples"] = 0
            self.messages.append(Message("user", self.triples_prompt(anchor, relation, triples, total)))
            step = await self.select(
                "triples", STEP_SCHEMA, self.check_step(number, anchor, relation, triples)
            )
            if step is BACK:
                self.back(
                    number,
                    "no triples cited: back to anchor selection",
                    anchor,
                    f"No triple of {relation} helped",
                )
                continue
            return step

    def back(self, number: int, rule: str | None, anchor: dict[str, Any], why: str) -> None:
        """Return to anchor selection within the same step (the next anchor costs an attempt)."""
        if rule:
            self.run.note(rule, step=number, anchor=anchor["id"], anchor_attempts=self.attempts["anchor"])
        if self.attempts["anchor"] >= self.c_max:
            raise OutOfAttempts("anchor")
        self.messages.append(
            Message(
                "user",
                f"{why} from {show_entity(anchor)}, so choose another anchor.\n\n"
                + self.anchor_prompt(number),
            )
        )

    # --- the final answer -----------------------------------------------------------------------

    async def check_final(self, data: dict[str, Any]) -> Check:
        if self.yes_no:
            if "answer" not in data:
                return reject("invalid reply", 'The reply has no "answer": give "True", "False" or "None".')
            verdict = read_verdict(data["answer"])
            if verdict is None:
                return reject(
                    "invalid reply", f'"answer" must be "True", "False" or "None", not {data["answer"]!r}.'
                )
            return accept((verdict, data.get("reason") or ""))
        answers = data.get("answers")
        if isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, (str, int, float)) for a in answers):
            return reject("invalid reply", '"answers" must be a list of answer labels.')
        labels = [self.labels.get(str(a).strip(), str(a).strip()) for a in answers]
        return accept((list(dict.fromkeys(a for a in labels if a)), data.get("reason") or ""))

    async def final(self, preamble: str) -> tuple[Any, str]:
        self.messages = self.base()
        prompt = read_prompt("ark/final_yes_no.md" if self.yes_no else "ark/final_entities.md")
        self.messages.append(Message("user", prompt.render(preamble=preamble).strip()))
        self.attempts["final"] = 0
        schema = VERDICT_SCHEMA if self.yes_no else ANSWERS_SCHEMA
        return await self.select("final", schema, self.check_final)

    async def solve(self) -> AgentResult:
        self.system = self.run.kg.with_schema(self.system_prompt(), self.schema)  # its model calls no tool
        limit, preamble = None, ""
        while True:
            if len(self.steps) >= self.k_max:
                limit, preamble = "k_max", f"You have used all {self.k_max} reasoning steps. "
                self.run.note("limit reached", limit="k_max", k_max=self.k_max, steps=len(self.steps))
                break
            try:
                step = await self.step(len(self.steps) + 1)
            except OutOfAttempts as out:
                limit = "c_max"
                preamble = (
                    f"No further step is possible ({self.c_max} attempts at the {out.stage} were used up). "
                )
                self.run.note(
                    "limit reached", limit="c_max", stage=out.stage, c_max=self.c_max, steps=len(self.steps)
                )
                break
            self.steps.append(step)
            self.run.note("context reset", after_step=step.number, implication=step.implication)
            if not step.go_on:
                break
        steps = [s.to_dict() for s in self.steps]
        extra: dict[str, Any] = {"steps": steps, "limit": limit, "topics": self.topics, "yes_no": self.yes_no}
        try:
            value, reason = await self.final(preamble)
        except OutOfAttempts:
            self.run.note(
                "limit reached", limit="c_max", stage="final", c_max=self.c_max, steps=len(self.steps)
            )
            value, reason = ("None" if self.yes_no else []), ""
        if self.yes_no:
            extra["verdict"] = value
            return self.run.finish(
                [] if value == "None" else [value], abstained=value == "None", reasoning=reason, **extra
            )
        return self.run.finish(value, abstained=not value, reasoning=reason, **extra)


async def run_ark(
    question: str,
    kg: KGClient,
    model: Model,
    *,
    topics: dict[str, str | None] | None = None,
    yes_no: bool | None = None,
    c_max: int = 5,
    k_max: int = 8,
    sampling: Sampling | None = None,
    trace: Trace | None = None,
    convention: str = DEFAULT_CONVENTION,
    schema: bool = False,
) -> AgentResult:
    """Answer `question` with ARK-V1's loop over the KG behind `kg`.

    `topics` {name: id or None} are offered as anchors (names without ids are looked up);
    `yes_no` None guesses from the question's form. `c_max` bounds the attempts of each
    selection, `k_max` the reasoning steps; `convention` names the benchmark's rule on the topic
    entity (prompts/conventions/). `extra` carries the steps, the limit hit (if any)
    and, for yes/no questions, the verdict "True" / "False" / "None" (None = abstained).
    """
    if c_max < 1 or k_max < 1:
        raise ValueError("c_max and k_max must be at least 1")
    run = Run("ark", question, kg, trace)
    resolved = await resolve_topics(run, topics or {})
    ark = _Ark(
        run=run,
        model=model,
        question=question,
        topics=resolved,
        yes_no=looks_yes_no(question) if yes_no is None else yes_no,
        c_max=c_max,
        k_max=k_max,
        sampling=sampling,
        profile=kg.profile,
        convention=convention,
        schema=schema,
    )
    return await ark.solve()
