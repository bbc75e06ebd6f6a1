"""ARK-V1 over the real KGs, driven by scripted policies that read the prompts they are sent.

The policy knows which selection it is asked for from the request's JSON schema title
(`ark_anchor`, `ark_relation`, `ark_step`, `ark_verdict` / `ark_answers`) and reads everything
else (candidates, relations, triple keys, the summary of earlier steps) from the messages.
"""

from __future__ import annotations

import json
import re

import pytest
from kg_mcp.agents.ark import RELATION_PAGES, looks_yes_no, run_ark
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message
from kg_mcp.agents.models.json_text import parse_json_object
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.trace import Trace

from kg_mcp.backends import open_store
from kg_mcp.settings import Settings

GOLD_2HOP = ["2-hop-dev-0", "2-hop-dev-1", "2-hop-dev-3", "2-hop-dev-25", "2-hop-dev-28"]
ZWICK = "what are the languages spoken in the films directed by [Joel Zwick]"
ZWICK_TOPIC = {"Joel Zwick": "kg:Joel_Zwick"}
ZWICK_PATH = ["~directed_by", "in_language"]
CATCH_ME = "kg:Catch_Me_If_You_Can"

_STEP = re.compile(r"^Step (\d+): anchor .*\[(\S+)\], relation (\S+)$")
_ENTITY = re.compile(r"^(.*) \[([^\[\]]+)\]$")


def _entity(text: str) -> tuple[str, str]:
    """(id, label) of `Label [id]`, or of a literal `"text"`."""
    match = _ENTITY.match(text.strip())
    if match:
        return match.group(2), match.group(1)
    value = json.loads(text.strip())
    return value, value


def summary_steps(messages: list[Message]) -> list[dict]:
    """The steps in the summary message: anchor id, relation and the (head, tail) of each triple."""
    steps: list[dict] = []
    for message in messages:
        if message.role != "user" or not message.content.startswith("Your reasoning steps so far"):
            continue
        for line in message.content.splitlines():
            if match := _STEP.match(line):
                steps.append({"anchor": match.group(2), "relation": match.group(3), "triples": []})
            elif line.startswith("  - "):
                head, _relation, tail = line[4:].split(" | ")
                steps[-1]["triples"].append((_entity(head), _entity(tail)))
    return steps


def latest(messages: list[Message], pattern: str) -> tuple[str, str]:
    """(the id `pattern` captures, the whole message) from the latest user message that matches it."""
    for m in reversed(messages):
        if m.role == "user" and (match := re.search(pattern, m.content, re.MULTILINE)):
            return match.group(1), m.content
    raise AssertionError(f"no prompt matches {pattern!r}")


def reply(**fields) -> str:
    return json.dumps(fields)


