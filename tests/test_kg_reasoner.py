"""KG-Reasoner's driver: scripted text-continuing models over the real MetaQA and PathQuestion KBs,
models that break the protocol, the OpenAI-compatible completion adapters over the wire, and
`kg-mcp ask --agent kgr` end to end. Scripted models check the loop, not any model's accuracy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kg_reasoner import run_kgr
from kg_mcp.agents.models import get_model
from kg_mcp.agents.models.base import Reply
from kg_mcp.agents.models.completion import ChatAsText, TextPrompt
from kg_mcp.agents.models.openai_completions import OpenAITextModel, text_model_for
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.trace import Trace, read_trace
from kgr_scripts import as_chat_policy, backtracker, blocks, gold_walker, over_the_wire
from providers import FakeProvider, error

JOEL = "what are the languages spoken in the films directed by [Joel Zwick]"  # 2-hop-dev-0, gold: Greek


def events_of(trace: Trace, kind: str, what: str | None = None) -> list[dict]:
    return [e for e in trace.events if e["type"] == kind and (what is None or e.get("what") == what)]


# --- gold paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize("hops", [1, 2, 3])
async def test_gold_path_walker_answers_metaqa(metaqa, data_dir, hops):
    questions = json.loads((data_dir / "metaqa" / f"{hops}hop_dev.json").read_text())[::997][:3]
    async with KGClient.connect(server=metaqa) as kg:
        for q in questions:
            trace = Trace()
            model = ScriptedModel(as_chat_policy(gold_walker(q["gold_relation_path"])))
            result = await run_kgr(q["question"], kg, model, topics={q["topic_entity"]: None}, top_k=100, max_rounds=60, trace=trace)
            assert not result.abstained and set(result.answers) == set(q["answers"]), q["id"]
            searches = events_of(trace, "tool_call")
            assert all(e["tool"] in ("find_entities", "kgr_search") for e in searches)
            kgr_calls = [e["arguments"] for e in searches if e["tool"] == "kgr_search"]
            assert result.turns == len(kgr_calls) + 1 and result.extra["searches"] == len(kgr_calls)
            # one traversal session per run, with the question for ranking
            assert {a["session"] for a in kgr_calls} == {result.extra["session"]}
            assert all(a["question"] == q["question"] for a in kgr_calls)
            assert result.reasoning.startswith("<think>") and result.reasoning.endswith("</answer>")
            assert result.extra["format_errors"] == []
    # the topic was searched by name: the driver resolved it to the topic's id
    assert kgr_calls[0]["entity"] == result.extra["topics"][q["topic_entity"]]
    assert result.path[0].entity == kgr_calls[0]["entity"] and result.path[0].relation is None
    if hops > 1:
        assert result.path[1].relation == q["gold_relation_path"][0]  # a tree edge: topic --rel--> entity


async def test_gold_path_on_pathquestion(pathquestion, data_dir):
    line = (data_dir / "pathquestion" / "PQ-3H.txt").read_text().splitlines()[5]
    question, _, path = line.split("\t")
    parts = path.split("#<end>#")[0].split("#")
    model = ScriptedModel(as_chat_policy(gold_walker(parts[1:-1:2], keep_topic=True)))
    async with KGClient.connect(server=pathquestion) as kg:
        result = await run_kgr(question, kg, model, topics={parts[0]: None}, top_k=100, max_rounds=40)
    assert parts[-1] in result.answers and not result.abstained


async def test_a_dead_end_is_left_by_backtracking_to_the_answer(metaqa):
    """Joel Zwick -> My Big Fat Greek Wedding -> (wrongly) its writer; BACKTRACK returns to the film
    and offers its best unexplored neighbour for the question: the language, the answer."""
    trace = Trace()
    model = ScriptedModel(as_chat_policy(backtracker("~directed_by", "written_by", "in_language")))
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": None}, trace=trace)
    assert result.answers == ["Greek"] and not result.abstained
    calls = [e["arguments"] for e in events_of(trace, "tool_call") if e["tool"] == "kgr_search"]
    assert [c.get("entity") for c in calls] == ["kg:Joel_Zwick", "kg:My_Big_Fat_Greek_Wedding", "kg:Nia_Vardalos", None]
    assert calls[-1]["backtrack"] is True
    (note,) = events_of(trace, "note", "backtrack")
    assert note["left"] == "kg:Nia_Vardalos" and note["parent"] == "kg:My_Big_Fat_Greek_Wedding"
    assert note["offered"] == "kg:Greek" and note["climbed"] == [] and not note["exhausted"]
    # the traversal: topic, then tree edges, the last one taken by the backtrack
    assert [(h.entity, h.relation, h.reached) for h in result.path[1:]] == [
        ("kg:Joel_Zwick", "~directed_by", ["kg:My_Big_Fat_Greek_Wedding"]),
        ("kg:My_Big_Fat_Greek_Wedding", "written_by", ["kg:Nia_Vardalos"]),
        ("kg:My_Big_Fat_Greek_Wedding", "in_language", ["kg:Greek"]),
    ]
    assert "<search>BACKTRACK</search>" in result.reasoning and "Backtracked from Nia Vardalos" in result.reasoning


# --- models that break the protocol ---------------------------------------------------------------


async def test_tags_left_open_at_the_end_of_text_are_closed_and_noted(metaqa):
    model = ScriptedModel(["I look it up. <search>kg:Joel_Zwick", " Enough. </think>\n\n<answer>My Big Fat Greek Wedding"])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr("what did [Joel Zwick] direct", kg, model, topics={"Joel Zwick": "kg:Joel_Zwick"})
    assert result.answers == ["My Big Fat Greek Wedding"]
    assert result.extra["format_errors"] == [
        "<search> left open when the model ended its text",
        "<answer> left open when the model ended its text",
    ]
    assert result.extra["searches"] == 1 and result.reasoning.endswith("</answer>")


async def test_unknown_entities_are_refused_inside_the_triples_and_the_run_goes_on(metaqa):
    trace = Trace()
    model = ScriptedModel(
        [
            "<search>Steven Spielberg</search>",  # in the KG, but neither a topic nor seen yet
            "<search>kg:Nope_Nope_Nope</search>",  # id-like: the server's own error
            "<search></search>",
            "Then the topic. <search>Joel Zwick</search>",
            "</think>\n\n<answer>My Big Fat Greek Wedding</answer>",
        ]
    )
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr("what did [Joel Zwick] direct", kg, model, topics={"Joel Zwick": None}, trace=trace)
    found = blocks(result.reasoning)
    assert "No entity called 'Steven Spielberg' among the topic entities" in found[0][1]
    assert found[1][1].startswith("Error: ") and "kg:Nope_Nope_Nope" in found[1][1]
    assert found[2][1].startswith("Nothing was searched")
    assert "My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding]" in found[3][1]
    assert result.answers == ["My Big Fat Greek Wedding"]
    assert [n["query"] for n in events_of(trace, "note", "unknown entity searched")] == ["Steven Spielberg"]
    # find_entities was asked, and its hit dismissed for not being among the known entities
    assert any(e["tool"] == "find_entities" and e["arguments"]["name"] == "Steven Spielberg" for e in events_of(trace, "tool_call"))


async def test_a_model_that_stops_without_answering_abstains(metaqa):
    trace = Trace()
    model = ScriptedModel(["Let me think about this film for a while."])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": "kg:Joel_Zwick"}, trace=trace)
    assert result.abstained and result.answers == [] and result.turns == 1
    assert events_of(trace, "note", "the model stopped without an answer")


async def test_an_empty_answer_abstains(metaqa):
    model = ScriptedModel(["<search>kg:Joel_Zwick</search>", "Not in the graph. </think>\n\n<answer></answer>"])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": "kg:Joel_Zwick"})
    assert result.abstained and result.answers == [] and result.extra["format_errors"] == []


@pytest.mark.parametrize("runaway", ["searching", "rambling"])
async def test_runaway_rounds_end_at_the_round_limit(metaqa, runaway):
    trace = Trace()
    if runaway == "searching":
        model = ScriptedModel(lambda messages, tools: Reply(text=" Once more. <search>kg:Joel_Zwick</search>"))
    else:  # out of tokens every time, never reaching a tag
        model = ScriptedModel(lambda messages, tools: Reply(text=" and so on", stop_reason="length"))
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": "kg:Joel_Zwick"}, max_rounds=4, trace=trace)
    assert result.abstained and result.turns == 4
    assert events_of(trace, "note", "round limit reached without an answer")[0]["max_rounds"] == 4
    assert result.extra["searches"] == (4 if runaway == "searching" else 0)


async def test_a_closing_tag_with_nothing_open_is_a_format_error(metaqa):
    model = ScriptedModel(["I search Joel Zwick</search>", "</think>\n\n<answer>Greek</answer>"])
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": "kg:Joel_Zwick"})
    assert result.extra["format_errors"] == ["</search> with no <search> open"]
    assert blocks(result.reasoning) == []  # no opening tag: no well-formed search block
    assert "Nothing was searched" in result.reasoning and result.answers == ["Greek"]


# --- adapters over the wire ---------------------------------------------------------------------


def prompt(prefix: str = "<think>") -> TextPrompt:
    return TextPrompt(system="Rules.", user="Q?\nTopic entities: Jaws [kg:Jaws]", head="Rules.\n\nUser: Q?\nAssistant: ", prefix=prefix)


async def test_completions_endpoint_sends_the_flat_prompt_with_stop_sequences():
    with FakeProvider(["Look: <search>kg:Jaws</search> and then made-up triples", "it ends here"]) as fake:
        model = get_model("openai-completions:kgr-test", base_url=fake.base_url_openai)
        assert isinstance(model, OpenAITextModel) and model.mode == "completions"
        first = await model.generate(prompt("<think>So"), stop=["</search>", "</answer>"])
        second = await model.generate(prompt(), stop=["</search>", "</answer>"])
        await model.aclose()
    body = fake.requests[0].body
    assert fake.requests[0].path == "/v1/completions"
    assert body["prompt"] == "Rules.\n\nUser: Q?\nAssistant: <think>So"
    assert body["stop"] == ["</search>", "</answer>"] and body["model"] == "kgr-test" and body["max_tokens"] == 2048
    assert (first.text, first.finish, first.stop_sequence, first.ended) == ("Look: <search>kg:Jaws", "stop", "</search>", False)
    assert (second.text, second.stop_sequence, second.ended) == ("it ends here", None, True)  # stop_reason null: end of text
    assert first.usage.requests == 1


async def test_chat_mode_continues_the_assistant_message_and_drops_fields_a_server_rejects():
    def policy(request):
        if "continue_final_message" in request.body:
            return error(400, "Unrecognized request argument supplied: continue_final_message")
        return Reply(text=" more <answer>Jaws")  # the stop sequence honoured and dropped, unsaid

    with FakeProvider(policy) as fake:
        model = text_model_for(get_model("openai:chat-test", base_url=fake.base_url_openai))
        assert isinstance(model, OpenAITextModel) and model.mode == "chat"
        reply = await model.generate(prompt("<think>So"), stop=["</search>", "</answer>"])
        again = await model.generate(prompt("<think>So"), stop=["</search>", "</answer>"])
    first, retry, third = (r.body for r in fake.requests)
    assert first["continue_final_message"] is True and first["add_generation_prompt"] is False
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert first["messages"][-1]["content"] == "<think>So" and first["stop"] == ["</search>", "</answer>"]
    assert "continue_final_message" not in retry and "continue_final_message" not in third
    assert not model.continue_fields_supported
    assert (reply.text, reply.stop_sequence, reply.ended) == (" more <answer>Jaws", None, False)  # unknown: not said
    assert again.text == reply.text


async def test_text_model_for_wraps_other_chat_models():
    scripted = ScriptedModel(["x"])
    assert isinstance(text_model_for(scripted), ChatAsText)
    completions = OpenAITextModel("m", base_url="http://127.0.0.1:9/v1")
    assert text_model_for(completions) is completions
    with pytest.raises(Exception, match="--agent kgr only"):
        await completions.complete([])


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_the_driver_over_the_wire_with_the_official_sdk(metaqa, endpoint):
    """The backtracking script behind a loopback OpenAI-compatible server, through the openai SDK.
    The chat endpoint here honours `stop` without saying which sequence matched (like OpenAI)."""
    script = backtracker("~directed_by", "written_by", "in_language")
    with FakeProvider(over_the_wire(script, strip_stops=endpoint == "chat")) as fake:
        spec = "openai-completions:kgr-wire" if endpoint == "completions" else "openai:kgr-wire"
        model = get_model(spec, base_url=fake.base_url_openai)
        async with KGClient.connect(server=metaqa) as kg:
            result = await run_kgr(JOEL, kg, model, topics={"Joel Zwick": None})
        assert fake.errors == []
        paths = {r.path for r in fake.requests}
    assert paths == {"/v1/completions" if endpoint == "completions" else "/v1/chat/completions"}
    assert result.answers == ["Greek"] and result.turns == 5 and result.extra["format_errors"] == []
    assert result.usage["model"].requests == 5


# --- kg-mcp ask end to end ------------------------------------------------------------------------


def test_kg_mcp_ask_kgr_end_to_end_then_export(metaqa_store_dir, data_dir, tmp_path):
    script = backtracker("~directed_by", "written_by", "in_language")
    env = dict(os.environ, OPENAI_API_KEY="sk-test-not-a-real-key")
    env.pop("OPENAI_BASE_URL", None)
    env.pop("KG_MCP_RANKER", None)
    runs = tmp_path / "runs"
    with FakeProvider(over_the_wire(script)) as fake:
        server = f"{sys.executable} -m kg_mcp serve --store {metaqa_store_dir}"
        command = [sys.executable, "-m", "kg_mcp", "ask", JOEL, "--agent", "kgr", "--topic", "Joel Zwick",
                   "--model", "openai-completions:kgr-scripted", "--base-url", fake.base_url_openai,
                   "--server-cmd", server, "--trace", str(runs / "kgr.jsonl"), "--json"]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        assert fake.errors == [] and {r.path for r in fake.requests} == {"/v1/completions"}
    out = json.loads(done.stdout)
    assert out["answers"] == ["Greek"] and out["abstained"] is False
    assert out["reasoning"].count("<search>") == 4 and out["usage"]["model"]["requests"] == 5
    events = read_trace(out["trace"])
    assert [e["what"] for e in events if e["type"] == "note"] == ["backtrack"]
    assert any(e["type"] == "tool_call" and e["arguments"].get("backtrack") for e in events)

    exported = tmp_path / "sft.jsonl"
    gold = data_dir / "metaqa" / "2hop_dev.json"
    done = subprocess.run(
        [sys.executable, "-m", "kg_mcp", "export-trajectories", str(runs), "--gold", str(gold), "--out", str(exported)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 trajectories from 1 traces" in done.stderr
    (record,) = [json.loads(line) for line in exported.read_text().splitlines()]
    assert record["reward"] == {"retrieval": 0.8, "format": 0.5, "answer": 1.0, "total": 2.3}
    assert record["method"] == "kgr" and record["gold"] == ["Greek"] and record["searches"] == 4
    assert record["prompt"].endswith("Assistant: <think>") and record["completion"].endswith("<answer>Greek</answer>")
