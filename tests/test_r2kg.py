"""R2-KG driver: scripted Operator and Supervisor over the real MetaQA and PathQuestion KGs via KGClient."""

from __future__ import annotations

import json
import re

import pytest
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Message, Reply, Sampling, ToolCall
from kg_mcp.agents.models.scripted import ScriptedModel, call
from kg_mcp.agents.r2kg import run_r2kg
from kg_mcp.agents.r2kg_consistency import answer_set, normalise, run_r2kg_consistent, temperatures
from kg_mcp.agents.r2kg_evidence import Evidence, parse_verdict
from kg_mcp.agents.trace import Trace, read_trace

from kg_mcp.prompt_files import read_prompt
from tables import table

_ROW = re.compile(r"^\| (\S+) \| (\S+) \| (.*) \|$")


# --- scripted models that walk a gold path and answer from what they were shown ---


def topic_id(messages: list[Message]) -> str:
    """The first topic entity's id, from the Operator's question message (`- name: id`)."""
    match = re.search(r"^- .*: (\S+)$", messages[1].content, re.MULTILINE)
    assert match, messages[1].content
    return match.group(1)


def reached(messages: list[Message], relation: str) -> list[tuple[str, str]]:
    """(id, label) rows for `relation` in the explore_kg results of the last turn."""
    last = max(i for i, m in enumerate(messages) if m.role == "assistant")
    rows = []
    for m in messages[last + 1 :]:
        if m.role == "tool" and m.name == "explore_kg":
            for line in m.content.splitlines():
                match = _ROW.match(line)
                if match and match.group(1) == relation:
                    rows.append((match.group(2), match.group(3)))
    return list(dict.fromkeys(rows))


def gold_walker(path: list[str], *, single: bool = False, exclude: str | None = None):
    """An Operator that lists the topic's relations, walks `path` (hop 2 on: several calls in one
    turn), then calls verification (single-agent: with the labels the last hop reached)."""

    def policy(messages: list[Message], tools) -> Reply:
        assert {t.name for t in tools} == {"get_relations", "explore_kg", "verification"}
        step = sum(m.role == "assistant" for m in messages)
        topic = topic_id(messages)
        if step == 0:
            return Reply("", [call("get_relations", entity=topic)])
        if step == 1:
            return Reply("", [call("explore_kg", entity=topic, relations=[path[0]])])
        if step <= len(path):
            frontier = [i for i, _ in reached(messages, path[step - 2]) if i != topic]
            calls = [call("get_relations", entity=frontier[0])]
            calls += [call("explore_kg", entity=e, relations=[path[step - 1]]) for e in frontier]
            return Reply("", calls)
        if single:
            labels = sorted({label for i, label in reached(messages, path[-1]) if label != exclude})
            return Reply("", [call("verification", answers=labels, reasoning=" -> ".join(path))])
        return Reply("I have walked the path.", [call("verification")])

    return policy


def triples_of(request: str, relation: str) -> list[tuple[str, str]]:
    """(subject, object) of every triple the Supervisor was shown under steps via `relation`."""
    found = []
    for block in request.split("\nStep ")[1:]:
        head, *lines = block.splitlines()
        if f" via {relation}:" not in head:
            continue
        for line in lines:
            line = line.strip()
            if not line.startswith("("):
                break
            s, o = line[1:-1].split(f", {relation.removeprefix('~')}, ")
            found.append((s, o))
    return found


def label_of(node: str) -> str:
    return re.sub(r" \[[^\]]+\]$", "", node)


def gold_supervisor(path: list[str], exclude: str | None = None):
    """A Supervisor that answers with the far ends of the last hop's triples."""

    def policy(messages: list[Message], tools) -> str:
        assert not tools
        last = path[-1]
        ends = [s if last.startswith("~") else o for s, o in triples_of(messages[-1].content, last)]
        answers = sorted({label_of(n) for n in ends} - {exclude})
        return json.dumps(
            {
                "decision": "answer",
                "answers": answers,
                "reasoning_path": f"topic -{' -'.join(path)}-> answers",
                "feedback": {"entity": None, "relations": [], "rollback_to_hop": None, "message": ""},
            }
        )

    return policy


