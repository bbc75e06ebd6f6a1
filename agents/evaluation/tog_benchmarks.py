"""Readers for the KGQA test sets as Think-on-Graph released them (`../shared/data/tog/`), which
Search-on-Graph and KG-Reasoner reuse and R2-KG shares for WebQSP and CWQ.

| name | file | KG | topics | answers | also |
|---|---|---|---|---|---|
| cwq | tog/cwq.json | Freebase | mids | a name | gold SPARQL |
| webqsp | tog/WebQSP.json | Freebase | mids | names | |
| grailqa | tog/grailqa.json | Freebase | mids | mids (their names as aliases), values | gold SPARQL |
| simpleqa | tog/SimpleQA.json | Freebase | mids | a name | gold relation (last segment) |
| webquestions | tog/WebQuestions.json | Freebase | a Freebase key (/en/jamaica), resolved at run time | names | |
| qald10-en | tog/qald_10-en.json | Wikidata | QIDs | QIDs (labels as aliases), values | gold SPARQL |
| trex, zsre | tog/T-REX.json, tog/Zero_Shot_RE.json | Wikidata | QIDs | a label with its aliases | |
| creak | tog/creak.json | Wikidata | QIDs | true / false | |

Freebase mids are written as the freebase profile shows them (`m.03_dwn`); Wikidata ids as `wd:Q42`.
An entry that cannot be read is skipped with a `MalformedEntry` warning that names it.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kg_mcp.agents.evaluation.benchmarks import MalformedEntry, Question

_MID = re.compile(r"^(?:ns:|fb:)?([mg]\.[0-9a-z_]+)$")
_WIKIDATA_ID = re.compile(r"^(?:wd:)?([QL][1-9]\d*)$")
# WebQuestions' topic page: http://www.freebase.com/view/en/jamaica -> the key /en/jamaica
_FREEBASE_PAGE = re.compile(r"^https?://www\.freebase\.com/view(/[a-z_]+/[^/\s]+)$")
_UNLINKED = "UnknownQID"


class _Skip(ValueError):
    """One entry cannot be read: the message says why."""


def _entries(path: Path, read: Callable[[int, dict[str, Any]], Question]) -> list[Question]:
    """Each entry of a JSON list through `read`; entries it cannot read are skipped with a warning."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise TypeError("the file is not a JSON list of questions")
    out = []
    for index, item in enumerate(data):
        try:
            if not isinstance(item, dict):
                raise _Skip("it is not a JSON object")
            out.append(read(index, item))
        except (_Skip, KeyError, TypeError, ValueError) as e:
            if isinstance(e, _Skip):
                why = str(e)
            elif isinstance(e, KeyError):
                why = f"no {e}"
            else:  # a field of another shape than the format's (a list where a name belongs...)
                why = "a field is not of the format's shape"
            warnings.warn(f"{path.name}: entry {index} ({_describe(item)}) skipped: {why}", MalformedEntry, stacklevel=3)
    return out


def _describe(item: Any) -> str:
    if not isinstance(item, dict):
        return "not an object"
    for key in ("ID", "QuestionId", "qid", "ex_id"):
        if key in item:
            return f"{key} {item[key]}"
    text = item.get("question") or item.get("input") or item.get("sentence") or ""
    return repr(str(text)[:60])


def _text(item: dict[str, Any], key: str) -> str:
    value = item[key]
    if not isinstance(value, str) or not value.strip():
        raise _Skip(f"its {key!r} is not a text")
    return value.strip()


def _named(topic: Any, make_id: Callable[[str], str]) -> dict[str, str | None]:
    """{name: id} from the files' {id: name}; a name two topics share gets its id appended. A topic
    the file could not link (T-REx, Zero-Shot RE and Creak write `UnknownQID`) keeps its name alone:
    the drivers look it up by name."""
    if not isinstance(topic, dict):
        raise _Skip("its topic_entity is not an {id: name} object")
    out: dict[str, str | None] = {}
    for raw, name in topic.items():
        entity = None if raw == _UNLINKED else make_id(str(raw))
        label = str(name).strip() if name else entity
        if not label:
            raise _Skip(f"its topic {raw!r} has neither an id nor a name")
        out[f"{label} ({entity})" if label in out else label] = entity
    return out


