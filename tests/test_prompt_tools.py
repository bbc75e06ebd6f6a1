"""Every text a model reads names only tools it is given: for every agent and tool mode, its prompts,
the descriptions of the tools it is offered, and the KG summary `--schema` appends; for the server,
its instructions and MCP prompts against the tools it registers.

A tool is named where it is written as code (`search`, search(...)), as a command on a thing
("search it"), or after call / use / using / from; snake_case names (find_entities) wherever they
stand. "Follow the chain" and "the search" are English, not tools.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from kg_mcp.agents.ark import _Ark
from kg_mcp.agents.conventions import conventions
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kg_reasoner import prompt_for
from kg_mcp.agents.r2kg import VERIFICATION, mode_specs, verification_tool
from kg_mcp.agents.r2kg import TOOL_MODES as R2KG_MODES
from kg_mcp.agents.sog import TOOL_MODES as SOG_MODES
from kg_mcp.agents.sog import question_message, tool_specs
from test_prompt_conventions import PROFILES, driver_prompts

from kg_mcp.backends import open_demo
from kg_mcp.profiles import PROFILES as SERVER_PROFILES
from kg_mcp.prompt_files import mcp_prompts, read_prompt
from kg_mcp.server import build_server
from kg_mcp.settings import Settings


def server_tools() -> list[str]:
    settings = Settings(sparql_tool=True)
    return [t.name for t in asyncio.run(build_server(open_demo(settings=settings), settings).list_tools())]


TOOLS = server_tools()


def named_tools(text: str) -> set[str]:
    """The tools `text` names (see the module docstring)."""
    found = set()
    for tool in TOOLS:
        name = re.escape(tool)
        if "_" in tool:
            pattern = rf"\b{name}\b"
        else:
            pattern = rf"`{name}\b|\b{name}\(|\b{name} it\b|\b(?:call|calls|calling|use|uses|using|from) `?{name}\b"
        if re.search(pattern, text, re.IGNORECASE):
            found.add(tool)
    return found


def test_the_detector_finds_what_the_issue_found_and_leaves_english_alone():
    assert named_tools("otherwise `find_entities` turns a name into an id") == {"find_entities"}
    assert named_tools("(unnamed mediator node: it has no name; search it to reach the entities it links)") == {"search"}
    assert named_tools("For a chain of relations, use follow.") == {"follow"}
    assert named_tools("Follow the chain of facts hop by hop; narrow the search; verify your answer.") == set()
    assert named_tools("<search> an entity id </search>") == set()


def spec_texts(specs) -> str:
    """A tool list as the model reads it: names, descriptions, and every argument's description."""
    parts = []
    for spec in specs:
        parts.append(spec.description)

        def walk(node):
            if isinstance(node, dict):
                if isinstance(node.get("description"), str):
                    parts.append(node["description"])
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(spec.input_schema)
    return "\n".join(parts)


@pytest.fixture(scope="module")
def seen(metaqa, wikidata_local):
    """What each driver's model is shown by real servers (the metaqa store, the Wikidata sample, the
    demo KG): the tools of every mode, and the KG summary."""

    async def look():
        out = {}
        for name, backend in (("metaqa", metaqa), ("wikidata", wikidata_local), ("demo", open_demo())):
            async with KGClient.connect(server=backend) as client:
                out[name] = {
                    "schema": client.schema,
                    "sog": {mode: tool_specs(client, mode) for mode in SOG_MODES},
                    "r2kg": {mode: list(mode_specs(client, mode).values()) for mode in R2KG_MODES},
                    "schema_for": {
                        tools: client.offered_schema(tools)
                        for tools in [*SOG_MODES.values(), *R2KG_MODES.values(), ()]
                    },
                }
        return out

    return asyncio.run(look())


def offered(name: str) -> set[str]:
    """The tools the model behind the prompt `name` (a key of driver_prompts) is given."""
    agent, *rest = name.split()
    mode = rest[-1]
    if agent == "sog":
        return set(SOG_MODES[mode])
    if agent == "r2kg" and rest[0] != "supervisor":
        return {*R2KG_MODES[mode], VERIFICATION}
    return set()  # the R2-KG Supervisor, ARK-V1: replies in JSON, the driver calls the KG