def verify_with(*answers: str) -> Reply:
    return Reply("", [call("verification", answers=list(answers), reasoning="scripted")])


def feedback(entity=None, relations=(), rollback=None, message="") -> str:
    return json.dumps(
        {
            "decision": "feedback",
            "answers": [],
            "reasoning_path": "",
            "feedback": {
                "entity": entity,
                "relations": list(relations),
                "rollback_to_hop": rollback,
                "message": message,
            },
        }
    )


@pytest.fixture(scope="module")
def metaqa_2hop(data_dir) -> list[dict]:
    return json.loads((data_dir / "metaqa" / "2hop_dev.json").read_text())


def notes(trace: Trace, what: str) -> list[dict]:
    return [e for e in trace.events if e["type"] == "note" and e["what"] == what]


# --- two agents ---


@pytest.mark.parametrize("index", [0, 1, 2, 7])
async def test_gold_path_operator_and_answering_supervisor_reach_the_gold_answers(metaqa, metaqa_2hop, index):
    q = metaqa_2hop[index]
    path = q["gold_relation_path"]
    operator = ScriptedModel(gold_walker(path), name="operator")
    supervisor = ScriptedModel(gold_supervisor(path, exclude=q["topic_entity"]), name="supervisor")
    async with KGClient.connect(server=metaqa) as kg:
        topic = (await kg.call_tool("find_entities", {"name": q["topic_entity"], "limit": 1})).data[
            "entities"
        ][0]["id"]
        result = await run_r2kg(q["question"], kg, operator, supervisor, topics={q["topic_entity"]: topic})

    assert not result.abstained
    assert set(result.answers) == set(q["answers"])
    assert result.reasoning.startswith("topic -")
    assert set(result.usage) == {"operator", "supervisor"}
    assert result.usage["supervisor"].requests == 1 and result.usage["operator"].requests == len(path) + 2
    assert result.extra["stop"] == "answered" and result.extra["operator_turns"] == len(path) + 2
    # Hops: one per explored relation, from the topic first.
    assert result.path[0].entity == topic and result.path[0].relation == path[0]
    assert {h.relation for h in result.path} == set(path)

    # The Supervisor saw the question, the collected triples and the relation lists, and was asked for JSON.
    request = supervisor.seen[0]
    assert request["json_schema"] and request["json_schema"]["required"]
    text = request["messages"][-1].content
    assert q["question"] in text
    first_hop = triples_of(text, path[0])
    assert first_hop and all(topic in (s + o) for s, o in first_hop)
    assert {label_of(n) for pair in triples_of(text, path[1]) for n in pair} >= set(q["answers"])
    listed = [line for line in text.splitlines() if line.startswith(f"- {q['topic_entity']} [{topic}]: ")]
    assert len(listed) == 1 and f" {path[0]} (" in listed[0]  # the topic's relation list
    assert text.count("\n- ") >= 2  # and the relation list of a hop-1 entity


async def test_pathquestion_topic_by_name_is_resolved_and_answered(pathquestion, data_dir):
    line = (data_dir / "pathquestion" / "PQ-2H.txt").read_text().splitlines()[0]
    question, answer, gold = line.split("\t")
    parts = gold.split("#")
    topic, path = parts[0], parts[1:-3:2]
    assert path == ["spouse", "nationality"]
    operator = ScriptedModel(gold_walker(path), name="operator")
    supervisor = ScriptedModel(gold_supervisor(path), name="supervisor")
    async with KGClient.connect(server=pathquestion) as kg:
        result = await run_r2kg(question, kg, operator, supervisor, topics={topic: None})
    assert result.answers == [answer.split("(")[0]]
    assert result.path[0].entity == f"kg:{topic}"
    assert operator.seen[0]["messages"][1].content.endswith(f"- {topic}: kg:{topic}\n")


