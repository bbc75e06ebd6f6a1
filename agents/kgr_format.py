"""KG-Reasoner's text format: `<think>` with `<search>`/`<triples>` inside, then `<answer>`.

A well-formed completion (the text after the prompt, which opens with `<think>`) reads

    <think> reasoning <search>entity</search>

    <triples>
    (1) subject [id] | relation | object [id]
    </triples>

    more reasoning ... </think>

    <answer>answer one; answer two</answer>

This module finds what a model's text asks for (`pending`), reads answers, and checks the
whole form (`format_problems`), for the driver and for the training reward alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

THINK, SEARCH, TRIPLES, ANSWER = "think", "search", "triples", "answer"
TAGS = (THINK, SEARCH, TRIPLES, ANSWER)
STOP_SEQUENCES = ["</search>", "</answer>"]
BACKTRACK = "BACKTRACK"  # <search>BACKTRACK</search> asks the retrieval to backtrack
ANSWER_SEPARATORS = re.compile(r"\s*(?:;|\|)\s*|\n+")
_TAG = re.compile(r"<(/?)(think|search|triples|answer)>")


@dataclass(frozen=True)
class Pending:
    """An opening tag the model left open at the end of its text, and what it wrote after it."""

    tag: str
    content: str


def pending(text: str) -> Pending | None:
    """The search or answer tag left open at the end of `text`, if any.

    >>> pending("I need the director. <search>Jaws")
    Pending(tag='search', content='Jaws')
    >>> pending("<search>Jaws</search> done") is None
    True
    """
    last = None
    for match in _TAG.finditer(text):
        closing, tag = match.groups()
        if tag in (SEARCH, ANSWER):
            last = None if closing else (tag, match.end())
    if last is None:
        return None
    tag, start = last
    return Pending(tag, text[start:])


def split_answers(span: str) -> list[str]:
    """The answers in an `<answer>` span: separated by `;`, `|` or new lines; braces and quotes dropped.

    >>> split_answers(" Greek; English ")
    ['Greek', 'English']
    >>> split_answers("{Steven Spielberg}")
    ['Steven Spielberg']
    >>> split_answers("")
    []
    """
    parts = [p.strip().strip("{}").strip().strip("'\"").strip() for p in ANSWER_SEPARATORS.split(span)]
    return [p for p in parts if p]


def format_problems(completion: str) -> list[str]:
    """What is wrong with a completion's form; empty when it is well formed.

    The completion is everything the model side wrote after the prompt, opening `<think>` included.
    """
    problems: list[str] = []
    stack: list[str] = []
    seen: list[tuple[str, bool]] = []
    for match in _TAG.finditer(completion):
        closing, tag = match.group(1) == "/", match.group(2)
        seen.append((tag, closing))
        if not closing:
            if tag == THINK and (stack or any(t == THINK for t, _ in seen[:-1])):
                problems.append("more than one <think>")
            elif tag in (SEARCH, TRIPLES) and stack != [THINK]:
                problems.append(f"<{tag}> outside <think> or inside another tag")
            elif tag == ANSWER and stack:
                problems.append("<answer> inside another tag")
            stack.append(tag)
            continue
        if not stack or stack[-1] != tag:
            problems.append(f"</{tag}> does not close the last opened tag")
            if tag in stack:
                while stack and stack.pop() != tag:
                    pass
            continue
        stack.pop()
    problems += [f"<{tag}> is never closed" for tag in stack]
    order = [t for t, closing in seen if not closing]
    if order[:1] != [THINK]:
        problems.append("the completion does not open with <think>")
    if order.count(ANSWER) != 1:
        problems.append(f"{order.count(ANSWER)} <answer> tags, not one")
    elif order[-1] != ANSWER or not completion.rstrip().endswith("</answer>"):
        problems.append("the completion does not end with its <answer>")
    # each search is followed by its triples before anything else
    for i, tag in enumerate(order):
        if tag == SEARCH and (i + 1 >= len(order) or order[i + 1] != TRIPLES):
            problems.append("a <search> without the <triples> that answer it")
        if tag == TRIPLES and (i == 0 or order[i - 1] != SEARCH):
            problems.append("<triples> that no <search> asked for")
    return list(dict.fromkeys(problems))


def count_searches(completion: str) -> int:
    return len(re.findall(r"<search>.*?</search>", completion, re.DOTALL))
