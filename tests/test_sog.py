"""Search-on-Graph's control loop with scripted models over the real MetaQA and PathQuestion KBs."""

from __future__ import annotations

import ast
import json
import re

import pytest
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Reply
from kg_mcp.agents.models.scripted import ScriptedModel, call
from kg_mcp.agents.sog import run_sog
from kg_mcp.agents.trace import Trace, read_trace
from tables import table

ROW = re.compile(r"^\| ([^|]+) \| [^|]* \| ([^|]+) \| ([^|]*) \|$", re.MULTILINE)


def table_rows(text: str) -> list[tuple[str, str, str]]:
    """(property, value, valueLabel) rows of a search result's markdown table."""
    return [(p.strip(), v.strip(), l.strip()) for p, v, l in ROW.findall(text) if p.strip() not in ("property", "---")]


def gold_path_policy(path: list[str], revisit_topic: bool = False, batched: bool = False):
    """A model that walks `path` hop by hop, searching every frontier entity in one turn (in one
    batched call with `batched`), then answers."""

    def policy(messages, tools):
        assert [t.name for t in tools] == ["search"]
        assert ("entities" in tools[0].input_schema.get("properties", {})) is batched
        question = messages[1].content
        topics = ast.literal_eval(question[question.index("{") :])
        topic = next(iter(topics.values()))
        turns = [m for m in messages if m.role == "assistant"]
        hop = len(turns)
        if hop == 0:
            frontier = {topic}
        else:
            results = [m for m in messages if m.role == "tool" and m.tool_call_id in {c.id for c in turns[-1].tool_calls}]
            found = {v: label for r in results for _, v, label in table_rows(r.content)}
            if not revisit_topic:
                found.pop(topic, None)
            if hop == len(path):
                return Reply(text="Final answer: " + ", ".join("{" + label + "}" for label in sorted(set(found.values()))))
            frontier = set(found)
        relation = path[hop]
        direction = "incoming" if relation.startswith("~") else "outgoing"
        wanted = [relation.lstrip("~")]
        if batched:
            return Reply(text="", tool_calls=[call("search", entities=sorted(frontier), direction=direction, properties_to_filter_for=wanted)])
        return Reply(
            text="",
            tool_calls=[call("search", entity=e, direction=direction, properties_to_filter_for=wanted) for e in sorted(frontier)],
        )

    return policy


BATCH_ROW = re.compile(r"^\| ([^|]*) \| ([^|]+) \| ([^|]*) \|$", re.MULTILINE)


def follow_policy(path: list[str]):
    """A model that calls follow once along the gold path and answers with what it lists (topic left out)."""

    def policy(messages, tools):
        assert [t.name for t in tools] == ["search", "follow"]
        question = messages[1].content
        topic = next(iter(ast.literal_eval(question[question.index("{") :]).values()))
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Reply(text="", tool_calls=[call("follow", entity=topic, path=path)])
        found = {row["entity"]: row["label"] for row in table(results[-1].content)}
        found.pop(topic, None)
        return Reply(text="Final answer: " + ", ".join("{" + label + "}" for label in sorted(set(found.values()))))

    return policy


@pytest.mark.parametrize("mode", ["batched", "follow"])
async def test_tool_modes_answer_metaqa_3hop_in_fewer_turns(metaqa, data_dir, mode):
    questions = json.loads((data_dir / "metaqa" / "3hop_dev.json").read_text())[:: 1999][:4]
    async with KGClient.connect(server=metaqa) as kg:
        for q in questions:
            path = q["gold_relation_path"]
            model = ScriptedModel(follow_policy(path) if mode == "follow" else batched_policy(path))
            result = await run_sog(q["question"], kg, model, topics={q["topic_entity"]: None}, tools=mode)
            assert set(result.answers) == set(q["answers"]), q["id"]
            assert result.turns == (2 if mode == "follow" else 4)
            calls = [c for m in model.seen[-1]["messages"] if m.role == "assistant" for c in m.tool_calls]
            assert len(calls) == (1 if mode == "follow" else 3)
            assert result.path  # the hops are traced
    system = model.seen[0]["messages"][0].content
    assert "topic entity is not an answer" in system and (f"{mode}(" in system or "entities=" in system)


def batched_policy(path: list[str]):
    plain = gold_path_policy(path, batched=True)

    def policy(messages, tools):
        # batched results: (entity, value, valueLabel) rows; hand the policy SoG-shaped rows
        return plain([_as_sog_rows(m) for m in messages], tools)

    return policy


def _as_sog_rows(message):
    if message.role != "tool" or "| entity |" not in message.content:
        return message
    from dataclasses import replace

    labels: dict[str, str] = {}  # a value's label is given once per table
    for _, v, label in BATCH_ROW.findall(message.content):
        labels[v.strip()] = labels.get(v.strip()) or label.strip()
    rows = [f"| p | p | {v} | {label} |" for v, label in labels.items() if v not in ("value", "---")]
    return replace(message, content="\n".join(rows))