def freebase_id(raw: str) -> str:
    """A Freebase mid as the freebase profile writes it.

    >>> freebase_id("m.03_dwn"), freebase_id("ns:m.03_dwn")
    ('m.03_dwn', 'm.03_dwn')
    """
    match = _MID.match(raw.strip())
    if not match:
        raise _Skip(f"{raw!r} is not a Freebase mid")
    return match.group(1)


def wikidata_id(raw: str) -> str:
    """>>> wikidata_id("Q42")
    'wd:Q42'
    """
    match = _WIKIDATA_ID.match(raw.strip())
    if not match:
        raise _Skip(f"{raw!r} is not a Wikidata id")
    return "wd:" + match.group(1)


def _names(value: Any, key: str) -> tuple[str, ...]:
    """Answer names: a list, a Python-list string (WebQSP as some copies write it), or one name.
    `None` in the list (WebQSP's questions without an answer upstream write `[None]`) is left out.

    >>> _names("['Aragorn', None]", "answer"), _names("Ohio River", "answer")
    (('Aragorn',), ('Ohio River',))
    """
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = ast.literal_eval(value)  # literals only: never runs code
        except (ValueError, SyntaxError):
            raise _Skip(f"its {key!r} is not a list of names") from None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(v is None or isinstance(v, str | int | float) for v in value):
        raise _Skip(f"its {key!r} is not a list of names")
    return tuple(dict.fromkeys(str(v).strip() for v in value if v is not None and str(v).strip()))


# --- Freebase --------------------------------------------------------------------------------


def read_cwq(path: Path) -> list[Question]:
    """ComplexWebQuestions: `ID`, `question`, `sparql` (gold), `topic_entity` {mid: name}, `answer`."""

    def read(index: int, item: dict[str, Any]) -> Question:
        return Question(
            id=str(item["ID"]), text=_text(item, "question"), answers=_names(item["answer"], "answer"),
            topics=_named(item.get("topic_entity") or {}, freebase_id), gold_query=item.get("sparql") or None,
            qtype=item.get("compositionality_type"),
        )

    return _entries(path, read)


def read_webqsp(path: Path) -> list[Question]:
    """WebQuestionsSP: `QuestionId`, `RawQuestion`, `answer` (names), `topic_entity` {mid: name}."""

    def read(index: int, item: dict[str, Any]) -> Question:
        return Question(
            id=str(item["QuestionId"]), text=_text(item, "RawQuestion"), answers=_names(item["answer"], "answer"),
            topics=_named(item.get("topic_entity") or {}, freebase_id),
        )

    return _entries(path, read)


def read_grailqa(path: Path) -> list[Question]:
    """GrailQA: entity answers are mids with their names as aliases; value answers their text."""

    def read(index: int, item: dict[str, Any]) -> Question:
        answers, aliases = [], []
        for answer in item["answer"]:
            argument = str(answer["answer_argument"]).strip()
            if answer.get("answer_type") == "Entity":
                argument = freebase_id(argument)
                aliases.append((argument, *([answer["entity_name"]] if answer.get("entity_name") else [])))
            answers.append(argument)
        return Question(
            id=str(item["qid"]), text=_text(item, "question"), answers=tuple(dict.fromkeys(answers)),
            topics=_named(item.get("topic_entity") or {}, freebase_id), gold_query=item.get("sparql_query") or None,
            aliases=tuple(a for a in aliases if len(a) > 1), qtype=item.get("level"),
        )

    return _entries(path, read)


def read_simpleqa(path: Path) -> list[Question]:
    """SimpleQuestions: `question`, `topic_entity` {mid: name}, `answer`, `relation` (the gold
    relation's last segment, e.g. `country`)."""

    def read(index: int, item: dict[str, Any]) -> Question:
        return Question(
            id=f"simpleqa-{index}", text=_text(item, "question"), answers=_names(item["answer"], "answer"),
            topics=_named(item["topic_entity"], freebase_id), gold_relation=item.get("relation") or None, hops=1,
        )

    return _entries(path, read)


