"""A small Freebase built from the gold queries of benchmark questions, on which those queries hold.

Freebase itself cannot be reached from tests, so this writes the part of it that a sample of CWQ
and GrailQA questions needs: each walkable gold query's triple patterns with its variables filled
in. Real mids and relation names come from the queries; the topic entities are named with the
names the files give; the answer variable is filled with the gold answers (GrailQA's own answer
mids, named with their entity_name, or its values as literals; CWQ gives a name only, so a mid is
minted for it and named with that name); every other variable (a mediator/CVT node, a value that
only has to exist) is a minted node with no name, as mediators are in Freebase; class constraints
(`?x type.object.type ns:film.film`) are written as the query has them. A few distractor edges (relations of other questions, to named distractor nodes) go
around each node, so a walk that ignores the gold relation does not land on the answer by chance.

    python -m bench.small_freebase OUT.nt [--sample N] [--seed S]
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pyoxigraph as ox

from kg_mcp.agents.evaluation.benchmarks import Question
from kg_mcp.agents.evaluation.gold_query_walk import NotWalkable, gold_patterns
from kg_mcp.profiles import FREEBASE_PROFILE

NS = "http://rdf.freebase.com/ns/"
NAME = NS + "type.object.name"
DISTRACTORS = 3  # distractor edges around each node


@dataclass
class SmallFreebase:
    path: Path
    questions: list[Question]  # the questions whose gold queries hold on it
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> questions left out
    triples: int = 0


def minted(*parts: str) -> str:
    """A mid that no real one is: `m.zz` and a digest (Freebase's are m.0...)."""
    return "m.zz" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:10]


def _iri(local: str) -> str:
    return f"<{NS}{local}>"


def _literal(text: str) -> str:
    return str(ox.Literal(text))


def _named(text: str) -> str:
    return str(ox.Literal(text, language="en"))


def build(sets: dict[str, Iterable[Question]], out: Path, *, seed: int = 0, distractors: int = DISTRACTORS) -> SmallFreebase:
    """Write the small Freebase of the questions of `sets` ({benchmark name: questions}; those with a
    walkable gold query) to `out` (N-Triples). A GrailQA answer that is not a mid is a value (a
    literal); a CWQ answer is a name."""
    from rdflib.term import Literal, URIRef, Variable

    lines: set[str] = set()
    names: dict[str, str] = {}  # node (N-Triples form) -> name
    nodes: list[tuple[str, frozenset[str]]] = []  # (node, relations its question uses) for the distractors
    relations: set[str] = set()
    result = SmallFreebase(out, [])

    def term(t, bindings: dict[str, str]) -> str:
        if isinstance(t, Variable):
            return bindings[str(t)]
        if isinstance(t, URIRef):
            return f"<{t}>"
        return t.n3() if isinstance(t, Literal) else str(t)

    for benchmark, question in ((b, q) for b, qs in sets.items() for q in qs):
        patterns = gold_patterns(question.gold_query or "") if question.gold_query else NotWalkable("no-query")
        if isinstance(patterns, NotWalkable):
            result.skipped[patterns.reason] = result.skipped.get(patterns.reason, 0) + 1
            continue
        answer_terms = _answer_terms(question, values=benchmark == "grailqa")
        answer_is_subject = any(isinstance(s, Variable) and str(s) == patterns.answer for s, _, _ in patterns.triples)
        if any(t.startswith('"') for t, _ in answer_terms) and answer_is_subject:
            result.skipped["literal-answer-as-subject"] = result.skipped.get("literal-answer-as-subject", 0) + 1
            continue
        for name, ident in question.topics.items():
            if ident and not ident.startswith("wd:"):
                names[_iri(ident)] = name
        used = frozenset(str(p) for _, p, _ in patterns.triples)
        relations |= used
        variables = {str(t) for s, _, o in patterns.triples for t in (s, o) if isinstance(t, Variable)}
        fixed = {v: _iri(minted(question.id, v)) for v in variables if v != patterns.answer}
        for answer, name in answer_terms:
            if name:
                names[answer] = name
            bindings = {**fixed, patterns.answer: answer}
            for s, p, o in patterns.triples:
                lines.add(f"{term(s, bindings)} {term(p, bindings)} {term(o, bindings)} .")
        question_nodes = {term(t, {**fixed, patterns.answer: a}) for s, _, o in patterns.triples for t in (s, o)
                          for a, _ in answer_terms}
        nodes.extend((n, used) for n in sorted(question_nodes) if n.startswith("<"))
        result.questions.append(question)
    rng = random.Random(seed)
    pool = sorted(relations)
    for i, (node, used) in enumerate(nodes):
        others = [r for r in pool if r not in used]
        for k in range(min(distractors, len(others))):
            relation = rng.choice(others)
            target = _iri(minted("distractor", str(i), str(k)))
            names[target] = f"Distractor {i}-{k}"
            lines.add(f"{node} <{relation}> {target} ." if k % 2 == 0 else f"{target} <{relation}> {node} .")
    lines |= {f"{node} <{NAME}> {_named(name)} ." for node, name in names.items()}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(sorted(line + "\n" for line in lines)), encoding="utf-8")
    result.triples = len(lines)
    return result


def _answer_terms(question: Question, values: bool) -> list[tuple[str, str | None]]:
    """(node or literal in N-Triples form, name) of each gold answer; `values`: an answer that is not a
    mid is a literal (GrailQA's years, numbers, dates), else a name (CWQ)."""
    named = {alias[0]: alias[1] for alias in question.aliases if len(alias) > 1}
    out = []
    for answer in question.answers:
        if FREEBASE_PROFILE.bare_id(answer) is not None:
            out.append((_iri(answer), named.get(answer)))
        elif values:
            out.append((_literal(answer), None))
        else:
            out.append((_iri(minted(question.id, "answer", answer)), answer))
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sample", type=int, default=200, help="questions drawn from each of CWQ and GrailQA")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    sets = {name: select(load_benchmark(name).questions, sample=args.sample, seed=args.seed) for name in ("cwq", "grailqa")}
    built = build(sets, args.out, seed=args.seed)
    print(f"{built.triples:,} triples for {len(built.questions)} questions -> {args.out}; left out: {built.skipped}", file=sys.stderr)


if __name__ == "__main__":
    main()
