"""The package's layers point one way: command line -> server and drivers -> tools -> backends.

The server (everything in kg_mcp but the command line and the drivers) never imports the drivers:
they are its clients, and only the command line sees both.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import kg_mcp
import kg_mcp.agents

PACKAGE = Path(kg_mcp.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _server_modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "cli" not in p.relative_to(PACKAGE).parts[:1]]


def test_no_server_module_imports_the_drivers():
    offenders = {str(p.relative_to(PACKAGE)): sorted(n for n in _imports(p) if n.startswith("kg_mcp.agents"))
                 for p in _server_modules()}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(offenders) > 20  # the scan saw the server's modules


def test_nothing_imports_a_top_level_agents_package():
    root = PACKAGE.parent
    files = [*PACKAGE.rglob("*.py"), *Path(kg_mcp.agents.__file__).parent.rglob("*.py"), *(root / "tests").glob("*.py")]
    offenders = [str(p) for p in files if any(n == "agents" or n.startswith("agents.") for n in _imports(p))]
    assert offenders == []


_DRIVER_MODULES = [m.name for m in pkgutil.walk_packages(kg_mcp.agents.__path__, "kg_mcp.agents.")]


@pytest.mark.parametrize("name", _DRIVER_MODULES)
def test_driver_doctests(name):
    # agents/ installs as kg_mcp.agents, so its doctests run here under that name.
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


# --- the tools package: no tool imports another, no circle -------------------------------------------
TOOLS = PACKAGE / "tools"
# The modules that each hold a tool (the registry in tools/__init__.py and the worker processes run them).
TOOL_MODULES = {"find_entities", "follow", "relations", "search", "sparql", "traverse", "verify"}
REGISTRY = {"__init__", "processes"}


def _tools_imported(path: Path) -> set[str]:
    """The modules of kg_mcp.tools that `path` imports, anywhere in it (a lazy import inside a function too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[2] for a in node.names if a.name.startswith("kg_mcp.tools."))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "kg_mcp.tools":
                names.update(a.name for a in node.names if (TOOLS / f"{a.name}.py").exists())
            elif node.module.startswith("kg_mcp.tools."):
                names.add(node.module.split(".")[2])
    return names - {"__init__"}


def _tools_graph() -> dict[str, set[str]]:
    return {p.stem: _tools_imported(p) - {p.stem} for p in TOOLS.glob("*.py")}


def test_no_tool_imports_another():
    """A page is rendered by kg_mcp.tools.pages, shared helpers live below the tools: a tool module
    imports helpers only (the registry and the worker processes import the tools)."""
    graph = _tools_graph()
    assert TOOL_MODULES <= set(graph)
    offenders = {name: sorted(imported & TOOL_MODULES) for name, imported in graph.items() if name not in REGISTRY}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_tools_package_has_no_import_circle():
    graph = _tools_graph()
    circles = []

    def visit(name: str, path: list[str]) -> None:
        for imported in sorted(graph.get(name, ())):
            if imported in path:
                circles.append(path[path.index(imported):] + [imported])
            elif len(path) < len(graph):
                visit(imported, path + [imported])

    for start in sorted(graph):
        visit(start, [start])
    assert circles == []