async def test_supervisor_feedback_twice_then_answer(metaqa, metaqa_2hop):
    """Wrong first hop; the Supervisor rolls back to hop 1, then asks for one more relation, then answers."""
    q = metaqa_2hop[2]
    assert q["topic_entity"] == "Anthony Mann" and q["gold_relation_path"] == ["~written_by", "release_year"]
    operator = ScriptedModel(
        [
            Reply("", [call("get_relations", entity="kg:Anthony_Mann")]),
            Reply("", [call("explore_kg", entity="kg:Anthony_Mann", relations=["~directed_by"])]),
            Reply(
                "",
                [
                    call("explore_kg", entity="kg:Desperate", relations=["release_year"]),
                    call("verification"),
                ],
            ),
            Reply(
                "",
                [
                    call("explore_kg", entity="kg:Anthony_Mann", relations=["~written_by"]),
                    call("verification"),
                ],
            ),
            Reply("", [call("explore_kg", entity="kg:Follow_Me_Quietly", relations=["release_year"])]),
            Reply("", [call("verification")]),
        ],
        name="operator",
    )
    supervisor = ScriptedModel(
        [
            "```json\n"
            + feedback(
                "Anthony Mann",
                ["~written_by"],
                1,
                "Those are films he directed; the question is about films he wrote.",
            )
            + "\n```",
            feedback("Follow Me Quietly", ["release_year"], None, "One film he wrote has no year yet."),
            json.dumps(
                {
                    "decision": "answer",
                    "answers": ["1947", "1949"],
                    "reasoning_path": "Anthony Mann <-written_by- films -release_year-> years",
                }
            ),
        ],
        name="supervisor",
    )
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(
            q["question"], kg, operator, supervisor, topics={"Anthony Mann": "kg:Anthony_Mann"}, trace=trace
        )

    assert not result.abstained and set(result.answers) == set(q["answers"])
    assert result.reasoning == "Anthony Mann <-written_by- films -release_year-> years"
    assert result.extra["operator_turns"] == 6 and result.extra["verifications"] == 3
    assert len(supervisor.seen) == 3

    # Feedback 1 is the result of the turn-3 verification, after that turn's explore_kg result.
    turn4 = operator.seen[3]["messages"]
    assert [m.name for m in turn4[-2:]] == ["explore_kg", "verification"]
    first = turn4[-1].content
    assert turn4[-1].role == "tool" and not turn4[-1].is_error
    assert "Roll back to hop 1" in first and "Anthony Mann [kg:Anthony_Mann]" in first
    assert "Explore Anthony Mann (id kg:Anthony_Mann) with: ~written_by." in first
    assert "films he directed" in first
    # Feedback 2 comes right after it, in the next turn, and both stay in the Operator's chat.
    turn5 = operator.seen[4]["messages"]
    second = turn5[-1].content
    assert "Explore Follow Me Quietly (id kg:Follow_Me_Quietly) with: release_year." in second
    assert "Roll back" not in second
    contents = [m.content for m in operator.seen[-1]["messages"]]
    assert contents.index(first) < contents.index(second)

    # The Supervisor was reminded of its earlier feedback; it saw the hop numbers it rolls back to.
    assert "films he directed" in supervisor.seen[1]["messages"][-1].content
    last_request = supervisor.seen[2]["messages"][-1].content
    assert "Step 1 (hop 1): Anthony Mann [kg:Anthony_Mann] via ~directed_by: 27 triples" in last_request
    assert "(Desperate [kg:Desperate], release_year, 1947 [kg:1947])" in last_request
    assert "(Follow Me Quietly [kg:Follow_Me_Quietly], release_year, 1949 [kg:1949])" in last_request

    assert [n["hop"] for n in notes(trace, "rollback")] == [1]
    assert len(notes(trace, "supervisor feedback")) == 2
    assert [(h.entity, h.relation) for h in result.path] == [
        ("kg:Anthony_Mann", "~directed_by"),
        ("kg:Desperate", "release_year"),
        ("kg:Anthony_Mann", "~written_by"),
        ("kg:Follow_Me_Quietly", "release_year"),
    ]
    assert result.path[1].reached == ["kg:1947"]


