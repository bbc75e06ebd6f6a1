"""The benchmarks' question files, read into one shape: `Question`s, with the KB files they need.

Data comes from `../shared/data` (its README describes each release), from `--data DIR` laid out
the same way, or from `--data FILE`: one question file in the benchmark's own format (its KB,
where it has one, is looked for beside it under the usual name, or given with `kb=`).

| name | file | answers |
|---|---|---|
| metaqa-1hop / -2hop / -3hop | metaqa/{1,2,3}hop_dev.json + metaqa/kb.txt | labels |
| pathquestion-2h / -3h | pathquestion/PQ-2H.txt + 2H-kb.txt, PQ-3H.txt + 3H-kb.txt | labels (alternatives) |
| pathquestion-l2h | pathquestion/PQL-2H.txt + PQL2-KB.txt | labels (alternatives) |
| qald10 | qald10/qald_10.json (Wikidata, live) | Wikidata ids, literals, or yes/no |
| colota-qa / colota-cv | colota/CoLoTa_qa.json, CoLoTa_cv.json (Wikidata, live) | yes/no |
| cwq, webqsp, grailqa, simpleqa, webquestions | tog/*.json (Freebase: --sparql URL) | see tog_benchmarks |
| qald10-en, trex, zsre, creak | tog/*.json (Wikidata, live) | see tog_benchmarks |
"""

from __future__ import annotations

import json
import os
import random
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kg_mcp.errors import ConfigError

Kind = Literal["entities", "yes_no"]


class MalformedEntry(UserWarning):
    """A benchmark entry that cannot be read (skipped)."""


class DuplicateId(UserWarning):
    """Two entries of a benchmark share an id (the later ones get a suffix)."""


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    answers: tuple[str, ...]  # gold: labels, ids (wd:Q42), literals; ("True",) or ("False",) for yes/no
    kind: Kind = "entities"
    topics: dict[str, str | None] = field(default_factory=dict)  # name -> id, or None: looked up by name
    hops: int | None = None
    gold_path: tuple[str, ...] | None = None  # relations from the topic; ~rel walks backwards
    qtype: str | None = None
    gold_query: str | None = None  # the gold SPARQL as the file gives it (CWQ, GrailQA, QALD-10)
    gold_relation: str | None = None  # the gold relation as the file gives it (SimpleQuestions)
    # each gold answer with the other names it may go by (T-REx, Zero-Shot RE aliases); empty: none given
    aliases: tuple[tuple[str, ...], ...] = ()
    # a Freebase key (/en/jamaica) standing for the topic, resolved to its id at run time (WebQuestions)
    topic_key: str | None = None


@dataclass
class Benchmark:
    name: str
    questions: list[Question]
    source: Path
    kb_files: list[Path] = field(default_factory=list)  # what `kg-mcp load` needs; empty: a live endpoint
    endpoint: str | None = None  # "wikidata": over a Wikidata endpoint; "freebase": needs --sparql URL (or a server)
    revisit_topic: bool = False  # whether gold paths may pass back through the topic entity
    citation: str = ""

    @property
    def convention(self) -> str:
        """The rule on the topic entity that the drivers' prompts state (prompts/conventions/)."""
        return "pathquestion" if self.revisit_topic else "metaqa"


@dataclass(frozen=True)
class _Spec:
    questions: str  # path under the data root
    kb: tuple[str, ...]
    reader: Callable[[Path], list[Question]]
    endpoint: str | None = None
    revisit_topic: bool = False
    citation: str = ""


def default_data_dir() -> Path:
    """$KG_MCP_DATA, else ../shared/data from the working directory, else beside this checkout."""
    if os.environ.get("KG_MCP_DATA"):
        return Path(os.environ["KG_MCP_DATA"])
    here = Path.cwd().parent / "shared" / "data"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[3] / "shared" / "data"


# --- readers -----------------------------------------------------------------------------------


def read_metaqa(path: Path) -> list[Question]:
    """MetaQA as rebuilt in shared/data: a JSON list of {id, question, topic_entity, answers, qtype,
    gold_relation_path}."""
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        relations = tuple(item["gold_relation_path"])
        out.append(
            Question(
                id=str(item["id"]),
                text=item["question"],
                answers=tuple(item["answers"]),
                topics={item["topic_entity"]: None},
                hops=len(relations),
                gold_path=relations,
                qtype=item.get("qtype"),
            )
        )
    return out


