"""The evaluation metrics and answer matching on small cases computed by hand (in the comments)."""

from __future__ import annotations

import math

import pytest
from kg_mcp.agents.evaluation.matching import answer_key, canonical_id, matched, matches, normalise, yes_no
from kg_mcp.agents.evaluation.metrics import (
    Answer,
    ark_metrics,
    by_hops,
    consistent,
    entropy_reliability,
    r2kg_metrics,
    reliability,
    score,
    sog_metrics,
)
from kg_mcp.agents.evaluation.prices import PRICES, price_of, run_cost
from kg_mcp.agents.evaluation.tokens import count_tokens, tokenizer_name

# --- matching ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The Wrecking-Crew!", "the wrecking crew"),
        ("frederica_of_mecklenburg-strelitz", "frederica of mecklenburg strelitz"),
        ("Amélie", "amélie"),  # accents stay
        ("ＡＢＣ", "abc"),  # NFKC: full-width letters
        ("Fifty/Fifty", "fifty fifty"),
        ("O'Brien", "obrien"),
        ("1,234,567 and 12,34", "1234567 and 12 34"),  # only groups of three digits are thousands
        ("C++ & C$", "c++ c$"),  # symbols stay; & is punctuation
    ],
)
def test_normalise(text, expected):
    assert normalise(text) == expected


@pytest.mark.parametrize(
    "predicted, gold, labels, expected",
    [
        ("Steven Spielberg", "steven_spielberg", None, True),
        ("Jaws 2", "Jaws", None, False),
        ("wd:Q42", "http://www.wikidata.org/entity/Q42", None, True),
        ("Q42", "wd:Q43", None, False),
        ("Douglas Adams", "wd:Q42", None, False),  # a label never equals an id by itself
        ("douglas adams", "wd:Q42", {"wd:Q42": "Douglas Adams"}, True),
        ("Douglas Adams [wd:Q42]", "wd:Q42", None, True),
        ("kg:Catch_Me_If_You_Can", "Catch Me If You Can", None, True),
        ("kg:Am%C3%A9lie", "Amélie", None, True),
        ("1975", "1975", None, True),
    ],
)
def test_matches(predicted, gold, labels, expected):
    assert matches(predicted, gold, labels) is expected


def test_canonical_ids():
    assert canonical_id("<http://www.wikidata.org/entity/Q5>") == "wd:Q5"
    assert canonical_id("http://example.org/x") == "<http://example.org/x>"
    assert canonical_id("Star Wars: Episode IV") is None


def test_matched_counts_each_side():
    # predictions a, A (a duplicate after normalisation counts twice on the predicted side), c; gold a, b
    assert matched(["a", "A", "c"], ["a", "b"]) == (2, 1)


def test_answer_keys_compare_sets_after_normalisation():
    assert answer_key(["The Matrix", "wd:Q42"]) == answer_key(["the matrix", "Q42"])
    assert answer_key(["A"]) != answer_key(["A", "B"])


def test_yes_no_reading():
    assert yes_no(["TRUE"]) == "True" and yes_no(["No."]) == "False"
    assert yes_no(["Paris"]) is None and yes_no([], None) is None


# --- Search-on-Graph and R2-KG -----------------------------------------------------------------


def four_answers():
    return [
        score("q1", ["A"], ["A", "B"], abstained=False),  # first right, set incomplete
        score("q2", ["D", "C"], ["C"], abstained=False),  # first wrong, one right
        score("q3", ["e"], ["E"], abstained=False),  # exact
        score("q4", [], ["F"], abstained=True),
    ]


def test_sog_hits_at_1_and_exact_match():
    # Hits@1: q1, q3 -> 2/4; exact match: q3 -> 1/4
    assert sog_metrics(four_answers()) == {"hits@1": 0.5, "exact_match": 0.25}


