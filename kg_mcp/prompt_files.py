"""Prompts kept as markdown files under prompts/ (shipped as the package kg_mcp.prompts).

A file may open with a small header between `---` lines holding `description: ...`; the body
is a template whose `{name}` fields are the prompt's arguments.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

_FIELD = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True)
class PromptFile:
    name: str
    description: str
    template: str

    @property
    def arguments(self) -> list[str]:
        return list(dict.fromkeys(_FIELD.findall(self.template)))

    def render(self, **values: str) -> str:
        """Fill the `{name}` fields; other braces (e.g. `{Answer}` in examples) stay as written."""
        return _FIELD.sub(lambda m: values.get(m.group(1), m.group(0)), self.template)


def prompts_dir() -> Path:
    return Path(str(resources.files("kg_mcp.prompts")))


def read_prompt(relative: str) -> PromptFile:
    path = prompts_dir() / relative
    text = path.read_text(encoding="utf-8")
    description = ""
    if text.startswith("---\n"):
        header, _, text = text[4:].partition("\n---\n")
        for line in header.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "description":
                description = value.strip()
    return PromptFile(name=path.stem, description=description, template=text.strip() + "\n")


def mcp_prompts() -> list[PromptFile]:
    """The prompts the server offers to clients: every file in prompts/mcp/."""
    return [read_prompt(f"mcp/{p.name}") for p in sorted((prompts_dir() / "mcp").glob("*.md"))]
