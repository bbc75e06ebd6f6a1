"""The errors kg-mcp raises, translated once at the backend boundary.

    KGError                  something the model can fix: shown to it as a tool error with a hint
    ├── InvalidInput         a malformed id, relation, limit or query
    ├── UnknownEntity        well-formed, but the KG has no such entity (carries suggestions)
    ├── UnknownRelation      well-formed, but no such relation
    ├── QueryRefused         the sparql tool refused a query (update, LOAD, SERVICE...)
    └── EndpointError        the store or remote endpoint failed, refused or timed out
    ConfigError              something the person running kg-mcp must fix (bad store path, flags)
"""

from __future__ import annotations


class KGError(Exception):
    """An error the calling model can act on. `hint` says how to fix the call."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} Hint: {self.hint}" if self.hint else self.message


class InvalidInput(KGError):
    pass


class UnknownEntity(KGError):
    def __init__(self, message: str, hint: str = "", suggestions: list[str] | None = None):
        super().__init__(message, hint)
        self.suggestions = suggestions or []


class UnknownRelation(KGError):
    pass


class QueryRefused(KGError):
    pass


class EndpointError(KGError):
    pass


class ConfigError(Exception):
    """A problem with how kg-mcp was started; reported by the CLI, never to the model."""
