"""The metrics of the three papers, over scored answers. Every ratio is None when it has no denominator.

One `Score` is one answer to one question (one run of it: `repeat`). Answers are matched to gold
answers by `matching.matches`; a yes/no question's answer is its verdict, "True" or "False", or
None for an abstention.

- Search-on-Graph: Hits@1, the share of questions whose first answer is a gold answer, and exact
  match, the share whose answer set is the gold set (every answer gold, every gold answer given).
  An abstention counts as a miss for both.
- R2-KG: coverage, the share not abstained; over the answered questions only, hit rate (at least
  one answer is gold), micro-F1 (precision and recall summed over all answers of all answered
  questions) and sample-wise F1 (the mean of each question's F1). Strict self-consistency over
  several runs of a question: one answer set when every run answered the same set, otherwise an
  abstention (`consistent`), then the same metrics.
- ARK-V1: answer rate (not abstained), conditional accuracy (correct among answered), overall
  accuracy (correct among all), and reliability over repeated runs: per question, the entropy H of
  its outcomes over {True, False, None}, as 1 - H / log2 3, averaged over questions. For questions
  that are not yes/no, "correct" means at least one answer is gold and the outcomes are
  {correct, wrong, abstained}.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kg_mcp.agents.evaluation.matching import answer_key, gold_groups, matched, matches_any, yes_no


@dataclass(frozen=True)
class Score:
    question_id: str
    repeat: int
    abstained: bool
    hit1: bool  # the first answer is gold
    exact: bool  # answer set == gold set
    hit: bool  # at least one answer is gold
    n_predicted: int
    n_right: int  # predicted answers that are gold
    n_gold: int
    n_found: int  # gold answers that were given
    outcome: str  # yes/no: "True", "False", "None"; otherwise "correct", "wrong", "abstained"
    hops: int | None = None

    @property
    def f1(self) -> float:
        return _f1(self.n_right, self.n_predicted, self.n_found, self.n_gold)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _f1(right: int, predicted: int, found: int, gold: int) -> float:
    precision, recall = _ratio(right, predicted) or 0.0, _ratio(found, gold) or 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def score(
    question_id: str,
    predicted: Sequence[str],
    gold: Sequence[str],
    *,
    abstained: bool,
    kind: str = "entities",
    verdict: str | None = None,
    labels: Mapping[str, str] | None = None,
    repeat: int = 0,
    hops: int | None = None,
    aliases: Sequence[Sequence[str]] = (),
) -> Score:
    """One answer scored against its gold answers (`kind` "yes_no": gold is ["True"] or ["False"]).
    `aliases`: gold answers with their other names; a prediction naming any of them names the answer."""
    if kind == "yes_no":
        value = None if abstained else yes_no(list(predicted), verdict)
        right = value is not None and bool(gold) and value == gold[0]
        return Score(
            question_id, repeat, value is None, right, right, right, int(value is not None), int(right), 1,
            int(right), str(value), hops,
        )
    predicted = [] if abstained else list(dict.fromkeys(predicted))
    groups = gold_groups(gold, aliases)
    n_right, n_found = matched(predicted, gold, labels, aliases)
    hit1 = bool(predicted) and any(matches_any(predicted[0], g, labels) for g in groups)
    exact = bool(predicted) and n_right == len(predicted) and n_found == len(groups)
    gave = bool(predicted)
    outcome = "abstained" if not gave else ("correct" if n_right else "wrong")
    return Score(
        question_id, repeat, not gave, hit1, exact, n_right > 0, len(predicted), n_right, len(groups),
        n_found, outcome, hops,
    )


def _mean(values: Iterable[float]) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def sog_metrics(scores: Sequence[Score]) -> dict[str, float | None]:
    return {"hits@1": _mean(s.hit1 for s in scores), "exact_match": _mean(s.exact for s in scores)}


def r2kg_metrics(scores: Sequence[Score]) -> dict[str, float | None]:
    answered = [s for s in scores if not s.abstained]
    right = sum(s.n_right for s in answered)
    precision = _ratio(right, sum(s.n_predicted for s in answered))
    recall = _ratio(sum(s.n_found for s in answered), sum(s.n_gold for s in answered))
    micro = None
    if precision is not None and recall is not None:
        micro = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "coverage": _mean(not s.abstained for s in scores),
        "hit_rate": _mean(s.hit for s in answered),
        "micro_f1": micro,
        "sample_f1": _mean(s.f1 for s in answered),
    }


def ark_metrics(scores: Sequence[Score]) -> dict[str, float | None]:
    answered = [s for s in scores if not s.abstained]
    correct = sum(s.hit for s in answered)
    return {
        "answer_rate": _mean(not s.abstained for s in scores),
        "conditional_accuracy": _ratio(correct, len(answered)),
        "overall_accuracy": _ratio(correct, len(scores)),
    }


def entropy_reliability(outcomes: Sequence[str]) -> float:
    """1 - H / log2 3 for one question's outcomes over its runs: 1 when all agree.

    >>> entropy_reliability(["True"] * 5), round(entropy_reliability(["True", "False", "None"]), 6)
    (1.0, 0.0)
    """
    counts = Counter(outcomes)
    total = sum(counts.values())
    h = -sum(c / total * math.log2(c / total) for c in counts.values())
    return 1 - h / math.log2(3)


def reliability(scores: Sequence[Score]) -> float | None:
    """ARK-V1's reliability: the mean over questions of `entropy_reliability` of their runs' outcomes.
    None unless some question was run more than once."""
    by_question: dict[str, list[str]] = defaultdict(list)
    for s in scores:
        by_question[s.question_id].append(s.outcome)
    if all(len(v) < 2 for v in by_question.values()):
        return None
    return _mean(entropy_reliability(v) for v in by_question.values())


@dataclass(frozen=True)
class Answer:
    """What `consistent` needs of one run's answer."""

    question_id: str
    answers: tuple[str, ...]
    abstained: bool
    verdict: str | None = None
    kind: str = "entities"


def consistent(runs: Iterable[Answer]) -> dict[str, Answer]:
    """Strict self-consistency: per question, the runs' common answer, or an abstention when any run
    abstained or two runs gave different answer sets (compared after normalisation)."""
    grouped: dict[str, list[Answer]] = defaultdict(list)
    for run in runs:
        grouped[run.question_id].append(run)
    out = {}
    for qid, group in grouped.items():
        first = group[0]

        def key(a: Answer):
            return yes_no(list(a.answers), a.verdict) if a.kind == "yes_no" else answer_key(a.answers)

        keys = [None if a.abstained else key(a) for a in group]
        agreed = all(k is not None and k == keys[0] for k in keys) and keys[0] not in (frozenset(), None)
        out[qid] = first if agreed else Answer(qid, (), True, "None" if first.kind == "yes_no" else None, first.kind)
    return out


def by_hops(scores: Sequence[Score]) -> dict[int | None, dict[str, float | None]]:
    """Hits@1 and coverage per number of hops (None: unknown), for the per-hop breakdown."""
    grouped: dict[int | None, list[Score]] = defaultdict(list)
    for s in scores:
        grouped[s.hops].append(s)
    return {
        hops: {"hits@1": _mean(s.hit1 for s in group), "coverage": _mean(not s.abstained for s in group), "n": len(group)}
        for hops, group in sorted(grouped.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    }
