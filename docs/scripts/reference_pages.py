"""Write the generated parts of the docs pages: real tool outputs, command help, settings.

The pages are committed whole, so they read on the code host without a build. A generated part
starts at a marker line and ends at `<!-- /kg-mcp -->`; the text between is replaced on every run
(the way cog keeps simonw/llm's help page):

    <!-- kg-mcp call TOOL {"json": "arguments"} -->        the tool's text output, with the command
    <!-- kg-mcp call-error TOOL {"json": "arguments"} -->  the same, for a call that must be a tool error
    <!-- kg-mcp arguments TOOL -->                         the tool's arguments, from its input schema
    <!-- kg-mcp resource URI -->                           a resource's text (kg://stats, kg://schema...)
    <!-- kg-mcp instructions -->                           the instructions a client gets at initialize
    <!-- kg-mcp settings -->                               every KG_MCP_* setting, from kg_mcp.settings
    <!-- kg-mcp help COMMAND... -->                        `kg-mcp COMMAND --help`, for every command under it

Every marker of a page is answered in one MCP session with an in-process server on the demo KG
(the `sparql` tool enabled), through the SDK's own client. A call that fails when it should not
(or succeeds when marked call-error), an unknown tool or a malformed marker stops the run.

    .venv/bin/python docs/scripts/reference_pages.py          # rewrite the pages (make docs-pages)
    .venv/bin/python docs/scripts/reference_pages.py --check  # exit 1 if a committed page is stale
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
END = "<!-- /kg-mcp -->"
# A cursor key of the docs' own: the cursors the pages show are the same on every run (a server's
# key is its secret, or its process's own).
DOCS_CURSOR_KEY = "kg-mcp docs pages"
KINDS = "call-error|call|arguments|resource|instructions|settings|help"
MARKER = re.compile(rf"^<!-- kg-mcp ({KINDS})(?= |(?= -->)) ?(.*?) -->$", re.MULTILINE)
# A marker, and what the last run wrote after it (up to the end line), if anything.
PART = re.compile(rf"^(<!-- kg-mcp (?:{KINDS})(?: [^\n]*?)? -->)\n(?:(?:(?!<!-- kg-mcp ).)*?^{re.escape(END)}\n)?", re.MULTILINE | re.DOTALL)


class MarkerError(Exception):
    """A marker that cannot be answered as written."""


def pages() -> list[Path]:
    """Every page with a generated part (examples quoted inside backticks are not markers)."""
    return sorted(p for p in DOCS.rglob("*.md") if MARKER.search(p.read_text(encoding="utf-8")))


def render(text: str, where: str) -> str:
    """`text` with every generated part written afresh."""
    markers = [(m.group(1), m.group(2).strip()) for m in MARKER.finditer(text)]
    if not markers:
        return text
    filled = iter(_quietly(lambda: asyncio.run(_answer(markers, where))))
    return PART.sub(lambda m: f"{m.group(1)}\n{next(filled)}\n{END}\n", text)


def _quietly(run):
    # The server logs every tool error it returns, and the pages show some on purpose.
    quiet = [logging.getLogger(name) for name in ("kg_mcp", "mcp")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL)
    try:
        return run()
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)


async def _answer(markers: list[tuple[str, str]], where: str) -> list[str]:
    from kg_mcp.backends import open_demo
    from kg_mcp.server import build_server
    from kg_mcp.settings import Settings
    from mcp import Client
    from pydantic import SecretStr

    backend = open_demo(settings=Settings(sparql_tool=True, cursor_key=SecretStr(DOCS_CURSOR_KEY)))
    async with Client(build_server(backend, backend.settings)) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        return [await _one(client, tools, kind, rest, where) for kind, rest in markers]


async def _one(client, tools: dict, kind: str, rest: str, where: str) -> str:
    if kind == "settings":
        return _settings_table()
    if kind == "help":
        return _help(rest.split())
    if kind == "instructions":
        return _fenced(client.instructions or "")
    if kind == "resource":
        contents = (await client.read_resource(rest)).contents
        return _fenced("\n".join(getattr(c, "text", "") for c in contents), command=f"resource {rest}")
    name, _, arguments = rest.partition(" ")
    if name not in tools:
        raise MarkerError(f"{where}: the marker names tool {name!r}, which the demo server does not offer ({', '.join(tools)})")
    if kind == "arguments":
        return _arguments_table(tools[name].input_schema or {})
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError as e:
        raise MarkerError(f"{where}: the arguments of {name} are not JSON: {e}") from None
    result = await client.call_tool(name, args)
    text = "\n".join(getattr(c, "text", str(c)) for c in result.content)
    if result.is_error != (kind == "call-error"):
        expected = "a tool error" if kind == "call-error" else "a result"
        raise MarkerError(f"{where}: {name} {arguments} was expected to give {expected}, and gave: {text[:500]}")
    return _fenced(text, command=f"kg-mcp call {name} '{json.dumps(args, ensure_ascii=False)}'")


def _fenced(text: str, command: str | None = None) -> str:
    """A code block holding `text` verbatim, its fence longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    head = f"$ {command}\n" if command else ""
    return f"{fence} {{ .text .kg-mcp-output }}\n{head}{text.rstrip()}\n{fence}"


def _help(path: list[str]) -> str:
    """`kg-mcp PATH --help` and, under it, the same for every command of the group: a heading each."""
    from click.testing import CliRunner
    from kg_mcp.cli import main

    command = main
    for name in path:
        command = command.commands[name]
    parts = []
    for words, each in _commands(command, path):
        title = " ".join(["kg-mcp", *words])
        # a fixed width: the text must not depend on the terminal it was made in
        out = CliRunner().invoke(main, [*words, "--help"], prog_name="kg-mcp", terminal_width=100).output
        level = "#" * min(2 + len(words) - len(path), 4)
        parts.append(f"{level} `{title}`\n\n{_fenced(out)}")
    return "\n\n".join(parts)


def _commands(command, path: list[str]):
    import click

    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, [*path, name])


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
    from pydantic import SecretStr

    from kg_mcp.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    rows = ["| variable | default | what it sets |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default.get_secret_value() if isinstance(field.default, SecretStr) else field.default
        default = json.dumps(default) if not isinstance(default, str) else default
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        rows.append(f"| `{prefix}{name.upper()}` | `{default}` | {description} |")
    return "\n".join(rows)


def stale() -> list[str]:
    """The pages whose generated parts differ from what the code gives today."""
    return [str(p.relative_to(ROOT)) for p in pages() if render(p.read_text(encoding="utf-8"), p.name) != p.read_text(encoding="utf-8")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a page is stale")
    options = parser.parse_args()
    if options.check:
        found = stale()
        for page in found:
            print(f"{page} is stale: run `make docs-pages`", file=sys.stderr)
        sys.exit(1 if found else 0)
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text, page.name)
        if new != text:
            page.write_text(new, encoding="utf-8")
            print(f"wrote {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