def test_r2kg_coverage_hit_rate_and_f1s():
    m = r2kg_metrics(four_answers())
    assert m["coverage"] == 0.75  # q4 abstained
    assert m["hit_rate"] == 1.0  # q1..q3 each have a gold answer
    # micro: predicted right 1+1+1 of 1+2+1 -> P = 3/4; gold found 1+1+1 of 2+1+1 -> R = 3/4; F1 = 3/4
    assert m["micro_f1"] == pytest.approx(0.75)
    # sample-wise: q1 P=1 R=1/2 F1=2/3; q2 P=1/2 R=1 F1=2/3; q3 F1=1 -> (2/3 + 2/3 + 1) / 3 = 7/9
    assert m["sample_f1"] == pytest.approx(7 / 9)


def test_aliases_count_for_hits_exact_match_and_f1():
    """Think-on-Graph's alias-tolerant matching (T-REx, Zero-Shot RE, QALD-10 labels): a prediction
    naming any name of a gold answer names that answer; two names of one answer are one answer."""
    aliases = [("Cambridge, England", "Cambridge"), ("wd:Q84", "London")]
    cases = [
        score("q1", ["Cambridge"], ["Cambridge, England"], abstained=False, aliases=aliases),
        score("q2", ["cambridge", "London"], ["Cambridge, England", "wd:Q84"], abstained=False, aliases=aliases),
        score("q3", ["Oxford", "Cambridge"], ["Cambridge, England"], abstained=False, aliases=aliases),
        score("q4", ["Cambridge"], ["Cambridge, England"], abstained=False),  # no aliases given: a miss
    ]
    assert [c.hit1 for c in cases] == [True, True, False, False]
    assert [c.exact for c in cases] == [True, True, False, False]
    assert [(c.n_right, c.n_found, c.n_gold) for c in cases] == [(1, 1, 1), (2, 2, 2), (1, 1, 1), (0, 0, 1)]
    assert sog_metrics(cases) == {"hits@1": 0.5, "exact_match": 0.5}
    m = r2kg_metrics(cases)
    assert (m["coverage"], m["hit_rate"]) == (1.0, 0.75)
    # q3: P = 1/2, R = 1 -> F1 = 2/3; q4: 0 -> sample-wise (1 + 1 + 2/3 + 0) / 4
    assert m["sample_f1"] == pytest.approx((2 + 2 / 3) / 4)


def test_an_alias_group_does_not_merge_two_gold_answers():
    # both names given as gold answers of their own still need both found for exact match
    only_one = score("q", ["Cambridge"], ["Cambridge", "Oxford"], abstained=False, aliases=[("Cambridge", "Cantab")])
    assert (only_one.hit1, only_one.exact, only_one.n_found, only_one.n_gold) == (True, False, 1, 2)


def test_yes_no_accuracy_counts_abstentions_as_wrong():
    scores = [
        score("c1", ["yes"], ["True"], abstained=False, kind="yes_no"),
        score("c2", ["yes"], ["False"], abstained=False, kind="yes_no"),
        score("c3", [], ["False"], abstained=False, kind="yes_no", verdict="False"),
        score("c4", [], ["True"], abstained=True, kind="yes_no"),
    ]
    assert sog_metrics(scores)["hits@1"] == 0.5 and r2kg_metrics(scores)["coverage"] == 0.75


def test_r2kg_metrics_without_any_answer_have_no_ratio():
    m = r2kg_metrics([score("q", [], ["x"], abstained=True)])
    assert m == {"coverage": 0.0, "hit_rate": None, "micro_f1": None, "sample_f1": None}


def test_wrong_answers_give_zero_f1():
    m = r2kg_metrics([score("q", ["x"], ["y"], abstained=False)])
    assert m["micro_f1"] == 0.0 and m["sample_f1"] == 0.0 and m["hit_rate"] == 0.0


def test_strict_self_consistency():
    runs = [
        Answer("q1", ("A", "B"), False), Answer("q1", ("b", "a"), False),  # agree (after normalisation)
        Answer("q2", ("C",), False), Answer("q2", (), True),  # one abstained
        Answer("q3", ("D",), False), Answer("q3", ("E",), False),  # disagree
        Answer("q4", ("X",), False), Answer("q4", ("x",), False),  # agree, wrong
    ]
    out = consistent(runs)
    assert [qid for qid, a in out.items() if not a.abstained] == ["q1", "q4"]
    gold = {"q1": ["A", "B"], "q2": ["C"], "q3": ["D"], "q4": ["Y"]}
    scores = [score(q, list(a.answers), gold[q], abstained=a.abstained) for q, a in out.items()]
    m = r2kg_metrics(scores)
    assert m["coverage"] == 0.5 and m["hit_rate"] == 0.5


