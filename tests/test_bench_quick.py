"""The benchmark suite's quick mode runs end to end (CI keeps it working; it asserts no timings)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench(work, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, KG_MCP_BENCH_DIR=str(work))
    return subprocess.run(
        [sys.executable, "-m", "bench", "--quick", *args],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_quick_bench_prints_every_row(tmp_path):
    done = _bench(tmp_path, "--only", "hub,tokens,load,tls,agent")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("kg-mcp bench, quick mode")
    rows = [line for line in lines if re.match(r"^(hub survey|tokens per search|load |remote call over TLS|agent step)", line)]
    assert len(rows) == 7, done.stdout  # the load: without the name index, and the index's share
    for row in rows:
        ratio = float(re.split(r"\s{2,}", row)[3])
        assert 0 < ratio < float("inf"), row
        assert row.rstrip().endswith(("yes", "NO"))


def test_scale_bench_at_tiny_sizes(tmp_path):
    """`--only scale` end to end on two small Freebase-shaped KGs: every row, each tool against its bare
    query cold and warm, the second size compared with the first."""
    done = _bench(tmp_path, "--only", "scale", "--scale-sizes", "20000,40000", "--scale-calls", "12")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("scale ")]
    # per size: the load, the name index's share of it, the disk's random read, then five tools on
    # random entities and on hubs and find_entities on typed names (11 cases), each against its bare
    # query cold and warm; at the second size, each against the first size in the same state
    assert [r.split(":")[0] for r in rows] == (
        ["scale 20k"] * 3 + ["scale 20k cold"] * 11 + ["scale 20k warm"] * 11
        + ["scale 40k"] * 3 + ["scale 40k cold"] * 11 + ["scale 40k warm"] * 11
        + ["scale 40k cold"] * 11 + ["scale 40k warm"] * 11
    ), done.stdout
    assert sum("find_entities (typed) / bare" in r for r in rows) == 4, done.stdout
    assert sum("load with the name index" in r for r in rows) == 2, done.stdout
    for row in rows:
        ratio = float(re.split(r"\s{2,}", row)[3])
        assert 0 < ratio < float("inf"), row
        # size ratios cold and the disk are reported without a goal; every other row has one
        unjudged = "disk, one 4 KiB read" in row or ("cold:" in row and "/ 20k" in row)
        assert row.rstrip().endswith("-" if unjudged else ("yes", "NO")), row
    assert "peak RSS ours" in done.stdout and "store on disk" in done.stdout
    # a drop leaves at most the few pages the freshly opened name index maps
    cached = [float(m) for m in re.findall(r"([\d.]+) of [\d,]+ MB cached after a drop", done.stdout)]
    assert len(cached) == 22 and max(cached) < 1, done.stdout
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".store") == [
        "freebase-20k.store",
        "freebase-40k.store",
    ]
    # --scale-reuse times the tools again on those stores, and loads nothing.
    again = _bench(tmp_path, "--only", "scale", "--scale-sizes", "20000,40000", "--scale-calls", "6", "--scale-reuse")
    assert again.returncode == 0, again.stderr[-3000:]
    reused = [line for line in again.stdout.splitlines() if line.startswith("scale ")]
    assert len(reused) == 1 + 22 + 1 + 44, again.stdout
    assert not any("load" in r.split("  ")[0] for r in reused), again.stdout
    missing = _bench(tmp_path, "--only", "scale", "--scale-sizes", "60000", "--scale-reuse")
    assert missing.returncode != 0 and "no store at" in missing.stderr


def test_scale_virtuoso_bench_at_a_tiny_size(tmp_path):
    """`--only scale-virtuoso` end to end at 20k triples: the load row, every compared tool, the mediator walk,
    and the Virtuoso database gone afterwards."""
    engines = tmp_path / "engines"
    done = _bench(tmp_path, "--only", "scale-virtuoso", "--scale-sizes", "20k", "--engine-dir", str(engines))
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("scale virtuoso 20k: ")]
    # the load, then four tools (find_entities is not compared) on random entities and on hubs
    assert len(rows) == 1 + 2 * 4, done.stdout
    assert "load (triples/s)" in rows[0] and "NumberOfBuffers 340,000" in done.stdout
    for row in rows:
        ratio = float(re.split(r"\s{2,}", row)[3])
        assert 0 < ratio < float("inf"), row
    assert "two hops through a mediator" in done.stderr and "unnamed mediator node" in done.stderr
    assert "find_entities (random) through Virtuoso (not compared)" in done.stderr
    assert list(engines.iterdir()) == []  # the database and the baseline's scratch store are deleted