class Follower:
    """A model that walks a gold relation path (one or two relations) from the topic entity.

    Step 1 anchors the topic and takes path[0]; every later step anchors one entity reached in
    step 1 and takes path[1]; it stops when all of them are done. `overrides` {schema title:
    [reply, ...]} are sent first, whatever the prompt says.
    """

    def __init__(
        self,
        topic: str | None,
        path: list[str],
        *,
        overrides: dict[str, list[str]] | None = None,
        verdict=None,
    ):
        self.topic, self.path = topic, path  # topic None: read from the question message
        self.overrides = {k: list(v) for k, v in (overrides or {}).items()}
        self.verdict = verdict or (lambda steps: "True")
        self.model = ScriptedModel(self, name="follower")

    @property
    def requests(self) -> list[dict]:
        return self.model.seen

    def stages(self) -> list[str]:
        return [r["json_schema"]["title"] for r in self.model.seen]

    def __call__(self, messages: list[Message], tools) -> str:
        stage = self.model.seen[-1]["json_schema"]["title"]
        if self.topic is None:
            self.topic = re.search(r"^Topic entities: .*\[(\S+)\]$", messages[1].content, re.MULTILINE).group(
                1
            )
        if self.overrides.get(stage):
            return self.overrides[stage].pop(0)
        return getattr(self, stage)(messages)

    def frontier(self, steps: list[dict]) -> list[str]:
        if not steps:
            return []
        ends = [e for head, tail in steps[0]["triples"] for e in (head[0], tail[0])]
        return [e for e in dict.fromkeys(ends) if e != self.topic]

    def ark_anchor(self, messages):
        steps = summary_steps(messages)
        if not steps:
            return reply(reason="the topic", anchor=self.topic)
        done = {s["anchor"] for s in steps[1:]}
        return reply(reason="next one", anchor=next(e for e in self.frontier(steps) if e not in done))

    def ark_relation(self, messages):
        anchor, _ = latest(messages, r"^Relations around .*\[(\S+)\]")
        return reply(reason="the gold path", relation=self.path[0] if anchor == self.topic else self.path[1])

    def ark_step(self, messages):
        anchor, prompt = latest(messages, r"^Triples of \S+ around .*\[(\S+)\]")
        keys = re.findall(r"^(T\d+): ", prompt, re.MULTILINE)
        steps = summary_steps(messages)
        if anchor == self.topic:
            go_on = len(self.path) > 1
        else:
            go_on = bool(set(self.frontier(steps)) - {s["anchor"] for s in steps[1:]} - {anchor})
        return reply(
            triples=keys, implication=f"{anchor} leads on through {len(keys)} triples.", **{"continue": go_on}
        )

    def ark_answers(self, messages):
        answers = []
        for step in summary_steps(messages)[1:]:
            for head, tail in step["triples"]:
                for entity_id, label in (head, tail):
                    if entity_id not in (step["anchor"], self.topic):
                        answers.append(label)
        return reply(reason="the ends of the path", answers=list(dict.fromkeys(answers)))

    def ark_verdict(self, messages):
        return reply(reason="from the steps", answer=self.verdict(summary_steps(messages)))


def notes(trace: Trace, what: str | None = None) -> list[dict]:
    return [e for e in trace.events if e["type"] == "note" and (what is None or e["what"] == what)]


@pytest.fixture(scope="module")
def dev2(data_dir) -> dict[str, dict]:
    return {q["id"]: q for q in json.loads((data_dir / "metaqa" / "2hop_dev.json").read_text())}


# --- following the gold path ----------------------------------------------------------------------


@pytest.mark.parametrize("qid", GOLD_2HOP)
async def test_gold_path_follower_reaches_exactly_the_gold_answers(metaqa, dev2, qid):
    q = dev2[qid]
    follower = Follower(None, q["gold_relation_path"])
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_ark(
            q["question"], kg, follower.model, topics={q["topic_entity"]: None}, trace=trace
        )
    assert set(result.answers) == set(q["answers"]) and not result.abstained
    topic = result.extra["topics"][q["topic_entity"]]  # resolved by name with find_entities
    assert follower.topic == topic
    steps = result.extra["steps"]
    assert [s["relation"] for s in steps] == [q["gold_relation_path"][0]] + [q["gold_relation_path"][1]] * (
        len(steps) - 1
    )
    assert [h.relation for h in result.path] == [s["relation"] for s in steps]
    assert result.path[0].entity == topic and len(steps) >= 2
    assert result.extra["limit"] is None and "verdict" not in result.extra
    assert follower.stages() == ["ark_anchor", "ark_relation", "ark_step"] * len(steps) + ["ark_answers"]
    assert not notes(trace, "limit reached") and len(notes(trace, "context reset")) == len(steps)


# --- yes/no questions --------------------------------------------------------------------------------


def _directed_by(name: str):
    return lambda steps: (
        "True" if any(tail[1] == name for s in steps for _, tail in s["triples"]) else "False"
    )


@pytest.mark.parametrize(
    ("question", "verdict", "expected"),
    [
        ("Was Catch Me If You Can directed by Steven Spielberg?", _directed_by("Steven Spielberg"), "True"),
        ("Was Catch Me If You Can directed by Joel Zwick?", _directed_by("Joel Zwick"), "False"),
        ("Was Catch Me If You Can directed by Steven Spielberg?", lambda steps: "None", "None"),
    ],
)
async def test_yes_no_verdicts(metaqa, question, verdict, expected):
    follower = Follower(CATCH_ME, ["directed_by"], verdict=verdict)
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_ark(question, kg, follower.model, topics={"Catch Me If You Can": CATCH_ME})
    assert result.extra["yes_no"] is True  # guessed from the question's form
    assert result.extra["verdict"] == expected
    assert result.abstained == (expected == "None")
    assert result.answers == ([] if expected == "None" else [expected])
    assert follower.stages() == ["ark_anchor", "ark_relation", "ark_step", "ark_verdict"]
    step = result.extra["steps"][0]
    spielberg = (
        "Catch Me If You Can [kg:Catch_Me_If_You_Can] | directed_by | Steven Spielberg [kg:Steven_Spielberg]"
    )
    assert step["triples"][0]["text"] == spielberg
    assert "True, False, or None" in follower.requests[0]["messages"][0].content