async def test_never_verifying_reaches_the_limit_and_abstains(metaqa):
    operator = ScriptedModel(
        lambda messages, tools: Reply("", [call("get_relations", entity="kg:Joel_Zwick")]), name="operator"
    )
    supervisor = ScriptedModel([], name="supervisor")
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(
            "what did [Joel Zwick] direct", kg, operator, supervisor, max_iterations=4, trace=trace
        )
    assert result.abstained and result.answers == []
    assert len(operator.seen) == 4 and supervisor.seen == []
    assert result.extra["stop"] == "iteration limit"
    assert notes(trace, "iteration limit") == [{**notes(trace, "iteration limit")[0], "max_iterations": 4}]
    assert trace.events[-1]["type"] == "final" and trace.events[-1]["abstained"] is True


async def test_feedback_on_the_last_turn_abstains(metaqa):
    operator = ScriptedModel(
        [Reply("", [call("get_relations", entity="kg:Joel_Zwick")]), Reply("", [call("verification")])],
        name="operator",
    )
    supervisor = ScriptedModel([feedback("kg:Joel_Zwick", ["~directed_by"])], name="supervisor")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg("what did [Joel Zwick] direct", kg, operator, supervisor, max_iterations=2)
    assert result.abstained and result.extra["stop"] == "iteration limit"
    assert len(supervisor.seen) == 1 and result.extra["feedback"]


async def test_malformed_arguments_and_unknown_tools_get_error_results_and_the_run_goes_on(metaqa):
    bad = [
        ToolCall(
            "bad_json", "explore_kg", {}, malformed='{"entity": "kg:Joel_Zwick", relations: [~directed_by'
        ),
        call("explore_kg", entity="kg:Joel_Zwick", relations="~directed_by"),
        call("get_relations"),
        call("sparql", query="SELECT * WHERE { ?s ?p ?o }"),
        call("get_relations", entity="kg:No_Such_Entity_xyz"),
    ]
    operator = ScriptedModel(
        [
            Reply("", bad),
            Reply("", [call("explore_kg", entity="kg:Joel_Zwick", relations=["~directed_by"])]),
            Reply("Let me look further.", []),  # no tool call: a reminder, and the turn counts
            Reply(
                "",
                [
                    call("explore_kg", entity="kg:My_Big_Fat_Greek_Wedding", relations=["in_language"]),
                    call("verification"),
                ],
            ),
        ],
        name="operator",
    )
    supervisor = ScriptedModel(gold_supervisor(["~directed_by", "in_language"]), name="supervisor")
    trace = Trace()
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(
            "what are the languages spoken in the films directed by [Joel Zwick]",
            kg,
            operator,
            supervisor,
            trace=trace,
        )
    assert result.answers == ["Greek"] and result.extra["operator_turns"] == 4

    errors = operator.seen[1]["messages"][-len(bad) :]
    assert [m.tool_call_id for m in errors] == [c.id for c in bad]
    assert all(m.role == "tool" and m.is_error for m in errors)
    assert "not a JSON object" in errors[0].content and '"relations": [' in errors[0].content
    assert "`relations` must be array" in errors[1].content and "Call it again" in errors[1].content
    assert "`entity` is missing" in errors[2].content
    assert (
        "no tool 'sparql'" in errors[3].content
        and "get_relations, explore_kg, verification" in errors[3].content
    )
    assert "not in the KG" in errors[4].content  # the server's own error, passed on
    reminder = operator.seen[3]["messages"][-1]
    assert reminder.role == "user" and "tool calls" in reminder.content
    assert len(notes(trace, "bad tool call")) == 3 and len(notes(trace, "unknown tool")) == 1
    assert len(notes(trace, "no tool call")) == 1


async def test_text_final_answer_counts_as_verification(metaqa):
    operator = ScriptedModel(
        [
            Reply("", [call("explore_kg", entity="kg:Joel_Zwick", relations=["~directed_by"])]),
            Reply("The film is known. Final answer: {My Big Fat Greek Wedding}"),
        ],
        name="operator",
    )
    supervisor = ScriptedModel(["Final answer: {kg:My_Big_Fat_Greek_Wedding}"], name="supervisor")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(
            "what did [Joel Zwick] direct", kg, operator, supervisor, topics={"Joel Zwick": "kg:Joel_Zwick"}
        )
    # A non-JSON Supervisor reply is read leniently, and an id is given back as its label.
    assert result.answers == ["My Big Fat Greek Wedding"] and result.extra["verifications"] == 1


# --- one agent, strict self-consistency ---

