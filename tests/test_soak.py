"""A short soak (15 s) with the same checks as `python -m bench.soak` (10 minutes by default).

16 concurrent SDK clients over streamable HTTP against one `kg-mcp serve --transport http` on the
demo KG: zero errors, server memory within 10% after warm-up, file descriptors flat (and back to
the boot level once the clients are gone), nothing on the server's stdout, no traceback in its log.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.soak import format_report, run  # noqa: E402


@pytest.mark.timeout(180)  # 15 s of load, plus start and stop: a bound on hanging
def test_short_soak():
    report = run(minutes=15 / 60, clients=16, warmup_s=5)
    print("\n" + format_report(report))
    failed = [name for name, ok in report["checks"].items() if not ok]
    assert not failed, format_report(report)
    assert report["calls"] > 16 * 10 and report["sessions"] >= 16