def parse_pathquestion_line(line: str) -> tuple[str, tuple[str, ...], str, tuple[str, ...]]:
    """(question, answers, topic, relations) of one line `question TAB answer(alt1/alt2/) TAB path`.

    The answer before the parentheses is the end of the gold path; the parentheses list every
    acceptable answer.

    >>> parse_pathquestion_line("who ? \\tb(b/c/)\\ta#r1#x#r2#b#<end>#b")
    ('who ?', ('b', 'c'), 'a', ('r1', 'r2'))
    """
    question, answer, path = line.rstrip("\r\n").split("\t")
    parts = path.split("#<end>#")[0].split("#")
    end = parts[-1]
    if not (answer.startswith(end + "(") and answer.endswith(")")):
        raise ValueError(f"answer field {answer!r} does not start with the path's end {end!r}")
    alternatives = [a for a in answer[len(end) + 1 : -1].split("/") if a]
    answers = tuple(dict.fromkeys([end, *alternatives]))
    return question.strip(), answers, parts[0], tuple(parts[1:-1:2])


def read_pathquestion(path: Path) -> list[Question]:
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            text, answers, topic, relations = parse_pathquestion_line(line)
        except ValueError as e:
            warnings.warn(f"{path}:{number}: skipped, cannot read it ({e})", MalformedEntry, stacklevel=2)
            continue
        out.append(
            Question(
                id=f"{path.stem}-{number}",
                text=text,
                answers=answers,
                topics={topic: None},
                hops=len(relations),
                gold_path=relations,
            )
        )
    return out


_WD_ENTITY = re.compile(r"\bwd:(Q[1-9]\d*)\b")
_WD_IRI = "http://www.wikidata.org/entity/"


def _binding_value(value: dict[str, Any]) -> str:
    if value.get("type") == "uri" and value["value"].startswith(_WD_IRI):
        return "wd:" + value["value"][len(_WD_IRI) :]
    if value.get("type") == "uri":
        return f"<{value['value']}>"
    return str(value.get("value", ""))