def freebase_key(url: str) -> str:
    """The Freebase key of a WebQuestions topic page, as the dump's `type.object.key` holds it.

    >>> freebase_key("http://www.freebase.com/view/en/jamaica")
    '/en/jamaica'
    """
    match = _FREEBASE_PAGE.match(url.strip())
    if not match:
        raise _Skip(f"its url {url!r} is not a Freebase topic page (http://www.freebase.com/view/en/NAME)")
    return match.group(1)


def key_name(key: str) -> str:
    """The name a key spells, for the fallback lookup by name: `/en/james_k_polk` -> `james k polk`.
    Freebase writes characters other than letters, digits and `_` in keys as `$` and 4 hex digits.

    >>> key_name("/en/james_k_polk"), key_name("/en/o$0027neal")
    ('james k polk', "o'neal")
    """
    local = key.rsplit("/", 1)[-1]
    local = re.sub(r"\$([0-9A-Fa-f]{4})", lambda m: chr(int(m.group(1), 16)), local)
    return local.replace("_", " ").strip()


def read_webquestions(path: Path) -> list[Question]:
    """WebQuestions: `question`, `answers` (names), `url` (the topic's Freebase page, no mid). The
    topic is left to resolve at run time (`topic_key`; see `topic_resolution`)."""

    def read(index: int, item: dict[str, Any]) -> Question:
        return Question(
            id=f"webquestions-{index}", text=_text(item, "question"), answers=_names(item["answers"], "answers"),
            topic_key=freebase_key(str(item["url"])),
        )

    return _entries(path, read)


# --- Wikidata --------------------------------------------------------------------------------


def read_qald10_en(path: Path) -> list[Question]:
    """QALD-10 English as Think-on-Graph wrote it: `answer` {QID or value: label}, `topic_entity`
    {QID: label}, `sparql`. QIDs become wd: ids with their labels as aliases; values stay text."""

    def read(index: int, item: dict[str, Any]) -> Question:
        answers, aliases = [], []
        answer = item["answer"]
        if not isinstance(answer, dict):
            raise _Skip("its answer is not a {QID: label} object")
        for raw, label in answer.items():
            if _WIKIDATA_ID.match(str(raw)):
                entity = wikidata_id(str(raw))
                answers.append(entity)
                if label:
                    aliases.append((entity, str(label)))
            else:
                answers.append(str(raw))
        return Question(
            id=f"qald10-en-{index}", text=_text(item, "question"), answers=tuple(dict.fromkeys(answers)),
            topics=_named(item.get("topic_entity") or {}, wikidata_id), gold_query=item.get("sparql") or None,
            aliases=tuple(aliases),
        )

    return _entries(path, read)


def _slot_filling(prefix: str) -> Callable[[Path], list[Question]]:
    """T-REx and Zero-Shot RE: `input` ("Subject [SEP] relation") is the question, as Think-on-Graph
    asks it; `answer` with its `alias`es (accepted answers)."""

    def reader(path: Path) -> list[Question]:
        def read(index: int, item: dict[str, Any]) -> Question:
            text = _text(item, "input")
            answer = _text(item, "answer")
            alias = item.get("alias") or []
            if not isinstance(alias, list):
                raise _Skip("its alias is not a list")
            names = tuple(dict.fromkeys([answer, *(str(a).strip() for a in alias if str(a).strip())]))
            relation = item.get("relation") or (text.split("[SEP]", 1)[1].strip() if "[SEP]" in text else None)
            return Question(
                id=f"{prefix}-{index}", text=text, answers=(answer,), topics=_named(item["topic_entity"], wikidata_id),
                aliases=(names,) if len(names) > 1 else (), qtype=relation, hops=1,
            )

        return _entries(path, read)

    return reader


read_trex = _slot_filling("trex")
read_zsre = _slot_filling("zsre")


def read_creak(path: Path) -> list[Question]:
    """Creak: true/false claims (`sentence`, `label`), `topic_entity` {QID: label}."""

    def read(index: int, item: dict[str, Any]) -> Question:
        label = str(item["label"]).strip().lower()
        if label not in ("true", "false"):
            raise _Skip(f"its label {item['label']!r} is not true or false")
        return Question(
            id=str(item.get("ex_id") or f"creak-{index}"), text=_text(item, "sentence"), answers=(label.capitalize(),),
            kind="yes_no", topics=_named(item.get("topic_entity") or {}, wikidata_id),
        )

    return _entries(path, read)
