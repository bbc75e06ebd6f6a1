"""`kg-mcp eval --lookup`: does find_entities find the topic entities when names are typed as people do?

Each topic name becomes a few queries: the name itself, one typo, lower case without
punctuation, a partial name (its last word), its words reordered, and the entity's aliases where
the KG has them. A query counts at k when an entity that has the topic's exact name is among
find_entities' first k hits. No model is involved: these are the tool's own figures.
"""

from __future__ import annotations

import random
import re
import statistics
import string
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.backends import Backend
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities

KINDS = ("exact", "typo", "lower", "partial", "reordered", "alias")
_AT = 5  # hits asked for: recall@1 and recall@5 are read from them


@dataclass(frozen=True)
class Topic:
    name: str
    gold: frozenset[str]  # compact ids of the entities that have this exact name
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    kind: str
    query: str
    topic: Topic


@dataclass
class KindScore:
    cases: int = 0
    at1: int = 0
    at5: int = 0


@dataclass
class LookupSummary:
    method: str
    kinds: dict[str, KindScore] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # (kind, query, topic name)
    topics: int = 0
    skipped: int = 0  # topic names with no entity of that exact name in the KG

    def total(self) -> KindScore:
        out = KindScore()
        for score in self.kinds.values():
            out.cases, out.at1, out.at5 = out.cases + score.cases, out.at1 + score.at1, out.at5 + score.at5
        return out


# --- making queries from names ------------------------------------------------------------------


def one_typo(name: str, rng: random.Random) -> str | None:
    """`name` with one letter replaced, dropped, doubled or swapped with the next, in a word of 4+ letters.

    >>> one_typo("Steven Spielberg", random.Random(1)) != "Steven Spielberg"
    True
    >>> one_typo("Up", random.Random(1)) is None
    True
    """
    spans = [m.span() for m in re.finditer(r"[^\W\d_]{4,}", name)]
    if not spans:
        return None
    start, end = rng.choice(spans)
    i = rng.randrange(start + 1, end - 1)  # spare the first letter, as most typists do
    letter = rng.choice(string.ascii_lowercase.replace(name[i].lower(), ""))
    edit = rng.choice(("replace", "drop", "double", "swap"))
    if edit == "replace":
        return name[:i] + letter + name[i + 1 :]
    if edit == "drop":
        return name[:i] + name[i + 1 :]
    if edit == "double":
        return name[:i] + name[i] + name[i:]
    swapped = name[:i] + name[i + 1] + name[i] + name[i + 2 :]
    return swapped if swapped != name else name[:i] + letter + name[i + 1 :]


def lower_plain(name: str) -> str | None:
    """>>> lower_plain("Ocean's Eleven (2001)")
    'oceans eleven 2001'
    """
    text = " ".join(re.sub(r"[^\w\s]", "", name.lower()).split())
    return text or None


def partial(name: str) -> str | None:
    """The last word of a name of several words (a surname, a title's key word).

    >>> partial("Steven Spielberg"), partial("Jaws")
    ('Spielberg', None)
    """
    words = name.split()
    return words[-1].strip(string.punctuation) or None if len(words) > 1 else None


def reordered(name: str) -> str | None:
    """>>> reordered("Steven Spielberg"), reordered("Jaws")
    ('Spielberg Steven', None)
    """
    words = name.split()
    return " ".join(words[-1:] + words[:-1]) if len(words) > 1 else None


def cases_for(topics: Iterable[Topic], seed: int) -> list[Case]:
    rng = random.Random(seed)
    cases = []
    for topic in topics:
        made = {
            "exact": topic.name,
            "typo": one_typo(topic.name, rng),
            "lower": lower_plain(topic.name),
            "partial": partial(topic.name),
            "reordered": reordered(topic.name),
        }
        for kind, query in made.items():
            if query and (kind == "exact" or query != topic.name):
                cases.append(Case(kind, query, topic))
        cases += [Case("alias", alias, topic) for alias in topic.aliases]
    return cases


# --- topics -------------------------------------------------------------------------------------


def topics_from_names(backend: Backend, names: Iterable[str], settings: Settings) -> tuple[list[Topic], int]:
    """Topics for names (the gold: entities with that exact label), and how many names the KG lacks."""
    topics, missing = [], 0
    for name in dict.fromkeys(names):
        gold = _labelled(backend, name, settings)
        if not gold:
            missing += 1
            continue
        topics.append(Topic(name, gold, _aliases(backend, gold, settings)))
    return topics, missing