JOEL = "what are the languages spoken in the films directed by [Joel Zwick]"
JOEL_TOPIC = {"Joel Zwick": "kg:Joel_Zwick"}


async def test_single_agent_answers_itself_and_must_give_its_answer(metaqa):
    operator = ScriptedModel(
        [
            Reply("", [call("verification", reasoning="no answer given")]),
            verify_with("kg:Greek"),
        ],
        name="operator",
    )
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(JOEL, kg, operator, topics=JOEL_TOPIC)
    error = operator.seen[1]["messages"][-1]
    assert error.is_error and "`answers` is missing" in error.content
    assert set(result.usage) == {"operator"}
    # The Operator saw no kg:Greek, so the answer stays as written.
    assert result.answers == ["kg:Greek"] and result.method == "r2kg-single"


async def test_three_unanimous_runs_give_the_answer(metaqa, tmp_path):
    path = ["~directed_by", "in_language"]
    operator = ScriptedModel(gold_walker(path, single=True, exclude="Joel Zwick"), name="operator")
    trace = Trace(tmp_path / "r2kg.jsonl")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg_consistent(JOEL, kg, operator, topics=JOEL_TOPIC, trace=trace)
    assert result.answers == ["Greek"] and not result.abstained
    assert result.extra["verdict"] == "unanimous" and len(result.extra["runs"]) == 3
    assert result.usage["operator"].requests == 12 and set(result.usage) == {"operator"}
    # Three prompt variants: the system prompts differ, and each names its own approach.
    systems = [s["messages"][0].content for s in operator.seen if len(s["messages"]) == 2]
    assert len(systems) == 3 and len(set(systems)) == 3
    for i, system in enumerate(systems, 1):
        assert read_prompt(f"r2kg/single_variant_{i}.md").template.strip() in system
    assert all(s["sampling"] is None for s in operator.seen)
    # One trace holding each run's events, tagged with its index.
    events = read_trace(tmp_path / "r2kg.jsonl")
    starts = [e for e in events if e["type"] == "start"]
    assert [e.get("run") for e in starts] == [None, 0, 1, 2]
    assert {e.get("run") for e in events if e["type"] == "tool_call"} == {0, 1, 2}
    assert events[-1]["type"] == "final" and "run" not in events[-1] and events[-1]["answers"] == ["Greek"]


async def test_unanimity_is_up_to_case_whitespace_and_punctuation(metaqa):
    operator = ScriptedModel(
        [
            verify_with("The Wrecking Crew", "1968"),
            verify_with("the wrecking  crew!", "1968"),
            verify_with("1968", "THE WRECKING CREW"),
        ],
        name="operator",
    )
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg_consistent("which film", kg, operator, topics=JOEL_TOPIC)
    assert result.answers == ["The Wrecking Crew", "1968"]


async def test_one_disagreement_abstains(metaqa):
    replies = [verify_with("Greek"), verify_with("English"), verify_with("Greek")]
    async with KGClient.connect(server=metaqa) as kg:
        operator = ScriptedModel(list(replies), name="operator")
        result = await run_r2kg_consistent(JOEL, kg, operator, topics=JOEL_TOPIC, stop_early=False)
        assert result.abstained and result.answers == [] and result.extra["verdict"] == "runs disagreed"
        assert [r["answers"] for r in result.extra["runs"]] == [["Greek"], ["English"], ["Greek"]]

        early = ScriptedModel(list(replies), name="operator")
        result = await run_r2kg_consistent(JOEL, kg, early, topics=JOEL_TOPIC)
        assert result.abstained and len(result.extra["runs"]) == 2 and len(early.seen) == 2


