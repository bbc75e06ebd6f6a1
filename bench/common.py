"""What every measure shares: rows of the result table, paired timing, subprocess helpers."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


@dataclass
class Row:
    measure: str
    ours: float
    baseline: float
    unit: str
    goal: str  # e.g. "<= 0.02" or ">= 0.8": a bound on ratio = ours / baseline; "": a ratio reported, no goal
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.baseline if self.baseline else float("inf")

    @property
    def passed(self) -> bool | None:
        if not self.goal:
            return None
        op, bound = self.goal.split()
        return self.ratio <= float(bound) if op == "<=" else self.ratio >= float(bound)


def paired_medians(baseline: Callable[[int], object], ours: Callable[[int], object], n: int, warmup: int = 5) -> tuple[float, float]:
    """Median seconds of each, calls alternated so both see the same machine load (it is shared)."""
    for i in range(warmup):
        baseline(i)
        ours(i)
    xs, ys = [], []
    for i in range(n):
        started = time.perf_counter()
        baseline(i)
        middle = time.perf_counter()
        ours(i)
        ended = time.perf_counter()
        xs.append(middle - started)
        ys.append(ended - middle)
    return statistics.median(xs), statistics.median(ys)


def bulk_load_code(source: Path, target: Path, compact_note: Path | None = None) -> str:
    """Python for `timed_child`: pyoxigraph's bare `Store.bulk_load` of an N-Triples file, the loads' baseline.

    With `compact_note`, the store is then compacted (`optimize`, as `kg-mcp load` does), and the
    compaction's seconds are written there: a baseline that leaves the store as `kg-mcp load` does.
    """
    # Absolute paths: the child runs in the repository (timed_child), the caller maybe elsewhere.
    source, target = Path(source).resolve(), Path(target).resolve()
    compact_note = compact_note and Path(compact_note).resolve()
    code = (
        f"import time, pyoxigraph as ox; s = ox.Store({str(target)!r}); s.bulk_load(path={str(source)!r}, "
        "format=ox.RdfFormat.N_TRIPLES)"
    )
    if compact_note:
        code += (
            f"; t = time.perf_counter(); s.optimize(); "
            f"open({str(compact_note)!r}, 'w').write(str(time.perf_counter() - t))"
        )
    return code


def load_code(source: Path, target: Path, *, name_index: bool = True, index_note: Path | None = None) -> str:
    """Python for `timed_child`: `kg-mcp load`'s code path, writing to `index_note` (if given) how
    long the load spent on the name index."""
    source, target = Path(source).resolve(), Path(target).resolve()  # the child runs in the repository
    index_note = index_note and Path(index_note).resolve()
    code = (
        f"from kg_mcp.loading import load_sources; r = load_sources([{str(source)!r}], {str(target)!r}, "
        f"progress=False, name_index={name_index})"
    )
    return code + (f"; open({str(index_note)!r}, 'w').write(str(r.index_seconds))" if index_note else "")


def timed_child(code: str) -> tuple[float, float]:
    """Run `python -c code` in a fresh process: (wall seconds, its peak RSS in MB)."""
    seconds, peak_mb, _ = child_usage(code)
    return seconds, peak_mb


def child_usage(code: str) -> tuple[float, float, float]:
    """Run `python -c code` in a fresh process: (wall seconds, its peak RSS in MB, its processor
    seconds, user and system, all its threads: what it cost, however loaded the machine was)."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    if status != 0:
        raise RuntimeError(f"child process failed ({status}): {code}")
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def triples_count(text: str) -> int:
    """`20000`, `2e4`, `1M` or `500k`."""
    scale = {"k": 1_000, "M": 1_000_000}.get(text.strip()[-1:], 1)
    return int(float(text.strip().rstrip("kM")) * scale)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def kg_mcp(*args: str) -> list[str]:
    return [sys.executable, "-m", "kg_mcp", *args]


def start(command: list[str], **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, **kwargs)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def print_table(rows: list[Row], header: str) -> None:
    print(header)
    widths = (44, 12, 12, 8, 9, 6)
    names = ("measure", "ours", "baseline", "ratio", "goal", "pass")
    print("  ".join(n.ljust(w) for n, w in zip(names, widths)))
    for r in rows:
        cells = (r.measure, f"{r.ours:.4g} {r.unit}", f"{r.baseline:.4g} {r.unit}", f"{r.ratio:.3f}", r.goal, {True: "yes", False: "NO", None: "-"}[r.passed])
        print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))
        if r.note:
            print(f"    {r.note}")
