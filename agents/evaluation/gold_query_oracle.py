"""The oracle on benchmarks with gold queries (CWQ, GrailQA, QALD-10-en) or a gold relation
(SimpleQuestions): the query's chains walked through the tools, never through `sparql`.

A gold query becomes chains from its entity constants to the answer variable
(gold_query_walk.plan). In the `sog` and `batched` modes each chain from a topic entity is walked
with `search`, hop by hop through mediator nodes, as for a gold path (oracle.walk_path); with two or
more chains the answer is what every chain's last hop showed (a path intersection). A chain from a
constant that is not a topic (a notable type, a gender: hubs in Freebase) is checked backwards
instead, from each candidate answer to that constant, as `follow` checks a branch too big to walk
forwards. In the `follow` mode one `follow` call takes every chain as one of its `paths` and
intersects them itself. Paths that pass back through a start entity are kept (the query allows
them); the start entities are left out of the answer, as the gold queries' `FILTER (?x != ?c)` does.

SimpleQuestions gives only the gold relation's last segment (`country`): `get_relations` lists the
topic's relations, and every one whose last segment matches is walked from the topic (their
answers pooled). A question whose query cannot be walked is not scored: its reason is returned and
the summary counts and names it per reason.
"""

from __future__ import annotations

from kg_mcp.agents.evaluation.benchmarks import Question
from kg_mcp.agents.evaluation.gold_query_walk import Branch, NotWalkable, plan, simple_relation_matches
from kg_mcp.agents.evaluation.oracle import (
    MAX_BATCH,
    OracleRow,
    PathWalk,
    _Calls,
    _no_topic,
    _row,
    answer_entities,
    named_cells,
    topic_id,
    walk_path,
)

NO_MATCHING_RELATION = "no-matching-relation"  # SimpleQuestions: the topic has no relation with that last segment
WITH_GOLD_QUERIES = ("cwq", "grailqa", "simpleqa", "qald10-en")  # benchmarks whose questions carry one


def has_gold_query(question: Question) -> bool:
    return bool(question.gold_query or question.gold_relation)


async def walk_gold_query(calls: _Calls, question: Question, mode: str, profile: str) -> tuple[OracleRow | None, str]:
    """(the question's oracle row, "") or (None, the reason it cannot be walked)."""
    if question.gold_query:
        walk = plan(question.gold_query, tuple(i for i in question.topics.values() if i), profile)
        if isinstance(walk, NotWalkable):
            return None, walk.reason
        return await _walk(calls, question, walk.branches, mode, intersect=True), ""
    topic = await topic_id(calls.kg, question)
    if topic is None:
        return _no_topic(question), ""
    listed = await calls.call("get_relations", {"entity": topic})
    rows = [] if listed.is_error else named_cells(listed.text)
    relations = [row["relation"] for row in rows if row.get("relation")]
    matches = simple_relation_matches(relations, question.gold_relation or "")
    if not matches:
        return None, NO_MATCHING_RELATION
    row = await _walk(calls, question, tuple(Branch(topic, (r,)) for r in matches), mode, intersect=False)
    row.calls += len(listed.pages)  # the get_relations call's pages
    row.tokens += listed.tokens
    row.chars += listed.chars
    return row, ""


async def _walk(calls: _Calls, question: Question, branches: tuple[Branch, ...], mode: str, intersect: bool) -> OracleRow:
    starts = {b.start for b in branches}
    if mode == "follow" and intersect:
        arguments = {"paths": [[b.start, *b.path] for b in branches], "exclude_through": "none"}
        read = await calls.call("follow", arguments)
        answers = {} if read.is_error else answer_entities([read.text], "entity", "label")
        return _row(question, _without(answers, starts), len(read.pages), read.tokens, read.chars, read.cut)
    batch = MAX_BATCH if mode == "batched" else 1
    topics = set(question.topics.values())
    # chains from the question's topics are walked forwards; one from another constant (a type such
    # as College/University, a gender: hubs in Freebase) is checked backwards from each candidate
    forwards = [b for b in branches if b.start in topics or not intersect] or list(branches[:1])
    backwards = [b for b in branches if b not in forwards]
    answers: dict[str, set[str]] | None = None
    cost = PathWalk([])
    for branch in forwards:
        walked = await walk_path(calls, branch.start, branch.path, None, batch)
        _add(cost, walked)
        reached = answer_entities(walked.last, "value", "valueLabel")
        if answers is None:
            answers = reached
        elif intersect:
            answers = {entity: forms for entity, forms in answers.items() if entity in reached}
        else:
            for entity, forms in reached.items():
                answers.setdefault(entity, set()).update(forms)
    answers = _without(answers or {}, starts)
    for branch in backwards:
        back = tuple(r[1:] if r.startswith("~") else "~" + r for r in reversed(branch.path))
        for entity in list(answers):
            walked = await walk_path(calls, entity, back, None, batch)
            _add(cost, walked)
            if branch.start not in {row.get("value") for text in walked.last for row in named_cells(text)}:
                del answers[entity]
    return _row(question, answers, cost.calls, cost.tokens, cost.chars, cost.cut)


def _add(total: PathWalk, walked: PathWalk) -> None:
    total.calls, total.tokens, total.chars = total.calls + walked.calls, total.tokens + walked.tokens, total.chars + walked.chars
    total.cut = total.cut or walked.cut


def _without(answers: dict[str, set[str]], starts: set[str]) -> dict[str, set[str]]:
    return {entity: forms for entity, forms in answers.items() if entity not in starts}


