"""Chaining `search` along gold relation paths reaches exactly the gold answers (MetaQA, PathQuestion).

This is the tools' ceiling for any model: if these walks fail, no agent can answer.
"""

from __future__ import annotations

import json

import pytest

from kg_mcp.settings import Settings
from kg_mcp.tools import search

QUESTIONS_PER_HOP = 60


def walk(
    backend, settings: Settings, start: str, path: list[str], *, revisit_topic: bool = True
) -> tuple[set[str], set[str]]:
    """Follow `path` (rel or ~rel) from `start` with filtered searches; returns (ids, labels) reached.

    MetaQA's paths never pass back through their topic entity (revisit_topic=False);
    PathQuestion's may (a spouse's spouse).
    """
    topic = backend.vocab.compact(backend.resolve_entity(start))
    frontier = {topic}
    labels: dict[str, str | None] = {}
    for step in path:
        direction = "incoming" if step.startswith("~") else "outgoing"
        relation = step.lstrip("~")
        reached = set()
        for entity in sorted(frontier):
            out = search(backend, settings, entity, direction, [relation])
            assert out.data.view == "rows" and not out.data.truncated, out.text
            for row in out.data.rows:
                reached.add(row.value.id)
                labels[row.value.id] = row.value.label
        frontier = reached if revisit_topic else reached - {topic}
    return frontier, {labels[i] for i in frontier}


def spread(items: list, n: int) -> list:
    """n items spread over the whole list (deterministic), so a test sees every question type."""
    step = max(1, len(items) // n)
    return items[::step][:n]


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_metaqa_gold_paths_reach_exactly_the_gold_answers(metaqa, data_dir, hops):
    questions = json.loads((data_dir / "metaqa" / f"{hops}hop_dev.json").read_text())
    settings = Settings()
    checked = 0
    for q in spread(questions, QUESTIONS_PER_HOP):
        _, labels = walk(metaqa, settings, q["topic_entity"], q["gold_relation_path"], revisit_topic=False)
        assert labels == set(q["answers"]), q["id"]
        checked += 1
    assert checked == QUESTIONS_PER_HOP


def _pathquestion_cases(data_dir, name: str) -> list[tuple[str, list[str], str]]:
    cases = []
    for line in (data_dir / "pathquestion" / name).read_text().splitlines():
        if not line.strip():
            continue
        _question, _answers, path = line.split("\t")
        parts = path.split("#<end>#")[0].split("#")
        cases.append((parts[0], parts[1:-1:2], parts[-1]))
    return cases


@pytest.mark.parametrize("name", ["PQ-2H.txt", "PQ-3H.txt"])
def test_pathquestion_gold_paths_reach_the_gold_answer(pathquestion, data_dir, name):
    settings = Settings()
    cases = spread(_pathquestion_cases(data_dir, name), QUESTIONS_PER_HOP)
    for subject, relations, answer in cases:
        _, labels = walk(pathquestion, settings, subject, relations)
        assert answer in labels, (subject, relations, answer)
    assert len(cases) == QUESTIONS_PER_HOP