async def test_yes_no_on_wikidata_uses_the_wikidata_exemplar(wikidata_local):
    follower = Follower("wd:Q42", ["wdt:P19"], verdict=_directed_by("Cambridge"))
    async with KGClient.connect(server=wikidata_local) as kg:
        result = await run_ark(
            "Was Douglas Adams born in Cambridge?", kg, follower.model, topics={"Douglas Adams": "wd:Q42"}
        )
    assert result.extra["verdict"] == "True"
    system = follower.requests[0]["messages"][0].content
    assert "wdt:P19" in system and "`wd:Q42`" in system and "kg:Peter_Benchley" not in system
    relations = follower.requests[1]["messages"][-1].content
    # Douglas Adams's relations take two pages of get_relations: wdt:P19 is on the second
    assert "- wdt:P19 (place of birth): 1 triple" in relations and "not shown" not in relations
    assert (
        "Douglas Adams [wd:Q42] | place of birth [wdt:P19] | Cambridge [wd:Q350]"
        in result.extra["steps"][0]["triples"][0]["text"]
    )


async def test_relations_past_the_pages_read_are_counted(wikidata_store_dir):
    """At 1,000 characters a page, the RELATION_PAGES pages read hold a few of Douglas Adams's 294
    relations: those are offered, and the prompt says how many more there are."""
    narrow = open_store(wikidata_store_dir, settings=Settings(max_output_chars=1_000))
    follower = Follower("wd:Q42", ["wdt:P106"])
    trace = Trace()
    async with KGClient.connect(server=narrow) as kg:
        await run_ark("What is Douglas Adams's occupation?", kg, follower.model, topics={"Douglas Adams": "wd:Q42"},
                      trace=trace)
    calls = [e for e in trace.events if e["type"] == "tool_call" and e["tool"] == "get_relations"]
    assert [bool(c["arguments"].get("cursor")) for c in calls] == [False] + [True] * (RELATION_PAGES - 1)
    relations = follower.requests[1]["messages"][-1].content
    listed = re.findall(r"^- (wdt:P\d+)", relations, re.MULTILINE)
    assert "wdt:P106" in listed and len(listed) == len(set(listed))
    assert relations.splitlines()[len(listed) + 1] == f"- ... and {294 - len(listed):,} more, not shown"
    assert follower.stages()[:3] == ["ark_anchor", "ark_relation", "ark_step"]  # the listed relation is taken


# --- misbehaving models ----------------------------------------------------------------------------


async def _zwick(metaqa, *, c_max: int = 5, k_max: int = 8, **overrides) -> tuple[Follower, Trace, object]:
    follower = Follower("kg:Joel_Zwick", ZWICK_PATH, overrides=overrides)
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_ark(
            ZWICK, kg, follower.model, topics=ZWICK_TOPIC, c_max=c_max, k_max=k_max, trace=trace
        )
    return follower, trace, result


async def test_anchor_not_in_the_kg_is_retried_with_feedback(metaqa):
    follower, trace, result = await _zwick(metaqa, ark_anchor=[reply(reason="?", anchor="kg:No_Such_Film")])
    assert result.answers == ["Greek"]
    [note] = notes(trace, "invalid anchor")
    assert note["stage"] == "anchor" and note["attempt"] == 1 and note["retry"] is True
    feedback = follower.requests[1]["messages"][-1]
    assert (
        feedback.role == "user"
        and "kg:No_Such_Film" in feedback.content
        and "not in the KG" in feedback.content
    )
    assert "find_entities" not in feedback.content  # the model cannot call tools here
    assert follower.stages()[:2] == ["ark_anchor", "ark_anchor"]