async def test_paper_mode_offers_search_as_published(metaqa):
    model = ScriptedModel(["Final answer: {}"])
    async with KGClient.connect(server=metaqa) as kg:
        await run_sog("who directed [Jaws]", kg, model, topics={"Jaws": "kg:Jaws"})
        with pytest.raises(ValueError, match="tools must be one of"):
            await run_sog("q", kg, model, topics={}, tools="everything")
    (spec,) = model.seen[0]["tools"]
    assert set(spec.input_schema["properties"]) == {"entity", "direction", "properties_to_filter_for"}
    assert "entities" not in spec.description and "follow" not in spec.description


@pytest.mark.parametrize("hops", [1, 2, 3])
async def test_gold_path_follower_answers_metaqa(metaqa, data_dir, tmp_path, hops):
    questions = json.loads((data_dir / "metaqa" / f"{hops}hop_dev.json").read_text())[:: 997][:4]
    async with KGClient.connect(server=metaqa) as kg:
        for q in questions:
            model = ScriptedModel(gold_path_policy(q["gold_relation_path"]))
            result = await run_sog(q["question"], kg, model, topics={q["topic_entity"]: None}, trace=Trace(tmp_path / f"{q['id']}.jsonl"))
            assert not result.abstained
            assert set(result.answers) == set(q["answers"]), q["id"]
            assert len(result.path) >= hops and result.turns == hops + 1
    events = read_trace(tmp_path / f"{questions[-1]['id']}.jsonl")
    types = [e["type"] for e in events]
    assert types[0] == "start" and types[-1] == "final"
    assert {"model_request", "model_reply", "tool_call", "tool_result"} <= set(types)
    first_request = next(e for e in events if e["type"] == "model_request")
    content = first_request["messages"][1]["content"]
    assert content.startswith("Question: ")
    topics = ast.literal_eval(content[content.index(" {") + 1 :])  # topic entities with their ids
    assert list(topics) == [questions[-1]["topic_entity"]] and list(topics.values())[0].startswith("kg:")
    assert events[-1]["answers"] == result.answers


async def test_gold_path_on_pathquestion(pathquestion, data_dir):
    line = (data_dir / "pathquestion" / "PQ-3H.txt").read_text().splitlines()[5]
    question, _, path = line.split("\t")
    parts = path.split("#<end>#")[0].split("#")
    async with KGClient.connect(server=pathquestion) as kg:
        model = ScriptedModel(gold_path_policy(parts[1:-1:2], revisit_topic=True))
        result = await run_sog(question, kg, model, topics={parts[0]: None})
    assert parts[-1] in result.answers


async def test_topic_ids_are_passed_through_without_lookup(metaqa):
    model = ScriptedModel(["Final answer: {Steven Spielberg}"])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_sog("who directed [Jaws]", kg, model, topics={"Jaws": "kg:Jaws"})
    assert model.seen[0]["messages"][1].content == "Question: who directed [Jaws] {'Jaws': 'kg:Jaws'}"
    assert result.answers == ["Steven Spielberg"] and result.extra["topics"] == {"Jaws": "kg:Jaws"}


async def test_never_answering_abstains_at_the_turn_cap(metaqa):
    model = ScriptedModel(lambda messages, tools: Reply(text="Let me think about it some more."))
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_sog("who directed [Jaws]", kg, model, topics={"Jaws": "kg:Jaws"}, max_turns=4)
    assert result.abstained and result.answers == [] and result.turns == 4
    # after each reply without a tool call or answer, the model is asked to continue
    assert model.seen[-1]["messages"][-1].content.startswith("You have not given a final answer")


async def test_misbehaving_calls_get_errors_and_the_run_goes_on(metaqa):
    bad = Reply(text="", tool_calls=[call("get_relations", entity="kg:Jaws"), call("search", entity="kg:Nope_Nope")])
    malformed = Reply(text="", tool_calls=[call("search")])
    malformed.tool_calls[0].malformed = '{"entity": "kg:Jaws"'
    model = ScriptedModel([bad, malformed, "Final answer: {}"])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_sog("who directed [Jaws]", kg, model, topics={"Jaws": "kg:Jaws"})
    tool_messages = [m for m in model.seen[1]["messages"] if m.role == "tool"]
    assert [m.is_error for m in tool_messages] == [True, True]
    assert "only `search` can be called" in tool_messages[0].content
    assert "find_entities" in tool_messages[1].content  # the server's hint for an unknown id
    last_tool = [m for m in model.seen[2]["messages"] if m.role == "tool"][-1]
    assert last_tool.is_error and "not a JSON object" in last_tool.content
    assert result.abstained  # "Final answer: {}" means the KG does not have it


async def test_unknown_topic_name_is_noted_not_fatal(metaqa, tmp_path):
    model = ScriptedModel(["Final answer: {}"])
    async with KGClient.connect(server=metaqa) as kg:
        await run_sog("q", kg, model, topics={"Zzqx Nonexistent": None}, trace=Trace(tmp_path / "t.jsonl"))
    notes = [e for e in read_trace(tmp_path / "t.jsonl") if e["type"] == "note"]
    assert notes and notes[0]["what"] == "topic not found"
