"""When a predicted answer counts as a gold answer.

Two answers match when they are the same id, or when their texts are equal after `normalise`.
An id is compared as an id only (`wd:Q42`, `Q42` and `<http://www.wikidata.org/entity/Q42>` are
one id); a label never equals an id, unless the gold id's label is known (`labels`, looked up in
the KG by the runner), and then the label is compared as text. Yes/no answers are read as
"True" / "False" (from ARK-V1's verdict, or from an answer reading yes/true or no/false).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from urllib.parse import unquote

_APOSTROPHES = "'’ʼ`´"
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WIKIDATA_IRI = re.compile(r"^<?https?://www\.wikidata\.org/(?:entity|wiki|prop/direct)/([QPL][1-9]\d*)>?$")
_WIKIDATA_ID = re.compile(r"^(?:wd:|wdt:)?([QPL][1-9]\d*)$")
_FREEBASE_ID = re.compile(r"^(?:fb:|ns:)?([mg]\.[0-9a-z_]+)$")
_MINTED = re.compile(r"^kg:(\S+)$")  # names minted from plain-text KBs: kg:Catch_Me_If_You_Can
_IRI = re.compile(r"^<?(https?://\S+?)>?$")
_WITH_ID = re.compile(r"^(.*?)\s*[\[(]\s*([^\s\[\]()]+)\s*[\])]\s*$")  # "Douglas Adams [wd:Q42]"


def normalise(text: str) -> str:
    """An answer's text for comparison. In order:

    1. Unicode NFKC, then case folding (`Straße` -> `strasse`);
    2. underscores become spaces (PathQuestion writes `united_kingdom`);
    3. commas between digit groups go (`59,449` -> `59449`);
    4. apostrophes go (`Schindler's` -> `schindlers`); every other punctuation character
       (Unicode category P*: `.,;:!?-/()[]"` ...) becomes a space;
    5. runs of whitespace become one space, and the ends are trimmed.

    Letters keep their accents, and symbols (Unicode category S*: `+`, `$`, `=`) stay; note that
    `&`, `#`, `%` and `@` are punctuation to Unicode.

    >>> normalise("  The Wrecking-Crew!")
    'the wrecking crew'
    >>> normalise("burnham-on-sea") == normalise("Burnham on Sea")
    True
    >>> normalise("united_kingdom"), normalise("Schindler's List"), normalise("59,449")
    ('united kingdom', 'schindlers list', '59449')
    """
    text = unicodedata.normalize("NFKC", text).casefold().replace("_", " ")
    text = _THOUSANDS.sub("", text)
    out = []
    for ch in text:
        if ch in _APOSTROPHES:
            continue
        out.append(" " if unicodedata.category(ch).startswith("P") else ch)
    return " ".join("".join(out).split())


def canonical_id(text: str) -> str | None:
    """The id an answer names, in one spelling, or None for a label.

    >>> canonical_id("Q42"), canonical_id("wd:Q42"), canonical_id("http://www.wikidata.org/entity/Q42")
    ('wd:Q42', 'wd:Q42', 'wd:Q42')
    >>> canonical_id("m.0v1xv"), canonical_id("kg:Catch_Me_If_You_Can"), canonical_id("Douglas Adams")
    ('m.0v1xv', 'kg:Catch_Me_If_You_Can', None)
    """
    text = text.strip()
    for pattern, prefix in ((_WIKIDATA_IRI, "wd:"), (_WIKIDATA_ID, "wd:"), (_FREEBASE_ID, "")):
        match = pattern.match(text)
        if match:
            return prefix + match.group(1)
    if _MINTED.match(text):
        return text
    match = _IRI.match(text)
    return f"<{match.group(1)}>" if match else None


def _forms(answer: str, labels: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """(ids, normalised texts) an answer stands for."""
    ids, texts = set(), set()
    answer = answer.strip()
    candidates = [answer]
    with_id = _WITH_ID.match(answer)
    if with_id and canonical_id(with_id.group(2)):
        candidates = [with_id.group(1), with_id.group(2)]
    for candidate in candidates:
        found = canonical_id(candidate)
        if found is None:
            texts.add(normalise(candidate))
            continue
        ids.add(found)
        if found in labels:
            texts.add(normalise(labels[found]))
        minted = _MINTED.match(found)
        if minted:  # a minted id spells its label: kg:Catch_Me_If_You_Can
            texts.add(normalise(unquote(minted.group(1))))
    texts.discard("")
    return ids, texts


def matches(predicted: str, gold: str, labels: Mapping[str, str] | None = None) -> bool:
    """Whether `predicted` names `gold`: the same id, or equal normalised texts.

    `labels` maps gold ids to their labels (so that a label can match a gold id).

    >>> matches("Steven Spielberg", "steven_spielberg"), matches("wd:Q42", "Q42")
    (True, True)
    >>> matches("Douglas Adams", "wd:Q42"), matches("Douglas Adams", "wd:Q42", {"wd:Q42": "Douglas Adams"})
    (False, True)
    """
    labels = labels or {}
    p_ids, p_texts = _forms(predicted, labels)
    g_ids, g_texts = _forms(gold, labels)
    return bool(p_ids & g_ids) or bool(p_texts & g_texts)


def matched(
    predicted: Iterable[str],
    gold: Iterable[str],
    labels: Mapping[str, str] | None = None,
    aliases: Iterable[Iterable[str]] = (),
) -> tuple[int, int]:
    """(predicted answers that match some gold answer, gold answers matched by some prediction).

    With `aliases` (each gold answer with its other names), a prediction matches a gold answer when
    it matches any of its names, as Think-on-Graph and Search-on-Graph score T-REx and Zero-Shot RE.
    """
    predicted = list(dict.fromkeys(predicted))
    groups = gold_groups(gold, aliases)
    right = sum(any(matches_any(p, g, labels) for g in groups) for p in predicted)
    found = sum(any(matches_any(p, g, labels) for p in predicted) for g in groups)
    return right, found


def gold_groups(gold: Iterable[str], aliases: Iterable[Iterable[str]] = ()) -> list[tuple[str, ...]]:
    """Each distinct gold answer with every name an alias group that contains it gives.

    >>> gold_groups(["heavy metal", "jazz"], [["heavy metal", "metal"]])
    [('heavy metal', 'metal'), ('jazz',)]
    """
    groups = [tuple(dict.fromkeys(a)) for a in aliases]
    out = []
    for answer in dict.fromkeys(gold):
        names = [answer] + [n for group in groups if answer in group for n in group]
        out.append(tuple(dict.fromkeys(names)))
    return out


def matches_any(predicted: str, names: Iterable[str], labels: Mapping[str, str] | None = None) -> bool:
    """Whether `predicted` names any of `names` (one gold answer's names)."""
    return any(matches(predicted, name, labels) for name in names)


def answer_key(answers: Iterable[str]) -> frozenset[str]:
    """An answer set in comparable form (ids as ids, texts normalised), for agreement between runs."""
    key = set()
    for answer in answers:
        ids, texts = _forms(answer, {})
        key |= ids or texts
    return frozenset(key)


_YES = {"yes", "true", "y"}
_NO = {"no", "false", "n"}


def yes_no(answers: list[str], verdict: str | None = None) -> str | None:
    """"True", "False" or None (abstained) for a yes/no question.

    >>> yes_no([], "False"), yes_no(["Yes."]), yes_no(["no"]), yes_no(["maybe"]), yes_no([], "None")
    ('False', 'True', 'False', None, None)
    """
    if verdict in ("True", "False"):
        return verdict
    if verdict == "None" or not answers:
        return None
    first = normalise(answers[0])
    if first in _YES:
        return "True"
    if first in _NO:
        return "False"
    return None
