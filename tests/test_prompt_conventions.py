"""The drivers' prompts agree with themselves: one topic-entity rule (the benchmark's convention,
prompts/conventions/), stated once per prompt in every tools mode, followed by every exemplar;
exemplars that name MetaQA relations name all of them; R2-KG's verification carries no note."""

from __future__ import annotations

import ast
import json
import re

import pytest
from kg_mcp.agents.ark import _Ark
from kg_mcp.agents.conventions import DEFAULT_CONVENTION, conventions, topic_rule
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.base import Reply
from kg_mcp.agents.models.scripted import ScriptedModel, call
from kg_mcp.agents.r2kg import TOOL_MODES as R2KG_MODES
from kg_mcp.agents.r2kg import operator_prompt, run_r2kg, supervisor_prompt, verification_tool
from kg_mcp.agents.sog import TOOL_MODES as SOG_MODES
from kg_mcp.agents.sog import system_prompt as sog_prompt

from kg_mcp.prompt_files import prompts_dir, read_prompt

PROFILES = ("generic", "wikidata", "freebase")
# A second sentence about the topic entity and answers, outside the rule, is the contradiction to catch.
_ANOTHER_RULE = re.compile(r"topic (entity|film)[^.\n]*\b(is|are) not (an |the )?answers?\b", re.IGNORECASE)


def driver_prompts(convention: str = DEFAULT_CONVENTION) -> dict[str, tuple[str, bool]]:
    """Every system prompt a driver sends, by name, with whether the follow tool is offered with it."""
    prompts: dict[str, tuple[str, bool]] = {}
    for profile in PROFILES:
        for mode, tools in SOG_MODES.items():
            prompts[f"sog {profile} {mode}"] = (sog_prompt(profile, mode, convention), "follow" in tools)
        for mode, tools in R2KG_MODES.items():
            follow = "follow" in tools
            two_agent = operator_prompt(profile, mode, single=False, convention=convention)
            prompts[f"r2kg operator {profile} {mode}"] = (two_agent, follow)
            for variant in (1, 2, 3):
                single = operator_prompt(profile, mode, single=True, variant=variant, convention=convention)
                prompts[f"r2kg single {variant} {profile} {mode}"] = (single, follow)
        prompts[f"r2kg supervisor {profile}"] = (supervisor_prompt(profile, convention), False)
        for yes_no in (False, True):
            ark = _Ark(None, None, "q", {}, yes_no, 3, 8, None, profile, convention=convention)  # type: ignore[arg-type]
            prompts[f"ark {profile} yes_no={yes_no}"] = (ark.system_prompt(), False)
    return prompts


@pytest.mark.parametrize("convention", conventions())
def test_every_driver_prompt_states_the_rule_once_and_no_other(convention):
    assert DEFAULT_CONVENTION == "metaqa" and {"metaqa", "pathquestion"} <= set(conventions())
    prompts = driver_prompts(convention)
    assert len(prompts) == 3 * (3 + 3 * 4 + 1 + 2)
    for name, (text, follow) in prompts.items():
        rule = topic_rule(convention, follow=follow)
        assert text.count(rule) == 1, name
        # The follow part only where follow is offered; never a second rule elsewhere.
        assert ("exclude_through" in rule or "`follow`" in rule) is follow, name
        rest = text.replace(rule, "")
        assert not _ANOTHER_RULE.search(rest), (name, _ANOTHER_RULE.search(rest).group(0))
        assert "Keep that default" not in rest and "exclude_through" not in rest, name
        assert not re.search(r"\{[a-z_]+\}", text), name  # every field filled


def test_the_rule_names_both_cases_and_the_default_keeps_follows_default():
    rule = topic_rule()
    assert "not an answer" in rule and "reached only back through the topic entity" in rule
    assert "Keep that default" in topic_rule(follow=True) and "Keep that default" not in rule
    assert 'exclude_through="none"' in topic_rule("pathquestion", follow=True)
    with pytest.raises(ValueError, match="convention must be one of"):
        topic_rule("webqsp")


# --- exemplars: their own answers follow the rule ---

EXEMPLAR_FILES = sorted(
    [
        *(prompts_dir() / "sog" / "exemplars").glob("*.md"),
        *(prompts_dir() / "r2kg").glob("examples_*.md"),
        *(prompts_dir() / "ark").glob("exemplars_*.md"),
    ]
)


def examples(text: str) -> list[tuple[set[str], list[str]]]:
    """(topic names and ids, final answers) of each worked example in an exemplar file."""
    found = []
    for block in re.split(r"\n(?=Question: )", text)[1:]:
        question = block.splitlines()[0]
        topics = set(re.findall(r"\[([^\]]+)\]", question))
        if "{" in question:
            topics |= {k for kv in ast.literal_eval(question[question.index("{") :]).items() for k in kv}
        for listed in re.findall(r"^Topic entities: (.*)$", block, re.MULTILINE):  # ARK: `Name [id], ...`
            topics |= {part.strip() for pair in re.findall(r"([^,\[\]]+) \[([^\]]+)\]", listed) for part in pair}
        for line in re.findall(r"^- (.+): (\S+)$", block, re.MULTILINE):  # R2-KG: `- Name: id`
            topics |= set(line)
        answers: list[str] = []
        final = re.search(r"^Final answer: (.*)$", block, re.MULTILINE)
        if final and final.group(1).startswith("{\""):
            answers += json.loads(final.group(1)).get("answers", [])
        elif final:
            answers += re.findall(r"\{([^{}]*)\}", final.group(1))
        for listed in re.findall(r"answers=\[([^\]]*)\]|\"answers\": \[([^\]]*)\]", block):
            answers += re.findall(r'"([^"]+)"', "".join(listed))
        found.append((topics, answers))
    return found