async def test_one_abstention_abstains(metaqa):
    async with KGClient.connect(server=metaqa) as kg:
        # An explicit abstention (an empty answer list) in the last run.
        operator = ScriptedModel([verify_with("Greek"), verify_with("Greek"), verify_with()], name="operator")
        result = await run_r2kg_consistent(JOEL, kg, operator, topics=JOEL_TOPIC)
        assert result.abstained and result.extra["verdict"] == "a run abstained"
        assert [r["stop"] for r in result.extra["runs"]] == ["answered", "answered", "operator abstained"]

        # The second prompt variant never verifies: the iteration limit makes that run abstain.
        variant_2 = read_prompt("r2kg/single_variant_2.md").template.strip()

        def policy(messages, tools):
            if variant_2 in messages[0].content:
                return Reply("", [call("get_relations", entity="kg:Joel_Zwick")])
            return verify_with("Greek")

        operator = ScriptedModel(policy, name="operator")
        result = await run_r2kg_consistent(
            JOEL, kg, operator, topics=JOEL_TOPIC, max_iterations=3, stop_early=False
        )
        assert result.abstained
        assert [r["stop"] for r in result.extra["runs"]] == ["answered", "iteration limit", "answered"]
        assert len(operator.seen) == 1 + 3 + 1


async def test_temperature_variation_passes_different_temperatures(metaqa):
    operator = ScriptedModel([verify_with("Greek")] * 3, name="operator")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg_consistent(
            JOEL, kg, operator, topics=JOEL_TOPIC, vary="temperature", sampling=Sampling(top_p=0.9)
        )
    assert result.answers == ["Greek"] and result.extra["vary"] == "temperature"
    seen = [s["sampling"] for s in operator.seen]
    assert [s.temperature for s in seen] == temperatures(3) == [0.2, 0.6, 1.0]
    assert all(s.top_p == 0.9 for s in seen)
    assert len({s["messages"][0].content for s in operator.seen}) == 1  # one prompt for all runs


# --- the pieces ---


def test_supervisor_replies_are_read_leniently():
    v = parse_verdict(
        'Sure! ```json\n{"decision": "answer", "answer": "Greek", "reasoning": ["a", "b"]}\n```'
    )
    assert v.answers == ["Greek"] and v.reasoning == "a -> b"
    v = parse_verdict('{"decision": "answer", "answers": [], "feedback": {"message": "nothing yet"}}')
    assert v.answers is None and v.feedback.message == "nothing yet"
    v = parse_verdict('{"feedback": {"entity": "kg:X", "relation": "has_genre", "rollback_to_hop": "hop 2"}}')
    assert v.answers is None and (v.feedback.entity, v.feedback.relations, v.feedback.rollback_to_hop) == (
        "kg:X",
        ["has_genre"],
        2,
    )
    v = parse_verdict("Explore the release years first.")
    assert v.answers is None and v.feedback.message == "Explore the release years first."
    v = parse_verdict("The answer. Final answer: {1967}, {1968}")
    assert v.answers == ["1967", "1968"]


def test_normalised_answer_sets():
    assert normalise("  The Wrecking-Crew! ") == "the wreckingcrew"
    assert answer_set(["Greek", "greek.", " "]) == frozenset({"greek"})
    assert temperatures(1) == [0.2] and temperatures(5) == [0.2, 0.4, 0.6, 0.8, 1.0]


def test_evidence_hops_count_from_the_topics():
    evidence = Evidence(topics={"A": "kg:A"})

    def term(ident: str) -> dict:
        return {"id": ident, "label": ident.removeprefix("kg:"), "kind": "iri"}

    evidence.add_explored(
        {"entity": term("kg:A"), "relations": [{"relation": "r", "total": 1, "neighbours": [term("kg:B")]}]}
    )
    evidence.add_explored(
        {"entity": term("kg:B"), "relations": [{"relation": "~s", "total": 3, "neighbours": [term("kg:C")]}]}
    )
    text = evidence.triples_text()
    assert "Step 1 (hop 1): A [kg:A] via r: 1 triple\n  (A [kg:A], r, B [kg:B])" in text
    assert "Step 2 (hop 2): B [kg:B] via ~s: 1 of 3 triples shown\n  (C [kg:C], s, B [kg:B])" in text
    assert evidence.explored_at_hop(2) == ["B [kg:B]"]
    assert (
        evidence.as_label("kg:C") == "C"
        and evidence.as_label("C [kg:C]") == "C"
        and evidence.as_label("other") == "other"
    )