@pytest.mark.parametrize("convention", conventions())
def test_every_driver_prompt_names_only_the_tools_its_model_is_given(convention):
    prompts = driver_prompts(convention)
    assert len(prompts) == 3 * (3 + 3 * 4 + 1 + 2)
    wrong = {name: named_tools(text) - offered(name) for name, (text, _) in prompts.items()}
    assert {name: tools for name, tools in wrong.items() if tools} == {}


def test_the_turns_after_the_system_prompt_name_only_offered_tools():
    sog = {"search"}  # in every mode
    assert named_tools(question_message("Who directed [Jaws]?", {"Jaws": "kg:Jaws"})) <= sog
    assert named_tools(read_prompt("sog/continue.md").template) <= sog
    r2kg = {"get_relations", "explore_kg", VERIFICATION}  # in every mode
    for name in ("question", "feedback"):
        assert named_tools(read_prompt(f"r2kg/{name}.md").template) <= r2kg, name
    assert named_tools(read_prompt("r2kg/supervisor_request.md").template) == set()  # the Supervisor has none
    for name in ("anchor", "relation", "triples", "final_entities", "final_yes_no", "summary"):
        assert named_tools(read_prompt(f"ark/{name}.md").template) == set(), name  # ARK-V1's model has none
    for profile in PROFILES:  # KG-Reasoner's model writes <search> tags; it calls no MCP tool
        prompt = prompt_for(profile, "Who directed [Jaws]?", {"Jaws": "kg:Jaws"}, "")
        assert named_tools(prompt.head) == set(), profile


@pytest.mark.parametrize("mode", list(SOG_MODES))
def test_sog_tool_descriptions_name_only_the_tools_of_their_mode(seen, mode):
    for shown in seen.values():
        specs = shown["sog"][mode]
        assert {s.name for s in specs} == set(SOG_MODES[mode])
        assert named_tools(spec_texts(specs)) <= set(SOG_MODES[mode])


@pytest.mark.parametrize("mode", list(R2KG_MODES))
def test_r2kg_tool_descriptions_name_only_the_tools_of_their_mode(seen, mode):
    for shown in seen.values():
        specs = [*shown["r2kg"][mode], verification_tool(True), verification_tool(False)]
        assert named_tools(spec_texts(specs)) <= {*R2KG_MODES[mode], VERIFICATION}


def test_the_kg_summary_drivers_append_names_only_the_tools_they_give(seen):
    """--schema appends the server's KG summary to a driver's prompt (ARK-V1's and KG-Reasoner's too,
    whose models call no tool): as each reads it, it names only the tools that model is given; the
    server's own (for any client) may name its others (a hierarchy's `follow` with rel+)."""
    for name, shown in seen.items():
        assert shown["schema"], name
        assert named_tools(shown["schema"]) <= set(TOOLS), name
        for tools, summary in shown["schema_for"].items():
            assert named_tools(summary) <= set(tools), (name, tools, summary)
            assert summary.splitlines()[0] == shown["schema"].splitlines()[0]  # the summary, less some sentences


def test_what_the_server_shows_every_driver_names_no_tool():
    """Labels the server writes into outputs of any tool (Freebase's mediator nodes) name none."""
    for profile in SERVER_PROFILES.values():
        assert named_tools(profile.unnamed_node_label or "") == set(), profile.name


@pytest.mark.parametrize("sparql", [False, True])
def test_the_server_instructions_and_prompts_name_only_its_tools(sparql):
    settings = Settings(sparql_tool=sparql)
    server = build_server(open_demo(settings=settings), settings)
    registered = {t.name for t in asyncio.run(server.list_tools())}
    assert ("sparql" in registered) is sparql
    assert named_tools(server.instructions) <= registered
    for prompt in mcp_prompts():
        assert named_tools(prompt.template) <= registered, prompt.name
