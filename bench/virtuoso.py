"""A private Virtuoso (Debian's virtuoso-opensource 7): own database, own ini, loopback ports.

The tests (tests/conftest.py) and the engine scale step (bench/scale_virtuoso.py) both start one.
`Virtuoso(root).start()` writes a virtuoso.ini derived from the packaged one into `root`, starts
`virtuoso-t` in the foreground on two free loopback ports (SQL and HTTP) and waits for the SPARQL
endpoint. `load(path, graph)` bulk-loads an N-Triples file with isql's `ld_dir` + `rdf_loader_run` and indexes
its literals for `bif:contains`;
`url(graph)` is the endpoint with that graph as its default graph, so several data sets share one
instance without seeing each other. `stop()` shuts it down.

`Virtuoso(root, stock=True)` runs the packaged ini as a user has it: only its ports and file paths
change (and DirsAllowed gains the data folder, for the bulk loader); its system graphs, row cap,
time limits and plugins stay as Debian ships them.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from pathlib import Path

PACKAGED_INI = Path("/etc/virtuoso-opensource-7/virtuoso.ini")
SERVER = "virtuoso-t"
ISQL = ("isql-vt", "isql")
INSTALL_HINT = (
    "Install it with: sudo apt-get install virtuoso-opensource (Debian/Ubuntu), or run `make test` as root."
)


def installed() -> str | None:
    """Why Virtuoso cannot run here, or None when it can."""
    if not shutil.which(SERVER):
        return f"Virtuoso ({SERVER}) is not installed. {INSTALL_HINT}"
    if not any(shutil.which(name) for name in ISQL):
        return f"Virtuoso's isql client (isql-vt) is not installed. {INSTALL_HINT}"
    return None


class Virtuoso:
    """`buffers` and `dirty_buffers` are Virtuoso's NumberOfBuffers / MaxDirtyBuffers (8 KB pages each):
    the defaults suit the tests' small files; a load of millions of triples wants far more.
    `niceness` lowers the server's CPU priority (a shared machine)."""

    def __init__(
        self,
        root: Path,
        *,
        sql_port: int,
        http_port: int,
        max_rows: int = 10_000,
        max_seconds: int = 30,
        buffers: int = 20_000,
        dirty_buffers: int = 15_000,
        niceness: int = 0,
        stock: bool = False,
    ):
        self.root = root
        self.stock = stock
        self.sql_port, self.http_port = sql_port, http_port
        self.max_rows, self.max_seconds = max_rows, max_seconds
        self.buffers, self.dirty_buffers, self.niceness = buffers, dirty_buffers, niceness
        self.process: subprocess.Popen | None = None
        self.isql = next(shutil.which(name) for name in ISQL if shutil.which(name))

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}/sparql"

    def url(self, graph: str) -> str:
        return f"{self.endpoint}?{urllib.parse.urlencode({'default-graph-uri': graph})}"

    def _write_ini(self) -> Path:
        ini = configparser.ConfigParser(strict=False, interpolation=None, inline_comment_prefixes=(";",))
        ini.optionxform = str  # Virtuoso's keys are case-sensitive
        ini.read(PACKAGED_INI)
        db = self.root
        ini["Database"].update(
            DatabaseFile=f"{db}/virtuoso.db",
            ErrorLogFile=f"{db}/virtuoso.log",
            LockFile=f"{db}/virtuoso.lck",
            TransactionFile=f"{db}/virtuoso.trx",
            xa_persistent_file=f"{db}/virtuoso.pxa",
        )
        ini["TempDatabase"].update(
            DatabaseFile=f"{db}/virtuoso-temp.db", TransactionFile=f"{db}/virtuoso-temp.trx"
        )
        if self.stock:  # ports and paths only
            allowed = ini["Parameters"].get("DirsAllowed", ".")
            ini["Parameters"].update(ServerPort=f"127.0.0.1:{self.sql_port}", DirsAllowed=f"{allowed}, {db}")
            ini["HTTPServer"].update(ServerPort=f"127.0.0.1:{self.http_port}")
            path = db / "virtuoso.ini"
            with path.open("w") as f:
                ini.write(f)
            return path
        ini["Parameters"].update(
            ServerPort=f"127.0.0.1:{self.sql_port}",
            DirsAllowed=f"., {db}",
            # Two CPU cores in CI: checkpoints are ours, and a query gets at most two threads.
            NumberOfBuffers=str(self.buffers),
            MaxDirtyBuffers=str(self.dirty_buffers),
            CheckpointInterval="0",
            ThreadsPerQuery="2",
        )
        ini["HTTPServer"].update(ServerPort=f"127.0.0.1:{self.http_port}", ServerRoot=str(db))
        ini["SPARQL"].update(ResultSetMaxRows=str(self.max_rows), MaxQueryExecutionTime=str(self.max_seconds))
        for section in ("Plugins", "URIQA"):  # the hosting plugins are not needed to serve SPARQL
            ini.remove_section(section)
        path = db / "virtuoso.ini"
        with path.open("w") as f:
            ini.write(f)
        return path

    def start(self, timeout: float = 60.0) -> Virtuoso:
        ini = self._write_ini()
        self.process = subprocess.Popen(
            [*self._nice(), SERVER, "+foreground", "+configfile", str(ini)],
            cwd=self.root,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"Virtuoso exited at start; see {self.root / 'virtuoso.log'}")
            try:
                self.sql("status();", timeout=5)
                return self
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"Virtuoso did not start within {timeout} s; see {self.root / 'virtuoso.log'}")

    def _nice(self) -> list[str]:
        """`nice` up to `niceness` (not on top of that of a bench already run under `nice`)."""
        more = self.niceness - os.nice(0)
        return ["nice", "-n", str(more)] if more > 0 else []

    def sql(self, statements: str, timeout: float | None = 120) -> str:
        done = subprocess.run(
            [
                self.isql,
                f"127.0.0.1:{self.sql_port}",
                "dba",
                "dba",
                "VERBOSE=OFF",
                "ERRORS=STDOUT",
                f"EXEC={statements}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        if "*** Error" in done.stdout:
            raise RuntimeError(f"isql: {done.stdout.strip()[:500]}")
        return done.stdout

    def load(self, source: Path, graph: str, timeout: float | None = 120) -> tuple[float, float]:
        """Bulk-load one N-Triples file into `graph` (the file is linked into the allowed directory).

        Returns the seconds of the load (with its checkpoint) and of the text index that follows."""
        folder = self.root / "load" / re.sub(r"\W", "_", graph)
        folder.mkdir(parents=True)
        (folder / "data.nt").symlink_to(source.resolve())
        started = time.perf_counter()
        self.sql(f"ld_dir('{folder}', 'data.nt', '{graph}'); rdf_loader_run(); checkpoint;", timeout=timeout)
        loaded = time.perf_counter()
        # Virtuoso indexes every literal's words for bif:contains (its default rule), but only in a batch
        # job run every few minutes; a user runs that job once after a load, and so do we.
        self.sql("DB.DBA.VT_INC_INDEX_DB_DBA_RDF_OBJ(); checkpoint;", timeout=timeout)
        indexed = time.perf_counter()
        # The loader records a file it could not parse in LOAD_LIST instead of failing the call.
        failed = f"FROM DB.DBA.LOAD_LIST WHERE ll_graph = '{graph}' AND ll_error IS NOT NULL;"
        if int(self.sql(f"SELECT COUNT(*) {failed}").split()[-1]):  # isql prints a header, then the value
            raise RuntimeError(
                f"Virtuoso could not load {source}: {self.sql(f'SELECT ll_error {failed}')[:500]}"
            )
        return loaded - started, indexed - loaded

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self.sql("shutdown;", timeout=30)
        except (subprocess.SubprocessError, RuntimeError):
            pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            self.process.wait(timeout=10)