@pytest.mark.parametrize("kind", ["generic", "freebase", "wikidata"])
def test_prompt_files_fill_every_field(kind):
    for name in ("operator", "single", "supervisor"):
        example = read_prompt(f"r2kg/examples_{kind}_{name}.md")
        assert example.description and example.arguments == []
    for name in ("operator", "single", "supervisor", "supervisor_request", "feedback", "question"):
        prompt = read_prompt(f"r2kg/{name}.md")
        assert prompt.description
        filled = prompt.render(**{a: "x" for a in prompt.arguments})
        assert not re.search(r"\{[a-z_]+\}", filled)


# --- tool modes: batched explore_kg and follow ---

_BATCH = re.compile(r"^\| (\S+) \| (\S+) \| (\S+) \| (.*) \|$")


def mode_walker(path: list[str], mode: str, exclude: str):
    """A single-agent Operator that lists the topic's relations, then walks `path` with one
    follow call (follow mode) or one explore_kg call a hop (batched), then answers."""

    def policy(messages: list[Message], tools) -> Reply:
        names = {t.name for t in tools}
        assert names == ({"get_relations", "explore_kg", "verification"} | ({"follow"} if mode == "follow" else set()))
        assert "entities" in next(t for t in tools if t.name == "explore_kg").input_schema["properties"]
        step = sum(m.role == "assistant" for m in messages)
        topic = topic_id(messages)
        last = [m for m in messages if m.role == "tool"][-1:]
        if step == 0:
            return Reply("", [call("get_relations", entity=topic)])
        if mode == "follow":
            if step == 1:
                return Reply("", [call("follow", entity=topic, path=path)])
            labels = sorted({row["label"] for row in table(last[0].content) if row["label"]} - {exclude})
            return Reply("", [call("verification", answers=labels, reasoning="follow")])
        if step == 1:
            return Reply("", [call("explore_kg", entity=topic, relations=[path[0]])])
        if step == 2:
            frontier = [i for i, _ in reached(messages, path[0]) if i != topic]
            return Reply("", [call("explore_kg", entities=frontier, relations=[path[1]])])
        rows = [_BATCH.match(line) for line in last[0].content.splitlines()]
        found = {m.group(4) for m in rows if m and m.group(2) == path[1]}
        found |= {label for _, label in reached(messages, path[1])}  # a frontier of one: the single-entity table
        labels = sorted(found - {exclude})
        return Reply("", [call("verification", answers=labels, reasoning="batched")])

    return policy


@pytest.mark.parametrize("mode", ["batched", "follow"])
@pytest.mark.parametrize("index", [0, 7])
async def test_tool_modes_walk_the_gold_path_in_fewer_calls(metaqa, metaqa_2hop, mode, index):
    q = metaqa_2hop[index]
    path = q["gold_relation_path"]
    operator = ScriptedModel(mode_walker(path, mode, q["topic_entity"]), name="operator")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(q["question"], kg, operator, None, topics={q["topic_entity"]: None}, tools=mode)
    assert set(result.answers) == set(q["answers"]), q["id"]
    kg_calls = [c for m in operator.seen[-1]["messages"] if m.role == "assistant" for c in m.tool_calls if c.name != "get_relations"]
    assert len(kg_calls) == (1 if mode == "follow" else 2)
    # the evidence keeps what was walked: one hop per relation (follow: the whole path as one)
    relations = {h.relation for h in result.path}
    assert relations == ({"/".join(path)} if mode == "follow" else set(path))
    system = operator.seen[0]["messages"][0].content
    assert "entities=" in system and ("follow(" in system) is (mode == "follow")


async def test_paper_mode_offers_the_published_tools(metaqa):
    operator = ScriptedModel([verify_with()], name="operator")
    async with KGClient.connect(server=metaqa) as kg:
        await run_r2kg("who directed [Jaws]", kg, operator, None, topics={"Jaws": "kg:Jaws"})
        with pytest.raises(ValueError, match="tools must be one of"):
            await run_r2kg("q", kg, operator, None, topics={}, tools="all")
    tools = {t.name: t for t in operator.seen[0]["tools"]}
    assert set(tools) == {"get_relations", "explore_kg", "verification"}
    assert set(tools["explore_kg"].input_schema["properties"]) == {"entity", "relations"}
    assert "entities=" not in operator.seen[0]["messages"][0].content
