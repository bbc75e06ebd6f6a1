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
