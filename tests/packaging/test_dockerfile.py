"""The repository's Dockerfile, checked without a container engine (none runs where the tests do):
a wheel builds from exactly the files its COPY lines take, and its command is the one the systemd
unit runs (`kg-mcp serve --transport http`), so an image built from it serves as a replica does."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_dockerfile_builds_from_what_it_copies(tmp_path):
    text = (ROOT / "Dockerfile").read_text()
    context = tmp_path / "context"
    context.mkdir()
    for line in re.findall(r"^COPY (.+)$", text, re.M):
        *sources, _ = line.split()
        for source in sources:
            path = ROOT / source
            if path.is_dir():
                shutil.copytree(path, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy(path, context / source)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(context), "--no-deps", "--quiet", "-w",
                            str(tmp_path / "dist")], capture_output=True, text=True, timeout=540, cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("kg_mcp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"kg_mcp/cli/__init__.py", "kg_mcp/demo/demo.ttl", "kg_mcp/agents/ask.py"} <= names
    assert any(n.startswith("kg_mcp/prompts/") for n in names)

    command = json.loads(re.search(r"^ENTRYPOINT (.+)$", text, re.M).group(1))
    unit = (ROOT / "deploy" / "systemd" / "kg-mcp@.service").read_text()
    served = re.search(r"^ExecStart=\S+ (.+)$", unit, re.M).group(1).split()
    assert command == ["kg-mcp", *served[:3]] == ["kg-mcp", "serve", "--transport", "http"]
    assert json.loads(re.search(r"^CMD (.+)$", text, re.M).group(1))[::2] == ["--host", "--port"]
    assert "USER kg-mcp" in text  # not root, as the unit's User=
