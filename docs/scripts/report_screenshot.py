"""Make docs/evaluation/report.png: a real `kg-mcp report` page of two scripted runs, drawn by Chromium.

Two Search-on-Graph runs on the first 12 questions of MetaQA 2-hop dev (`--tools paper` and
`--tools batched`) go through `kg-mcp eval` itself, in this process, with a scripted model
registered under the name `scripted:gold-path` that walks each question's gold relation path
(the stand-in the tests use, `tests/test_sog.py`). Then `kg-mcp report` writes the page and
headless Chromium renders it to a PNG. The figures on it show the plumbing, not a model's accuracy.

    .venv/bin/python docs/scripts/report_screenshot.py [--data ../shared/data] [--out docs/evaluation/report.png]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "evaluation" / "report.png")
    options = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_sog import batched_policy, gold_path_policy  # the tests' gold-path stand-ins

    from kg_mcp.agents.evaluation.benchmarks import load_benchmark
    from kg_mcp.agents.models import register_model
    from kg_mcp.agents.models.scripted import ScriptedModel
    from kg_mcp.cli import main as cli

    questions = load_benchmark("metaqa-2hop", options.data).questions[:QUESTIONS]
    paths = {q.text: list(q.gold_path) for q in questions}

    def walker(batched: bool):
        def policy(messages, tools):
            text = next(t for t in paths if messages[1].content.startswith(f"Question: {t} "))
            return (batched_policy if batched else gold_path_policy)(paths[text])(messages, tools)

        return policy

    register_model("scripted:gold-path", lambda name, **_: ScriptedModel(walker(False), name="gold-path"))
    register_model("scripted:gold-path-batched", lambda name, **_: ScriptedModel(walker(True), name="gold-path-batched"))
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        runs = []
        for mode, model in (("paper", "scripted:gold-path"), ("batched", "scripted:gold-path-batched")):
            out = work / f"sog-{mode}"
            cli(["eval", "--benchmark", "metaqa-2hop", "--data", str(options.data), "--limit", str(QUESTIONS),
                 "--agent", "sog", "--tools", mode, "--no-schema", "--model", model,
                 "--store-cache", str(work / "stores"), "--out", str(out)], standalone_mode=False)
            runs.append(str(out))
        page = work / "report" / "report.html"
        cli(["report", *runs, "--html", str(page)], standalone_mode=False)
        chromium = shutil.which("chromium") or sys.exit("Chromium is needed: apt-get install chromium")
        subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={work / 'profile'}", f"--screenshot={options.out}", "--window-size=1200,1500",
             page.as_uri()],
            capture_output=True, timeout=120, check=True,
        )
    print(f"wrote {options.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