async def test_anchor_by_label_and_lenient_json(metaqa):
    chatty = 'I will start from the director.\n```json\n{"reason": "topic", "anchor": "Joel Zwick"}\n```'
    _, trace, result = await _zwick(metaqa, ark_anchor=[chatty])
    assert (
        result.answers == ["Greek"]
        and not notes(trace, "unparseable reply")
        and not notes(trace, "invalid anchor")
    )
    assert result.extra["steps"][0]["anchor"] == "kg:Joel_Zwick"


async def test_unknown_relation_is_retried_with_the_listed_ones(metaqa):
    follower, trace, result = await _zwick(metaqa, ark_relation=[reply(reason="?", relation="produced_by")])
    assert result.answers == ["Greek"]
    [note] = notes(trace, "relation not listed")
    assert note["attempt"] == 1
    feedback = follower.requests[2]["messages"][-1].content
    assert "'produced_by' is not among the relations" in feedback and "~directed_by" in feedback
    assert follower.stages()[:4] == ["ark_anchor", "ark_relation", "ark_relation", "ark_step"]


async def test_empty_relation_choice_goes_back_to_anchor_selection(metaqa):
    follower, trace, result = await _zwick(metaqa, ark_relation=[reply(reason="dead end", relation="")])
    assert result.answers == ["Greek"]
    assert len(notes(trace, "no relation chosen: back to anchor selection")) == 1
    assert follower.stages()[:5] == ["ark_anchor", "ark_relation", "ark_anchor", "ark_relation", "ark_step"]
    back = follower.requests[2]["messages"][-1].content
    assert "You chose no relation from Joel Zwick [kg:Joel_Zwick]" in back and "choose the anchor" in back


async def test_bad_triple_keys_are_retried(metaqa):
    bad = reply(triples=["T1", "T7"], implication="made up", **{"continue": True})
    follower, trace, result = await _zwick(metaqa, ark_step=[bad])
    assert result.answers == ["Greek"]
    [note] = notes(trace, "bad triple keys")
    assert "T7 is not among the keys shown (T1 to T1)" in note["reason"]
    assert follower.stages()[:4] == ["ark_anchor", "ark_relation", "ark_step", "ark_step"]


async def test_unparseable_reply_is_a_failed_attempt(metaqa):
    follower, trace, result = await _zwick(metaqa, ark_anchor=["Joel Zwick, I suppose."])
    assert result.answers == ["Greek"]
    [note] = notes(trace, "unparseable reply")
    assert note["stage"] == "anchor" and note["attempt"] == 1
    assert "no JSON object" in follower.requests[1]["messages"][-1].content


async def test_never_continuing_properly_hits_c_max_then_answers(metaqa):
    vague = reply(triples=["T1"], implication="hmm", **{"continue": "maybe"})
    follower, trace, result = await _zwick(metaqa, c_max=3, ark_step=[vague] * 10)
    assert follower.stages() == [
        "ark_anchor",
        "ark_relation",
        "ark_step",
        "ark_step",
        "ark_step",
        "ark_answers",
    ]
    failed = notes(trace, "invalid reply")
    assert [n["attempt"] for n in failed] == [1, 2, 3] and [n["retry"] for n in failed] == [True, True, False]
    [limit] = notes(trace, "limit reached")
    assert limit["limit"] == "c_max" and limit["stage"] == "triples" and limit["steps"] == 0
    final = follower.requests[-1]["messages"]
    assert [m.role for m in final] == ["system", "user", "user"]  # no step survived: no summary
    assert "3 attempts at the triples were used up" in final[-1].content
    assert result.abstained and result.extra["steps"] == [] and result.extra["limit"] == "c_max"


async def test_invalid_anchors_hit_c_max(metaqa):
    wrong = reply(reason="?", anchor="kg:Nobody_Here")
    follower, trace, _ = await _zwick(metaqa, c_max=2, ark_anchor=[wrong] * 5)
    assert follower.stages() == ["ark_anchor", "ark_anchor", "ark_answers"]
    assert [n["attempt"] for n in notes(trace, "invalid anchor")] == [1, 2]
    assert notes(trace, "limit reached")[0]["stage"] == "anchor"


