"""Scripted text-continuing models for KG-Reasoner's tag protocol, shared by its tests.

Each is a function of (user turn, assistant text so far) that returns the next continuation,
the way a model trained on the protocol would: it reads the `<triples>` blocks the driver
inserted and decides what to search next, or answers. `as_chat_policy` turns one into a
ScriptedModel policy (the driver reaches it through ChatAsText); `over_the_wire` into a
FakeProvider policy for the completions and chat endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kg_mcp.agents.models.base import Reply

Script = Callable[[str, str], str]  # (user turn, assistant text so far) -> continuation

TRIPLE = re.compile(r"^\(\d+\) (.*?) \[(\S+?)\] \| (\S+) \| (.*?) \[(\S+?)\]$", re.MULTILINE)
BLOCK = re.compile(r"<search>(.*?)</search>\s*<triples>\n(.*?)\n</triples>", re.DOTALL)
HEADER = re.compile(r"^.*? \[(\S+?)\]: \d+ triples?", re.MULTILINE)
OFFER = re.compile(r"next-best unexplored neighbour is .*? \((.*?) \[(\S+?)\] \| (\S+) \| (.*?) \[(\S+?)\]\)")
TOPIC = re.compile(r"Topic entities: (.*?) \[(\S+?)\]")


def triples(block: str) -> list[tuple[str, str, str, str, str]]:
    """(subject label, subject id, relation, object label, object id) rows of a triples block."""
    return TRIPLE.findall(block)


def blocks(text: str) -> list[tuple[str, str]]:
    """(what was searched, the triples block) for every search so far."""
    return BLOCK.findall(text)


def explored(text: str) -> dict[str, str]:
    """{entity id: its triples block} for every search that returned triples."""
    out = {}
    for _, block in blocks(text):
        header = HEADER.search(block)
        if header:
            out.setdefault(header.group(1), block)
    return out


def topic(user: str) -> tuple[str, str]:
    name, entity_id = TOPIC.search(user).groups()
    return name, entity_id


def reached(block: str, entity: str, relation: str) -> dict[str, str]:
    """{id: label} of the entities `relation` leads to from `entity` (`~rel` walks backwards)."""
    out = {}
    for s_label, s, r, o_label, o in triples(block):
        if relation.startswith("~") and r == relation[1:] and o == entity:
            out[s] = s_label
        elif r == relation and s == entity:
            out[o] = o_label
    return out


def gold_walker(path: list[str], *, keep_topic: bool = False) -> Script:
    """Walks `path` from the topic entity: searches every frontier entity, one per turn (the topic
    by its name, the others by id), then answers with the labels at the end of the path."""

    def script(user: str, text: str) -> str:
        name, start = topic(user)
        seen = explored(text)
        frontier, labels = [start], {}
        for relation in path:
            found: dict[str, str] = {}
            for entity in frontier:
                if entity not in seen:
                    target = name if entity == start else entity
                    return f" To follow {relation} I look at {target}. <search>{target}</search>"
                found.update(reached(seen[entity], entity, relation))
            if not keep_topic:
                found.pop(start, None)
            frontier, labels = sorted(found), found
        answer = "; ".join(sorted(set(labels.values())))
        return f" The triples give the answer. </think>\n\n<answer>{answer}</answer>"

    return script


def backtracker(first: str, wrong: str, last: str) -> Script:
    """Searches the topic, follows `first`, then wrongly `wrong`; finding no `last` relation there
    it writes BACKTRACK, and answers when the offered neighbour hangs on `last`."""

    def script(user: str, text: str) -> str:
        name, start = topic(user)
        seen = explored(text)
        done = blocks(text)
        if not done:
            return f"I start from {name}. <search>{name}</search>"
        if len(done) == 1:
            film = sorted(reached(seen[start], start, first))[0]
            return f" Now the film. <search>{film}</search>"
        if len(done) == 2:
            film = sorted(reached(seen[start], start, first))[0]
            writer = sorted(reached(seen[film], film, wrong))[0]
            return f" Maybe the writer knows. <search>{writer}</search>"
        offer = OFFER.search(done[-1][1])
        if offer and offer.group(3) == last:
            return f" That is it. </think>\n\n<answer>{offer.group(4)}</answer>"
        return " This branch is a dead end. <search>BACKTRACK</search>"

    return script


def as_chat_policy(script: Script):
    """A ScriptedModel policy: the user turn is messages[1], the assistant text so far messages[-1]."""

    def policy(messages, tools):
        assert messages[-1].role == "assistant" and messages[-1].content.startswith("<think>")
        return Reply(text=script(messages[1].content, messages[-1].content))

    return policy


def over_the_wire(script: Script, *, strip_stops: bool = False):
    """A FakeProvider policy for /v1/completions (the flat prompt) and /v1/chat/completions (the
    assistant message to continue). With `strip_stops` the reply leaves out its closing tag, as a
    server that honours `stop` without saying which one matched does."""

    def answer(request):
        if "prompt" in request.body:
            prompt = request.body["prompt"]
            user = prompt.split("\n\nUser: ", 1)[1].split("\nAssistant: ", 1)[0]
            text = prompt.split("\nAssistant: ", 1)[1]
        else:
            messages = request.body["messages"]
            user, text = messages[1]["content"], messages[-1]["content"]
        out = script(user, text)
        if strip_stops:
            for stop in ("</search>", "</answer>"):
                out = out.split(stop)[0]
        return Reply(text=out)

    return answer