def test_yes_no_self_consistency_reads_verdicts():
    runs = [Answer("q", (), False, "True", "yes_no"), Answer("q", ("yes",), False, None, "yes_no")]
    assert consistent(runs)["q"].abstained is False
    runs.append(Answer("q", ("False",), False, "False", "yes_no"))
    assert consistent(runs)["q"].abstained is True


# --- ARK-V1 --------------------------------------------------------------------------------------


def test_ark_answer_rate_and_accuracies():
    scores = [
        score("q1", ["True"], ["True"], abstained=False, kind="yes_no", verdict="True"),  # correct
        score("q2", ["False"], ["True"], abstained=False, kind="yes_no", verdict="False"),  # wrong
        score("q3", [], ["True"], abstained=True, kind="yes_no", verdict="None"),  # abstained
        score("q4", ["yes"], ["True"], abstained=False, kind="yes_no"),  # correct, read from the text
    ]
    m = ark_metrics(scores)
    assert m["answer_rate"] == 0.75
    assert m["conditional_accuracy"] == pytest.approx(2 / 3)
    assert m["overall_accuracy"] == 0.5
    assert [s.outcome for s in scores] == ["True", "False", "None", "True"]


def test_entropy_reliability_over_repeats():
    # q1: T T T -> 1; q2: T F None -> 0; q3: T T F -> H = log2 3 - 2/3, so 1 - H/log2 3 = (2/3)/log2 3
    outcomes = {"q1": ["True"] * 3, "q2": ["True", "False", "None"], "q3": ["True", "True", "False"]}
    gold = ["True"]
    scores = [
        score(q, [o] if o != "None" else [], gold, abstained=o == "None", kind="yes_no", verdict=o, repeat=i)
        for q, runs in outcomes.items()
        for i, o in enumerate(runs)
    ]
    expected = (1 + 0 + (2 / 3) / math.log2(3)) / 3
    assert reliability(scores) == pytest.approx(expected)
    assert entropy_reliability(["True", "True", "False"]) == pytest.approx(0.420620, abs=1e-6)


def test_reliability_needs_repeats():
    assert reliability([score("q", ["a"], ["a"], abstained=False)]) is None


def test_per_hop_breakdown():
    scores = [
        score("a", ["x"], ["x"], abstained=False, hops=1),
        score("b", ["y"], ["x"], abstained=False, hops=2),
        score("c", [], ["x"], abstained=True, hops=2),
    ]
    hops = by_hops(scores)
    assert hops[1] == {"hits@1": 1.0, "coverage": 1.0, "n": 1}
    assert hops[2] == {"hits@1": 0.0, "coverage": 0.5, "n": 2}


# --- cost and tokens -------------------------------------------------------------------------------


def test_cost_from_the_price_table():
    usage = {"operator": {"input_tokens": 1000, "output_tokens": 500}, "supervisor": {"input_tokens": 2000, "output_tokens": 100}}
    models = {"operator": "openai:gpt-4o-mini", "supervisor": "anthropic:claude-sonnet-4-5"}
    # 1000 x 0.15 + 500 x 0.60 + 2000 x 3 + 100 x 15, per million
    assert run_cost(usage, models) == pytest.approx(0.00795)
    assert run_cost(usage, {**models, "supervisor": "openai:my-local-model"}) is None
    idle = {"operator": usage["operator"], "supervisor": {"input_tokens": 0, "output_tokens": 0}}
    assert run_cost(idle, {**models, "supervisor": "openai:unknown"}) == pytest.approx(0.00045)
    assert price_of("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"]


def test_o200k_token_counts():
    assert tokenizer_name().startswith("o200k_base")
    assert count_tokens("hello world") == 2  # o200k_base: [24912, 2375]
    assert count_tokens("") == 0
    assert count_tokens("text with <|endoftext|> inside") > 3  # counted as text, not refused