@pytest.mark.parametrize("path", EXEMPLAR_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_exemplar_answers_with_its_own_topic_entity(path):
    found = examples(read_prompt(str(path.relative_to(prompts_dir()))).template)
    assert found, "no worked example parsed"
    yes_no = '"answer": "' in path.read_text(encoding="utf-8")
    assert any(answers for _, answers in found) or path.name.endswith("_operator.md") or yes_no
    for topics, answers in found:
        assert topics, path.name
        named = {t.strip().lower() for t in topics}
        assert not named & {a.strip().lower() for a in answers}, (path.name, topics, answers)


def test_the_sog_follow_exemplar_leaves_out_what_only_the_topic_film_reaches():
    text = read_prompt("sog/exemplars/generic_follow.md").template
    assert "Final answer: {Crime}, {Drama}, {Mystery}, {Thriller}" in text
    assert "Fantasy" in text.split("Final answer")[0] and "include it" not in text  # the old contradiction


# --- exemplars name all of MetaQA's relations, or none ---


@pytest.fixture(scope="module")
def metaqa_relations(data_dir) -> set[str]:
    with (data_dir / "metaqa" / "kb.txt").open(encoding="utf-8") as kb:
        return {line.split("|")[1] for line in kb if line.count("|") == 2}


@pytest.mark.parametrize("path", EXEMPLAR_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_exemplars_that_name_metaqa_relations_name_all_of_them(path, metaqa_relations):
    assert len(metaqa_relations) == 9
    text = path.read_text(encoding="utf-8")
    named = {r for r in metaqa_relations if re.search(rf"(?<![\w.]){r}(?!\w|\.\w)", text)}
    assert named in (set(), metaqa_relations), (path.name, sorted(metaqa_relations - named))
    if path.stem.startswith("generic") or "_generic_" in path.stem or path.stem.endswith("_generic"):
        assert named == metaqa_relations, path.name


# --- R2-KG: the verification call carries the evidence, not a note ---


async def test_r2kg_verification_has_no_note_and_the_supervisor_sees_the_evidence(metaqa):
    spec = verification_tool(single=False)
    assert spec.input_schema["properties"] == {} and "note" not in json.dumps(spec.input_schema)
    assert "note" not in read_prompt("r2kg/operator.md").template
    for kind in PROFILES:
        assert "note=" not in read_prompt(f"r2kg/examples_{kind}_operator.md").template

    operator = ScriptedModel(
        [
            Reply("", [call("explore_kg", entity="kg:Joel_Zwick", relations=["~directed_by"])]),
            # An Operator that still writes a note: the call counts, the note goes nowhere.
            Reply("", [call("verification", note="SECRET-NOTE the films he directed")]),
        ],
        name="operator",
    )
    answer = {
        "decision": "answer",
        "answers": ["My Big Fat Greek Wedding"],
        "reasoning_path": "Joel Zwick <-directed_by- films",
        "feedback": {"entity": None, "relations": [], "rollback_to_hop": None, "message": ""},
    }
    supervisor = ScriptedModel([json.dumps(answer)], name="supervisor")
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_r2kg(
            "what films did [Joel Zwick] direct", kg, operator, supervisor, topics={"Joel Zwick": "kg:Joel_Zwick"}
        )
    assert result.answers == ["My Big Fat Greek Wedding"] and result.extra["verifications"] == 1
    [request] = supervisor.seen
    system, shown = request["messages"][0].content, request["messages"][-1].content
    assert "what films did [Joel Zwick] direct" in shown
    assert "(My Big Fat Greek Wedding [kg:My_Big_Fat_Greek_Wedding], directed_by, Joel Zwick [kg:Joel_Zwick])" in shown
    assert "SECRET-NOTE" not in shown and "SECRET-NOTE" not in system
    assert system.count(topic_rule()) == 1
    # The operator was offered verification without arguments, and the rule with follow's part only in follow mode.
    offered = {t.name: t for t in operator.seen[0]["tools"]}
    assert offered["verification"].input_schema["properties"] == {}
    assert operator.seen[0]["messages"][0].content.count(topic_rule()) == 1


async def test_the_sog_movie_exemplars_walk_real_metaqa_facts(metaqa):
    """The generic exemplars' ids are MetaQA's, and the films they leave out or keep are as the KG says."""
    text = "".join(read_prompt(f"sog/exemplars/generic{s}.md").template for s in ("", "_batched", "_follow"))
    ids = sorted(set(re.findall(r"kg:[\w%]+", text)) - {"kg:Name"})
    assert "kg:The_Curious_Case_of_Benjamin_Button" in ids and "kg:David_Fincher" in ids
    async with KGClient.connect(server=metaqa) as kg:
        for entity in ids:
            direction = "incoming" if entity == "kg:David_Fincher" else "outgoing"
            result = await kg.call_tool("search", {"entity": entity, "direction": direction})
            assert not result.is_error and result.data["rows"], entity
        films = await kg.call_tool(
            "search", {"entity": "kg:David_Fincher", "direction": "incoming", "properties_to_filter_for": ["directed_by"]}
        )
    made = {row["value"]["id"] for row in films.data["rows"]}
    assert made == {i for i in ids if i != "kg:David_Fincher"}  # his seven films, the topic film among them
