"""One evaluation run's folder: what was run, what finished, and a trace per answer.

    DIR/run.json        the run's settings (benchmark, agent, models, selection, KG) and the KG's
                        kind, size and profile as its server told them at the start; a resumed run
                        must match the settings
    DIR/results.jsonl   one JSON line per finished (question, repeat), appended as each finishes
    DIR/errors.jsonl    runs that failed (the model or the KG raised); retried on resume
    DIR/traces/         QUESTION-rREPEAT.jsonl, the driver's trace (report writes .html beside it)

Lines are written whole and flushed to disk one at a time, so a killed run loses at most the
answer in flight; a torn last line (killed mid-write) is cut off when the folder is reopened.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from kg_mcp.errors import ConfigError

# run.json keys that must agree for a run to resume in the same folder
IDENTITY = ("benchmark", "agent", "model", "supervisor", "questions_file")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def trace_name(question_id: str, repeat: int) -> str:
    """A file-name-safe stem for one answer's trace.

    >>> trace_name("1-hop-dev-0", 2), trace_name("a/b c", 0)
    ('1-hop-dev-0-r2', 'a_b_c-r0')
    """
    return f"{_UNSAFE.sub('_', question_id)}-r{repeat}"


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.manifest_path = self.path / "run.json"
        self.results_path = self.path / "results.jsonl"
        self.errors_path = self.path / "errors.jsonl"
        self.traces = self.path / "traces"

    def exists(self) -> bool:
        return self.manifest_path.is_file()

    def manifest(self) -> dict[str, Any]:
        if not self.exists():
            raise ConfigError(f"{self.path} holds no evaluation run (no run.json).")
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def start(self, manifest: dict[str, Any]) -> None:
        """Create the folder, or check that the run in it is the same run (then it resumes)."""
        if self.exists():
            old = self.manifest()
            differ = [k for k in IDENTITY if old.get(k) != manifest.get(k)]
            if differ:
                said = ", ".join(f"{k}: {old.get(k)!r} there, {manifest.get(k)!r} now" for k in differ)
                raise ConfigError(f"{self.path} holds another run ({said}). Use another --out, or the same settings to resume.")
            return
        self.traces.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    def record(self, key: str, value: Any) -> None:
        """Add `key` to run.json (what a run learns at its start: the KG's size), written whole."""
        manifest = {**self.manifest(), key: value}
        partial = self.manifest_path.with_suffix(".json.partial")
        partial.write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(partial, self.manifest_path)

    def repair(self) -> None:
        """Cut a torn last line (a run killed while writing it)."""
        if not self.results_path.is_file():
            return
        with self.results_path.open("rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)

    def records(self) -> list[dict[str, Any]]:
        """Finished answers, first record of each (question, repeat), in the order they finished."""
        if not self.results_path.is_file():
            return []
        seen, out = set(), []
        for line in self.results_path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn line; `repair` removes it before a run appends
            key = (record.get("question_id"), record.get("repeat"))
            if key not in seen:
                seen.add(key)
                out.append(record)
        return out

    def done(self) -> set[tuple[str, int]]:
        return {(r["question_id"], r["repeat"]) for r in self.records()}

    def _append(self, path: Path, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())

    def append(self, record: dict[str, Any]) -> None:
        self._append(self.results_path, record)

    def append_error(self, record: dict[str, Any]) -> None:
        self._append(self.errors_path, record)

    def errors(self) -> list[dict[str, Any]]:
        if not self.errors_path.is_file():
            return []
        out = []
        for line in self.errors_path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # torn by a kill
        return out

    def trace_path(self, question_id: str, repeat: int) -> Path:
        return self.traces / f"{trace_name(question_id, repeat)}.jsonl"
