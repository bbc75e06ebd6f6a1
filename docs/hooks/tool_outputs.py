"""mkdocs hook: real outputs of kg-mcp's tools, made from the demo KG when the site is built.

A page writes one of these markers on a line of its own:

    <!-- kg-mcp call TOOL {"json": "arguments"} -->        the tool's text output, with the command
    <!-- kg-mcp call-error TOOL {"json": "arguments"} -->  the same, for a call that must be a tool error
    <!-- kg-mcp arguments TOOL -->                         the tool's arguments, from its input schema
    <!-- kg-mcp resource URI -->                           a resource's text (kg://stats, kg://schema...)
    <!-- kg-mcp instructions -->                           the instructions a client gets at initialize
    <!-- kg-mcp settings -->                               every KG_MCP_* setting, from kg_mcp.settings

Every marker of a page is answered in one MCP session with an in-process server on the demo KG
(the `sparql` tool enabled), through the SDK's own client, so the page shows what a client gets
today. A call that fails when it should not (or succeeds when marked call-error), an unknown tool
or a malformed marker fails the build.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- kg-mcp (call-error|call|arguments|resource|instructions|settings)(?= |(?= -->)) ?(.*?) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page, config, files) -> str:
    markers = list(MARKER.finditer(markdown))
    if not markers:
        return markdown
    where = page.file.src_uri
    # The server logs every tool error it returns, and the pages show some on purpose; what matters
    # to the build is checked below and raised as a PluginError.
    quiet = [logging.getLogger(name) for name in ("kg_mcp", "mcp")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        filled = asyncio.run(_answer([(m.group(1), m.group(2).strip()) for m in markers], where))
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    pieces, last = [], 0
    for marker, text in zip(markers, filled):
        pieces += [markdown[last : marker.start()], text]
        last = marker.end()
    return "".join(pieces) + markdown[last:]


async def _answer(markers: list[tuple[str, str]], where: str) -> list[str]:
    from kg_mcp.backends import open_demo
    from kg_mcp.server import build_server
    from kg_mcp.settings import Settings
    from mcp import Client

    backend = open_demo(settings=Settings(sparql_tool=True))
    filled: list[str] = []
    problem = None
    async with Client(build_server(backend, backend.settings)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        for kind, rest in markers:
            try:
                filled.append(await _one(client, tools, kind, rest, where))
            except PluginError as e:  # raised outside the session, not wrapped in its task group's errors
                problem = e
                break
    if problem is not None:
        raise problem
    return filled


async def _one(client, tools: dict, kind: str, rest: str, where: str) -> str:
    if kind == "settings":
        return _settings_table()
    if kind == "instructions":
        return _fenced(client.instructions or "")
    if kind == "resource":
        contents = (await client.read_resource(rest)).contents
        return _fenced("\n".join(getattr(c, "text", "") for c in contents), command=f"resource {rest}")
    name, _, arguments = rest.partition(" ")
    if name not in tools:
        raise PluginError(f"{where}: the marker names tool {name!r}, which the demo server does not offer ({', '.join(tools)})")
    if kind == "arguments":
        return _arguments_table(tools[name].input_schema or {})
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        raise PluginError(f"{where}: the arguments of {name} are not JSON: {e}") from None
    result = await client.call_tool(name, args)
    text = "\n".join(getattr(c, "text", str(c)) for c in result.content)
    if result.is_error != (kind == "call-error"):
        expected = "a tool error" if kind == "call-error" else "a result"
        raise PluginError(f"{where}: {name} {arguments} was expected to give {expected}, and gave: {text[:500]}")
    return _fenced(text, command=f"kg-mcp call {name} '{json.dumps(args, ensure_ascii=False)}'")


def _fenced(text: str, command: str | None = None) -> str:
    """A code block holding `text` verbatim, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f"$ {command}\n" if command else ""
    return f'{fence} {{ .text .kg-mcp-output }}\n{head}{text.rstrip()}\n{fence}'


def _arguments_table(schema: dict) -> str:
    required = set(schema.get("required", ()))
    rows = ["| argument | type | default | what it is |", "|---|---|---|---|"]
    for name, sub in (schema.get("properties") or {}).items():
        default = "required" if name in required else (f"`{json.dumps(sub['default'])}`" if "default" in sub else "left out")
        description = " ".join((sub.get("description") or "").split()).replace("|", "\\|")
        rows.append(f"| `{name}` | {_kind(sub)} | {default} | {description} |")
    return "\n".join(rows)


def _kind(schema: dict) -> str:
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if schema.get("type") == "array":
        items = schema.get("items", {})
        return f"list of {items.get('type', 'objects')}"
    return str(schema.get("type", "any"))


def _settings_table() -> str:
    from kg_mcp.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = json.dumps(field.default) if not isinstance(field.default, str) else field.default
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `{prefix}{name.upper()}` | `{default}` | {description} |")
    return "\n".join(rows)
