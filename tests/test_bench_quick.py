"""The benchmark suite's quick mode runs end to end (CI keeps it working; it asserts no timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_quick_bench_prints_every_row(tmp_path):
    env = dict(os.environ, KG_MCP_BENCH_DIR=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "hub,tokens,load,tls,agent"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kg-mcp bench, quick mode")
    rows = [line for line in lines if re.match(r"^(hub survey|tokens per search|load |remote call over TLS|agent step)", line)]
    assert len(rows) == 6, done.stdout
    for row in rows:
        ratio = float(re.split(r"\s{2,}", row)[3])
        assert 0 < ratio < float("inf"), row
        assert row.rstrip().endswith(("yes", "NO"))
