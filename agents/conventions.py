"""A benchmark's convention on the topic entity, as data: one prompt file per convention.

Whether the topic entity (and what is reached only back through it) can be an answer is a
convention of the question set, not of a driver: MetaQA's gold sets mean the *other* films,
PathQuestion's paths may pass back through the topic entity. Each convention is one file in
prompts/conventions/; every driver puts the same text in its prompts, so the rule is written
once. The part after `<!-- follow -->` is kept only where the `follow` tool is offered.
"""

from __future__ import annotations

from kg_mcp.prompt_files import prompts_dir, read_prompt

DEFAULT_CONVENTION = "metaqa"
_FOLLOW_MARK = "<!-- follow -->"


def conventions() -> list[str]:
    """The conventions there are files for."""
    return sorted(p.stem for p in (prompts_dir() / "conventions").glob("*.md"))


def topic_rule(convention: str = DEFAULT_CONVENTION, *, follow: bool = False) -> str:
    """The rule's text (one paragraph), with how `follow` applies it when that tool is offered."""
    if convention not in conventions():
        raise ValueError(f"convention must be one of {', '.join(conventions())}, not {convention!r}")
    rule, _, with_follow = read_prompt(f"conventions/{convention}.md").template.partition(_FOLLOW_MARK)
    parts = [rule.strip()] + ([with_follow.strip()] if follow and with_follow.strip() else [])
    return " ".join(" ".join(part.split()) for part in parts)
