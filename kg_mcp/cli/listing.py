"""What `kg-mcp tools` prints: a server's tools with their arguments, resources and prompts."""

from __future__ import annotations

import json
import textwrap


async def read_lists(client) -> dict[str, list]:
    """Tools, resources and prompts of a connected server (an empty list for what it does not offer)."""
    capabilities = client.server_capabilities
    tools = (await client.list_tools()).tools
    resources = (await client.list_resources()).resources if capabilities.resources else []
    prompts = (await client.list_prompts()).prompts if capabilities.prompts else []
    return {"tools": tools, "resources": resources, "prompts": prompts}


def describe(lists: dict[str, list]) -> str:
    lines = [f"tools ({len(lists['tools'])}):"]
    for tool in lists["tools"]:
        lines.append(f"  {tool.name}: {_first_line(tool.description)}")
        schema = tool.input_schema or {}
        required = set(schema.get("required", ()))
        for name, sub in (schema.get("properties") or {}).items():
            lines.append(f"      {name} ({_argument_kind(sub, name in required)}){_described(sub)}")
    lines.append(f"resources ({len(lists['resources'])}):")
    lines += [f"  {r.uri}: {_first_line(r.description or r.name)}" for r in lists["resources"]]
    lines.append(f"prompts ({len(lists['prompts'])}):")
    for prompt in lists["prompts"]:
        arguments = ", ".join(a.name + ("" if a.required else "?") for a in prompt.arguments or [])
        lines.append(f"  {prompt.name}({arguments}): {_first_line(prompt.description)}")
    return "\n".join(lines)


def _argument_kind(schema: dict, required: bool) -> str:
    if "enum" in schema:
        kind = " | ".join(json.dumps(v) for v in schema["enum"])
    elif schema.get("type") == "array":
        kind = f"list of {schema.get('items', {}).get('type', 'objects')}"
    elif "anyOf" in schema:
        kind = " or ".join(str(b.get("type", "object")) for b in schema["anyOf"])
    else:
        kind = str(schema.get("type", "any"))
    if required:
        return kind + ", required"
    return kind + (f", default {json.dumps(schema['default'])}" if "default" in schema else ", optional")


def _described(schema: dict) -> str:
    return f": {textwrap.shorten(schema['description'], 100)}" if schema.get("description") else ""


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0]