def read_qald(path: Path, language: str = "en") -> list[Question]:
    """QALD-10 (QALD JSON): the English question, the gold bindings as answers (Wikidata entities as
    wd:Q.. ids, literals as their text, ASK queries as yes/no). The topic entities are the wd:Q..
    entities of the gold SPARQL query, as KGQA papers that assume entity linking do."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for item in data["questions"]:
        texts = {q.get("language"): q.get("string") for q in item.get("question", [])}
        text = texts.get(language) or next((t for t in texts.values() if t), None)
        if not text:
            warnings.warn(f"{path}: question {item.get('id')} has no text: skipped", MalformedEntry, stacklevel=2)
            continue
        answers: list[str] = []
        kind: Kind = "entities"
        for block in item.get("answers", []):
            if "boolean" in block:
                kind, answers = "yes_no", ["True" if block["boolean"] else "False"]
                continue
            for binding in block.get("results", {}).get("bindings", []):
                answers += [_binding_value(v) for v in binding.values()]
        query = item.get("query", {}).get("sparql", "")
        topics = {f"wd:{q}": f"wd:{q}" for q in dict.fromkeys(_WD_ENTITY.findall(query))}
        out.append(Question(id=str(item["id"]), text=text.strip(), answers=tuple(dict.fromkeys(answers)), kind=kind, topics=topics))
    return out


def read_colota(path: Path) -> list[Question]:
    """CoLoTa (qa: yes/no questions, cv: claims): `query`, boolean `answer`, `kg_entities` {label: QID}.
    Entries without a true/false answer (one upstream) are skipped with a warning."""
    out = []
    for index, item in enumerate(json.loads(path.read_text(encoding="utf-8"))):
        ok = (
            isinstance(item, dict)
            and isinstance(item.get("answer"), bool)
            and isinstance(item.get("query"), str)
            and isinstance(item.get("kg_entities", {}), dict)
        )
        if not ok:
            ident = item.get("id", index) if isinstance(item, dict) else index
            warnings.warn(
                f"{path.name}: entry {ident} is malformed upstream (its answer is not true/false): skipped",
                MalformedEntry,
                stacklevel=2,
            )
            continue
        entities = {label: f"wd:{qid}" for label, qid in item.get("kg_entities", {}).items()}
        out.append(
            Question(
                id=str(item.get("id", index)),
                text=item["query"],
                answers=("True" if item["answer"] else "False",),
                kind="yes_no",
                topics=entities,
                qtype=", ".join(item.get("reasoning_strategy") or []) or None,
            )
        )
    return out


def _tog_reader(name: str) -> Callable[[Path], list[Question]]:
    """A reader of tog_benchmarks, imported when first called (that module imports this one)."""

    def read(path: Path) -> list[Question]:
        from kg_mcp.agents.evaluation import tog_benchmarks

        return getattr(tog_benchmarks, name)(path)

    return read


_TOG = "in Think-on-Graph's release (Sun et al., ICLR 2024)"
TOG_SETS: dict[str, tuple[str, str, str, str]] = {  # name: (file, reader, endpoint, citation)
    "cwq": ("tog/cwq.json", "read_cwq", "freebase", f"ComplexWebQuestions (Talmor and Berant, NAACL 2018) {_TOG}"),
    "webqsp": ("tog/WebQSP.json", "read_webqsp", "freebase", f"WebQuestionsSP (Yih et al., ACL 2016) {_TOG}"),
    "grailqa": ("tog/grailqa.json", "read_grailqa", "freebase", f"GrailQA (Gu et al., WWW 2021) {_TOG}"),
    "simpleqa": ("tog/SimpleQA.json", "read_simpleqa", "freebase", f"SimpleQuestions (Bordes et al., 2015) {_TOG}"),
    "webquestions": (
        "tog/WebQuestions.json", "read_webquestions", "freebase", f"WebQuestions (Berant et al., EMNLP 2013) {_TOG}"
    ),
    "qald10-en": ("tog/qald_10-en.json", "read_qald10_en", "wikidata", f"QALD-10 English (Usbeck et al. 2023) {_TOG}"),
    "trex": ("tog/T-REX.json", "read_trex", "wikidata", f"T-REx (Elsahar et al., LREC 2018) {_TOG}"),
    "zsre": ("tog/Zero_Shot_RE.json", "read_zsre", "wikidata", f"Zero-Shot RE (Levy et al., CoNLL 2017) {_TOG}"),
    "creak": ("tog/creak.json", "read_creak", "wikidata", f"Creak (Onoe et al., NeurIPS 2021) {_TOG}"),
}

_METAQA = "MetaQA (Zhang et al., AAAI 2018)"
_PQ = "PathQuestion (Zhou et al., COLING 2018)"
SPECS: dict[str, _Spec] = {
    **{
        f"metaqa-{n}hop": _Spec(f"metaqa/{n}hop_dev.json", ("metaqa/kb.txt",), read_metaqa, citation=_METAQA)
        for n in (1, 2, 3)
    },
    "pathquestion-2h": _Spec(
        "pathquestion/PQ-2H.txt", ("pathquestion/2H-kb.txt",), read_pathquestion, revisit_topic=True, citation=_PQ
    ),
    "pathquestion-3h": _Spec(
        "pathquestion/PQ-3H.txt", ("pathquestion/3H-kb.txt",), read_pathquestion, revisit_topic=True, citation=_PQ
    ),
    "pathquestion-l2h": _Spec(
        "pathquestion/PQL-2H.txt", ("pathquestion/PQL2-KB.txt",), read_pathquestion, revisit_topic=True, citation=_PQ
    ),
    "qald10": _Spec("qald10/qald_10.json", (), read_qald, endpoint="wikidata", citation="QALD-10 (Usbeck et al. 2023)"),
    "colota-qa": _Spec(
        "colota/CoLoTa_qa.json", (), read_colota, endpoint="wikidata", citation="CoLoTa (Toroghi et al., 2025)"
    ),
    "colota-cv": _Spec(
        "colota/CoLoTa_cv.json", (), read_colota, endpoint="wikidata", citation="CoLoTa (Toroghi et al., 2025)"
    ),
    **{
        name: _Spec(file, (), _tog_reader(reader), endpoint=endpoint, citation=citation)
        for name, (file, reader, endpoint, citation) in TOG_SETS.items()
    },
}
NAMES: tuple[str, ...] = tuple(SPECS)
WITH_GOLD_PATHS: tuple[str, ...] = tuple(n for n in NAMES if n.startswith(("metaqa", "pathquestion")))


def load_benchmark(name: str, data: str | Path | None = None, kb: list[Path] | None = None) -> Benchmark:
    """Read benchmark `name` from a data root (default `default_data_dir()`) or one question file."""
    if name not in SPECS:
        raise ConfigError(f"Unknown benchmark {name!r}: choose one of {', '.join(NAMES)}.")
    spec = SPECS[name]
    root = Path(data) if data else default_data_dir()
    if root.is_file():
        questions_file = root
        kb_files = list(kb) if kb else [root.parent / Path(k).name for k in spec.kb]
    else:
        questions_file = root / spec.questions
        kb_files = list(kb) if kb else [root / k for k in spec.kb]
    if not questions_file.is_file():
        raise ConfigError(
            f"No {name} questions at {questions_file}. Put the benchmark data at ../shared/data, "
            "or point --data (or KG_MCP_DATA) at a folder laid out the same way or at the question file."
        )
    try:
        questions = unique_ids(spec.reader(questions_file), questions_file)
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"Cannot read {questions_file} as {name}: {type(e).__name__}: {e}") from None
    return Benchmark(
        name=name,
        questions=questions,
        source=questions_file.resolve(),
        kb_files=kb_files,
        endpoint=spec.endpoint,
        revisit_topic=spec.revisit_topic,
        citation=spec.citation,
    )


def describe(bench: Benchmark, questions: list[Question]) -> str:
    """What `eval --dry-run` prints: the count, and what the questions carry.

    The KG a benchmark needs is named too (Freebase sets need the user's endpoint)."""
    counts = {
        "with a gold query": sum(q.gold_query is not None for q in questions),
        "with a gold relation": sum(q.gold_relation is not None for q in questions),
        "with answer aliases": sum(bool(q.aliases) for q in questions),
        "yes/no": sum(q.kind == "yes_no" for q in questions),
        "topic from a Freebase key (resolved at run time)": sum(q.topic_key is not None for q in questions),
        "without topic entities": sum(not q.topics and q.topic_key is None for q in questions),
        "topics to look up by name": sum(any(v is None for v in q.topics.values()) for q in questions),
        "without a gold answer": sum(not q.answers for q in questions),
    }
    kg = {"freebase": "Freebase (--sparql URL)", "wikidata": "Wikidata (--wikidata)"}.get(bench.endpoint or "", "its KB")
    lines = [f"{bench.name}: {len(questions):,} questions from {bench.source}; KG: {kg}"]
    lines += [f"  {n:,} {what}" for what, n in counts.items() if n]
    return "\n".join(lines)


def unique_ids(questions: list[Question], source: Path) -> list[Question]:
    """Results are kept per question id: a repeated id (CoLoTa has two) becomes ID~2, ID~3..."""
    from dataclasses import replace

    seen: dict[str, int] = {}
    out = []
    for q in questions:
        seen[q.id] = seen.get(q.id, 0) + 1
        if seen[q.id] > 1:
            new_id = f"{q.id}~{seen[q.id]}"
            warnings.warn(f"{source.name}: id {q.id} is used twice upstream: the later entry is {new_id}", DuplicateId, stacklevel=3)
            q = replace(q, id=new_id)
        out.append(q)
    return out


def select(questions: list[Question], *, limit: int | None = None, sample: int | None = None, seed: int = 0) -> list[Question]:
    """`sample` questions drawn with `seed` (kept in file order), then the first `limit`."""
    chosen = questions
    if sample is not None and sample < len(questions):
        picked = set(random.Random(seed).sample(range(len(questions)), sample))
        chosen = [q for i, q in enumerate(questions) if i in picked]
    return chosen[:limit] if limit is not None else chosen