def topics_from_labels(backend: Backend, settings: Settings, sample: int, seed: int) -> list[Topic]:
    """Topics drawn from the KG's own labels in the first preferred language (for a KG without questions)."""
    language = settings.languages[0] if settings.languages else "en"
    predicate = backend.profile.label_predicates[0]
    # The first 200,000 labels the store gives, without DISTINCT: deduplicating all of them first
    # took past the query time limit on the 100M-triple scale store (21 million names).
    rows = backend.run_query(
        f'SELECT ?l WHERE {{ ?x <{predicate}> ?l . FILTER(isIRI(?x) && LANGMATCHES(LANG(?l), "{language}")) }} '
        "LIMIT 200000",
        200_000,
    ).rows
    names = sorted({r[0].value for r in rows if r[0] is not None})
    chosen = random.Random(seed).sample(names, min(sample, len(names)))
    return topics_from_names(backend, chosen, settings)[0]


def _labelled(backend: Backend, name: str, settings: Settings) -> frozenset[str]:
    """Entities whose label is exactly `name`, asked in SPARQL (independent of the lookup measured)."""
    forms = [str(ox.Literal(name))] + [str(ox.Literal(name, language=lang)) for lang in settings.languages]
    # One bound pattern per predicate and form: with VALUES, Oxigraph scanned every triple (past
    # the query time limit on the 100M-triple scale store).
    patterns = " UNION ".join(f"{{ ?x <{p}> {form} }}" for p in backend.profile.label_predicates for form in forms)
    query = f"SELECT DISTINCT ?x WHERE {{ {patterns} FILTER(isIRI(?x)) }}"
    return frozenset(backend.vocab.compact(r[0]) for r in backend.run_query(query, 20).rows if r[0] is not None)


def _aliases(backend: Backend, gold: frozenset[str], settings: Settings) -> tuple[str, ...]:
    if not backend.profile.alias_predicates:
        return ()
    nodes = " ".join(f"<{backend.vocab.parse(g).value}>" for g in gold)
    predicates = " ".join(f"<{p}>" for p in backend.profile.alias_predicates)
    languages = ", ".join(f'"{lang}"' for lang in [*settings.languages, ""])
    query = f"SELECT DISTINCT ?a WHERE {{ VALUES ?x {{ {nodes} }} VALUES ?p {{ {predicates} }} ?x ?p ?a . FILTER(LANG(?a) IN ({languages})) }}"
    return tuple(sorted(r[0].value for r in backend.run_query(query, 50).rows if r[0] is not None))


# --- running ------------------------------------------------------------------------------------


def run_lookup(backend: Backend, settings: Settings, cases: list[Case]) -> LookupSummary:
    summary = LookupSummary(method="")
    for case in cases:
        started = time.perf_counter()
        out = find_entities(backend, settings, case.query, _AT)
        summary.seconds.append(time.perf_counter() - started)
        summary.method = out.data.method
        ids = [e.id for e in out.data.entities]
        score = summary.kinds.setdefault(case.kind, KindScore())
        score.cases += 1
        score.at1 += bool(ids[:1]) and ids[0] in case.topic.gold
        found = any(i in case.topic.gold for i in ids[:_AT])
        score.at5 += found
        if not found:
            summary.misses.append((case.kind, case.query, case.topic.name))
    summary.topics = len({c.topic.name for c in cases})
    return summary


def format_lookup(summary: LookupSummary, title: str) -> str:
    def row(kind: str, s: KindScore) -> str:
        return f"| {kind} | {s.cases} | {s.at1 / s.cases:.1%} | {s.at5 / s.cases:.1%} |" if s.cases else f"| {kind} | 0 | - | - |"

    lines = [
        f"{title}: {summary.topics} topic names ({summary.skipped} not in the KG), looked up by {summary.method}",
        "| kind | cases | recall@1 | recall@5 |",
        "|---|---|---|---|",
    ]
    lines += [row(kind, summary.kinds[kind]) for kind in KINDS if kind in summary.kinds]
    lines.append(row("all", summary.total()))
    if summary.seconds:
        p50 = statistics.median(summary.seconds) * 1000
        lines.append(f"find_entities latency (in process): p50 {p50:.1f} ms over {len(summary.seconds)} calls")
    return "\n".join(lines)
