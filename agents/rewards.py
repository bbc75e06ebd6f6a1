"""KG-Reasoner's training reward for one trajectory: retrieval + format + answer.

- retrieval: min(0.5 * n, 0.8) for n searches (rewarding the use of the KG, capped so that
  searching more never pays past the second search);
- format: 0.5 when the completion's tags are well formed (`kg_mcp.agents.kgr_format.format_problems`
  finds nothing, and the driver had to repair nothing), else 0;
- answer: 1 when the answer is correct against the gold answers, else 0; unknown (None) without
  gold answers, and then left out of the total.

Correctness compares normalised strings (case, punctuation, articles, underscores and spacing
ignored). `hit` (default): some predicted answer is a gold answer, as Hits@1-style KGQA scoring
counts; `exact`: the predicted set is the gold set. An abstention is never correct.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from kg_mcp.agents.kgr_format import format_problems

RETRIEVAL_PER_SEARCH = 0.5
RETRIEVAL_CAP = 0.8
FORMAT_REWARD = 0.5
ANSWER_REWARD = 1.0
Match = Literal["hit", "exact"]


@dataclass(frozen=True)
class Reward:
    retrieval: float
    format: float
    answer: float | None  # None: no gold answers to judge by

    @property
    def total(self) -> float:
        return round(self.retrieval + self.format + (self.answer or 0.0), 4)

    def to_dict(self) -> dict[str, float | None]:
        return {**asdict(self), "total": self.total}


def retrieval_reward(searches: int) -> float:
    """min(0.5 * n, 0.8).

    >>> [retrieval_reward(n) for n in (0, 1, 2, 7)]
    [0.0, 0.5, 0.8, 0.8]
    """
    return round(min(RETRIEVAL_PER_SEARCH * max(searches, 0), RETRIEVAL_CAP), 4)


def format_reward(completion: str, repaired: Iterable[str] = ()) -> float:
    return FORMAT_REWARD if not format_problems(completion) and not list(repaired) else 0.0


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans({c: " " for c in string.punctuation + "‘’´`“”"})


def normalise(text: str) -> str:
    """Lower case, `_` and punctuation as spaces, no articles, single spaces.

    >>> normalise("The_Lord of the Rings: The Two Towers")
    'lord of rings two towers'
    """
    text = text.lower().replace("_", " ").translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def is_correct(predicted: Iterable[str], gold: Iterable[str], match: Match = "hit") -> bool:
    """Whether the predicted answers count as correct against the gold ones.

    >>> is_correct(["greek"], ["Greek", "English"]), is_correct(["Greek"], ["Greek", "English"], "exact")
    (True, False)
    """
    said = {normalise(p) for p in predicted} - {""}
    truth = {normalise(g) for g in gold} - {""}
    if not said or not truth:
        return False
    return said == truth if match == "exact" else bool(said & truth)


def reward(
    completion: str,
    *,
    searches: int,
    predicted: list[str],
    gold: list[str] | None,
    repaired: Iterable[str] = (),
    match: Match = "hit",
) -> Reward:
    answer = None if gold is None else (ANSWER_REWARD if is_correct(predicted, gold, match) else 0.0)
    return Reward(retrieval_reward(searches), format_reward(completion, repaired), answer)