async def test_going_back_to_anchor_costs_an_anchor_attempt(metaqa):
    empty = reply(reason="no", relation="")
    follower, trace, _ = await _zwick(metaqa, c_max=2, ark_relation=[empty] * 5)
    assert follower.stages() == ["ark_anchor", "ark_relation", "ark_anchor", "ark_relation", "ark_answers"]
    assert notes(trace, "limit reached")[0]["stage"] == "anchor"


async def test_k_max_goes_straight_to_the_final_answer(metaqa, dev2):
    q = dev2["2-hop-dev-1"]  # Sharon Tate: two films, so three steps would be needed
    follower = Follower("kg:Sharon_Tate", q["gold_relation_path"])
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_ark(
            q["question"], kg, follower.model, topics={"Sharon Tate": "kg:Sharon_Tate"}, k_max=2, trace=trace
        )
    assert follower.stages() == ["ark_anchor", "ark_relation", "ark_step"] * 2 + ["ark_answers"]
    assert result.extra["limit"] == "k_max" and len(result.extra["steps"]) == 2
    assert notes(trace, "limit reached")[0]["limit"] == "k_max"
    assert "used all 2 reasoning steps" in follower.requests[-1]["messages"][-1].content
    assert len(result.answers) == 1 and set(result.answers) < set(q["answers"])


async def test_context_is_reset_to_system_question_and_summary_after_each_step(metaqa):
    follower, trace, result = await _zwick(
        metaqa,
        ark_anchor=[reply(reason="?", anchor="kg:No_Such_Film")],
        ark_relation=[reply(reason="?", relation="produced_by")],
    )
    assert result.answers == ["Greek"]
    stages = follower.stages()
    assert stages == ["ark_anchor", "ark_anchor", "ark_relation", "ark_relation", "ark_step"] + [
        "ark_anchor",
        "ark_relation",
        "ark_step",
        "ark_answers",
    ]
    first = follower.requests[0]["messages"]
    assert [m.role for m in first] == ["system", "user", "user"]
    within = follower.requests[4]["messages"]  # the step-1 reasoning request carries the whole step
    assert [m.role for m in within] == ["system", "user", "user"] + ["assistant", "user"] * 4
    step2 = follower.requests[5]["messages"]  # first request after step 1
    assert [m.role for m in step2] == ["system", "user", "user", "user"]
    assert step2[0].content == first[0].content and step2[1].content == first[1].content
    assert step2[1].content == "Question: " + ZWICK + "\nTopic entities: Joel Zwick [kg:Joel_Zwick]"
    summary = step2[2].content
    wedding = "My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding]"
    assert summary.splitlines()[1:] == [
        "Step 1: anchor Joel Zwick [kg:Joel_Zwick], relation ~directed_by",
        "  Implication: kg:Joel_Zwick leads on through 1 triples.",
        f"  - {wedding} | directed_by | Joel Zwick [kg:Joel_Zwick]",
    ]
    assert "- My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding]" in step2[3].content  # a candidate now
    assert all("No_Such_Film" not in m.content and "produced_by" not in m.content for m in step2)
    final = follower.requests[-1]["messages"]
    assert [m.role for m in final] == ["system", "user", "user", "user"]
    assert (
        "Step 2: anchor My Big Fat Greek Wedding" in final[2].content
        and "Greek [kg:Greek]" in final[2].content
    )
    assert [n["after_step"] for n in notes(trace, "context reset")] == [1, 2]


async def test_final_answer_given_as_ids_becomes_labels(metaqa):
    *_, result = await _zwick(metaqa, ark_answers=[reply(reason="ids", answers=["kg:Greek"])])
    assert result.answers == ["Greek"]


async def test_limits_are_validated(metaqa):
    async with KGClient.connect(server=metaqa) as kg:
        with pytest.raises(ValueError):
            await run_ark("q?", kg, ScriptedModel([]), c_max=0)


def test_question_form_and_json_parsing():
    assert looks_yes_no("Does Ulm lie in Germany?") and looks_yes_no(
        "Could Maria de Ventadorn have spoken to him?"
    )
    assert not looks_yes_no("the films acted by [Sharon Tate] were released in which years")
    assert parse_json_object('prefix {"a": {"b": 1}} suffix {"c": 2}') == {"a": {"b": 1}}
    assert parse_json_object("{broken") is None
