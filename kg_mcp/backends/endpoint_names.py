"""The name index of a SPARQL endpoint without text search: the same index as a local store's
(kg_mcp.names), filled from the endpoint's labels and aliases by paged queries and cached on disk
per endpoint and graphs.

Pages are `LIMIT`/`OFFSET` slices of one query per predicate, without `ORDER BY` (which would make
the engine sort every label for every page): an engine answers the same query over unchanged data
in the same order, which Oxigraph does. Pages grow while the engine answers them quickly (each
page's OFFSET makes it skip the rows before), and a page the engine refuses or times out on is
asked again at half the size. Each entity's degree is counted too, in batches, so a
lookup ranks its candidates without a query per candidate.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.calls import deadline
from kg_mcp.backends import graph_access
from kg_mcp.backends.name_degrees import count_degrees, whole_degrees
from kg_mcp.errors import EndpointError
from kg_mcp.names.build import (
    FORMAT_VERSION,
    finish_index,
    insert_names,
    read_index_meta,
    set_degrees,
    start_index,
    written_whole,
)
from kg_mcp.names.index import NameIndex
from kg_mcp.names.pairs import ensure_word_pairs
from kg_mcp.observability import metrics
from kg_mcp.profiles import Profile
from kg_mcp.settings import cache_dir

log = logging.getLogger(__name__)

PAGE = 20_000  # label rows of the first query
MAX_PAGE = 320_000  # a page answered within QUICK_PAGE_S doubles, up to this: fewer rows skipped by OFFSET
QUICK_PAGE_S = 2.0
_SMALLEST_PAGE = 500  # a page refused at this size ends the build
DEGREE_BATCH = 200  # entities whose degrees one query counts (an endpoint's request stays small)
BUILT_BY_COMMAND = "kg-mcp index"
_LOOKUP_RESERVE_S = 2.0  # of a call's time limit, kept for the lookup after a wait for the index

Solutions = Callable[[str], Sequence]


def index_key(url: str, graphs: Sequence[str]) -> str:
    """The cache key of an endpoint read through `graphs` (empty: all of it); their order does not matter.

    >>> index_key("http://x/sparql", ["urn:b", "urn:a"]) == index_key("http://x/sparql", ["urn:a", "urn:b"])
    True
    """
    text = "\n".join([url, *sorted(set(graphs))])
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def endpoint_index_path(url: str, graphs: Sequence[str]) -> Path:
    return cache_dir() / "names" / f"{index_key(url, graphs)}.sqlite"


def _languages_filter(languages: Sequence[str]) -> str:
    wanted = ", ".join(f'"{lang}"' for lang in sorted(set(languages) | {""}))
    return f"isLiteral(?o) && LANG(?o) IN ({wanted})"


def count_labels(solutions: Solutions, predicates: Sequence[str], languages: Sequence[str], cap: int) -> int:
    """Label and alias triples in `languages`, counted up to `cap` + 1 (more means "more than cap")."""
    total = 0
    for predicate in predicates:
        left = cap + 1 - total
        query = (
            f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT ?o WHERE {{ ?s <{ox.NamedNode(predicate).value}> ?o . "
            f"FILTER({_languages_filter(languages)}) }} LIMIT {left} }}"
        )
        for solution in solutions(query):
            total += int(solution["n"].value) if solution["n"] is not None else 0
        if total > cap:
            break
    return total


@dataclass
class BuildReport:
    names: int  # rows of the index (a name with punctuation inside words makes two)
    labels: int  # label and alias triples read
    entities: int
    queries: int
    seconds: float
    size_bytes: int

    def summary(self) -> str:
        return (
            f"{self.labels:,} labels and aliases of {self.entities:,} entities read in {self.queries:,} queries, "
            f"{self.seconds:.1f} s; index {self.size_bytes / 2**20:,.1f} MB"
        )


class BuildStopped(Exception):
    """The build was asked to stop (the backend closed)."""


class _Counter:
    """`solutions`, counting the queries it runs, and refusing to run more once `stop` is set."""

    def __init__(self, solutions: Solutions, stop: threading.Event | None = None):
        self._solutions = solutions
        self._stop = stop
        self.queries = 0

    def __call__(self, query: str) -> Sequence:
        if self._stop is not None and self._stop.is_set():
            raise BuildStopped()
        self.queries += 1
        return self._solutions(query)


def build_endpoint_index(
    solutions: Solutions,
    path: Path,
    *,
    url: str,
    graphs: Sequence[str],
    profile: Profile,
    languages: Sequence[str],
    degree_cap: int,
    counted: int | None = None,
    by: str = "kg-mcp serve",
    progress: bool = True,
    stop: threading.Event | None = None,
    read: list[int] | None = None,
    page: int = PAGE,
    whole_degrees: bool = False,
) -> BuildReport:
    """Write the endpoint's name index to `path`, replacing an older one only once it is complete.

    `stop`, once set, ends the build at its next query (BuildStopped); `read` counts the labels read so far.
    With `whole_degrees` (a small KG), degrees are counted by one aggregate query per direction over
    the whole endpoint, on a thread of their own while the labels are read, rather than in batches
    of entities afterwards (batches again if the engine refuses it).
    """
    started = time.perf_counter()
    run = _Counter(solutions, stop)
    path.parent.mkdir(parents=True, exist_ok=True)
    whole = _Whole(run, profile, degree_cap) if whole_degrees else None
    with written_whole(path) as connection:
        start_index(connection)
        read = read if read is not None else [0]
        read[0] = 0
        names = insert_names(connection, _labels(run, profile, languages, counted, progress, read, page))
        entities = [e for (e,) in connection.execute("SELECT DISTINCT entity FROM names ORDER BY entity")]
        counts = whole.result() if whole is not None else None
        if counts is not None:
            degrees = [(e, counts.get(e, 0)) for e in entities]
        else:
            degrees = count_degrees(run, profile, entities, degree_cap, DEGREE_BATCH, progress)
        set_degrees(connection, degrees)
        extra = {
            "endpoint": url,
            "graphs": sorted(set(graphs)),
            "built_at": time.time(),
            "built_by": by,
            "labels": read[0],
            "counted": counted,
            "profile": profile.name,
            "degree_cap": degree_cap,
        }
        finish_index(
            connection, profile.label_predicates, profile.alias_predicates, languages, "", names, extra=extra
        )
    report = BuildReport(names, read[0], len(entities), run.queries, time.perf_counter() - started, path.stat().st_size)
    log.info("name index of %s: %s", url, report.summary())
    return report


class _Whole:
    """`whole_degrees` on a thread of its own; `result` waits for it (and raises what it raised)."""

    def __init__(self, run: Solutions, profile: Profile, cap: int):
        self._counts: dict[str, int] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._count, args=(run, profile, cap), name="kg-mcp-degrees", daemon=True)
        self._thread.start()

    def _count(self, run, profile, cap) -> None:
        try:
            self._counts = whole_degrees(run, profile, cap)
        except BaseException as e:  # noqa: BLE001 - handed to the building thread by result()
            self._error = e

    def result(self) -> dict[str, int] | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._counts


def _labels(
    run: _Counter, profile: Profile, languages: Sequence[str], counted: int | None, progress: bool, read: list[int],
    first_page: int,
) -> Iterator[tuple[str, str, int]]:
    predicates = [(p, 0) for p in profile.label_predicates]
    predicates += [(p, 1) for p in profile.alias_predicates if p not in profile.label_predicates]
    with _bar("endpoint labels", counted, progress) as bar:
        for predicate, alias in predicates:
            pattern = f"?s <{ox.NamedNode(predicate).value}> ?o . FILTER(isIRI(?s) && {_languages_filter(languages)})"
            offset, page = 0, first_page
            while True:
                query = f"SELECT ?s ?o WHERE {{ {pattern} }} LIMIT {page} OFFSET {offset}"
                started = time.perf_counter()
                try:
                    rows = run(query)
                except EndpointError:
                    if page <= _SMALLEST_PAGE:
                        raise
                    page //= 2
                    log.info("a page of %d labels failed; asking for %d", page * 2, page)
                    continue
                # An engine may cut answers at its own row limit: the next page starts after what came.
                if not rows:
                    break
                for solution in rows:
                    subject, literal = solution["s"], solution["o"]
                    if isinstance(subject, ox.NamedNode) and isinstance(literal, ox.Literal):
                        yield subject.value, literal.value, alias
                offset += len(rows)
                read[0] += len(rows)
                bar.update(len(rows))
                # Each page makes the engine skip the rows before it: the fewer pages, the less skipped.
                if len(rows) == page and time.perf_counter() - started < QUICK_PAGE_S:
                    page = min(page * 2, MAX_PAGE)


def _bar(what: str, total: int | None, progress: bool) -> tqdm:
    return tqdm(desc=what, total=total, unit=" rows", unit_scale=True, file=sys.stderr, disable=None if progress else True)


# --- which index to use ---------------------------------------------------------------------------


@contextmanager
def _one_build(path: Path, stop: threading.Event) -> Iterator[bool]:
    """Hold the lock of `path`'s build (a file beside it, locked by the OS and let go when the process
    ends); yields whether another process held it first (then its index is there, or it failed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        waited = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if stop.is_set():
                    raise BuildStopped() from None
                waited = True
                time.sleep(0.2)
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class EndpointIndex:
    index: NameIndex
    built_at: float
    built_by: str

    def age_text(self, now: float | None = None) -> str:
        """How old the index is, in words.

        >>> EndpointIndex(None, 0.0, "").age_text(now=90.0), EndpointIndex(None, 0.0, "").age_text(now=3 * 86400.0)
        ('built 2 min ago', 'built 3.0 days ago')
        """
        seconds = max(0.0, (time.time() if now is None else now) - self.built_at)
        if seconds < 60:
            return "built just now"
        if seconds < 3600:
            return f"built {max(1, round(seconds / 60))} min ago"
        if seconds < 2 * 86400:
            return f"built {seconds / 3600:.1f} h ago"
        return f"built {seconds / 86400:.1f} days ago"


def fits(meta: dict | None, url: str, graphs: Sequence[str], profile: Profile, languages: Sequence[str]) -> bool:
    """Whether the index recorded in `meta` was built by this kg-mcp for this endpoint, graphs and settings."""
    return bool(meta) and meta == {
        **meta,
        "version": FORMAT_VERSION,
        "endpoint": url,
        "graphs": sorted(set(graphs)),
        "languages": list(languages),
        "label_predicates": list(profile.label_predicates),
        "alias_predicates": list(profile.alias_predicates),
    }


def young(meta: dict, max_age_days: float) -> bool:
    """Whether the index recorded in `meta` was built within `max_age_days`."""
    return time.time() - float(meta.get("built_at", 0)) <= max_age_days * 86400


def open_index(path: Path, read_ahead: bool = False) -> EndpointIndex:
    meta = read_index_meta(path) or {}
    ensure_word_pairs(path)
    return EndpointIndex(NameIndex.open(path, read_ahead=read_ahead), float(meta.get("built_at", 0)), str(meta.get("built_by", "")))


class EndpointNames:
    """Which name index an endpoint's lookups use, and its build in the background.

    At open, only the cache is read (no request): an index that fits the endpoint, graphs and
    settings is used if it is younger than `name_index_max_age_days`, or whatever its age if
    `kg-mcp index` built it (with a warning past that age). Otherwise `begin` (at server start,
    else at the first lookup) starts a thread that asks whether the engine has a text search of
    its own and, if not, counts the labels and aliases and, up to `endpoint_index_max_labels`,
    builds the index. One build per endpoint and graphs runs on a machine at a time (a lock file
    beside the cache): a second server waits for the first one's index and opens it. With `locks`
    (kg_mcp.state, set by `serve`), one replica of a team builds at a time: the others answer with
    label queries meanwhile and take the index file when it appears in the cache they share.

    A lookup that comes while a small index is being built (up to `endpoint_index_wait_labels`
    labels: seconds away) waits for it, until the build is `name_index_wait_s` old and within the
    call's own time limit, and says so; lookups during a bigger build use label queries. A failed
    build leaves the previous index file as it was.
    """

    def __init__(self, backend, settings, *, graphs: Sequence[str] | None = None):
        """`graphs`: the graph set of a --graph-access scope, whose index is built reading those graphs
        only (None: the server's --graph, or the endpoint as it answers)."""
        self._backend = backend
        self._settings = settings
        self.url = backend.url
        self._graph_set = list(graphs) if graphs is not None else None
        self.graphs = list(settings.graphs) if graphs is None else list(graphs)
        self.path = endpoint_index_path(self.url, self.graphs)
        self.current: EndpointIndex | None = None
        self.note = ""  # why there is no index, or how far its build is
        self.small = False  # a build a lookup waits for
        self._read = [0]
        self._counted: int | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._begun_at = 0.0
        self._decided = threading.Event()  # whether a build runs, and whether it is small, is known
        self._done = threading.Event()  # the thread has ended (with an index or without)
        self._stop = threading.Event()
        self.locks = None  # kg_mcp.state.SharedState: the build lock shared by replicas
        self._lease = None
        meta = read_index_meta(self.path)
        if fits(meta, self.url, self.graphs, backend.profile, settings.languages):
            recent = young(meta, settings.name_index_max_age_days)
            if meta.get("built_by") == BUILT_BY_COMMAND or recent:
                if not recent:
                    log.warning("the name index of %s is older than %s days: rebuild it with kg-mcp index --sparql %s "
                                "--rebuild", self.url, settings.name_index_max_age_days, self.url)
                self.current = open_index(self.path, self._settings.warm_name_index)

    def begin(self) -> None:
        """Prepare the index in the background, once: at server start, or at the first lookup."""
        with self._lock:
            if self.current is not None or self._thread is not None:
                return
            if self.locks is not None:
                if self._built_elsewhere():
                    return
                lease = self.locks.try_lock(f"name-index:{index_key(self.url, self.graphs)}")
                if lease is None:  # another replica builds: asked again at the next lookup
                    if not self.note:
                        metrics.NAME_INDEX_BUILDS.labels("endpoint", "elsewhere").inc()
                    self.note = "the name index from the endpoint's labels is being built by another replica"
                    return
                if self._built_elsewhere():  # finished between the look and the lock
                    lease.release()
                    return
                self._lease = lease
            self._begun_at = time.monotonic()
            self.note = "the name index from the endpoint's labels is being built"
            self._thread = threading.Thread(target=self._prepare, name="kg-mcp-endpoint-names", daemon=True)
            self._thread.start()

    def start(self) -> str:
        """`begin`, and what a lookup answering without the index says about it (see `status`)."""
        self.begin()
        return self.status()

    def _built_elsewhere(self) -> bool:
        """Take an index another replica built into the shared cache, if one fits and is young."""
        meta = read_index_meta(self.path)
        if meta and fits(meta, self.url, self.graphs, self._backend.profile, self._settings.languages) and young(
                meta, self._settings.name_index_max_age_days):
            self.current, self.note = open_index(self.path, self._settings.warm_name_index), ""
            return True
        return False

    def status(self) -> str:
        """What a lookup without the index says about it ('' when there is nothing to say)."""
        if self._thread is not None and self._thread.is_alive() and self._counted:
            return f"{self.note} ({self._read[0]:,} of {self._counted:,} labels read)"
        return self.note

    def wait_for_small(self) -> float:
        """Wait while a small index is being built (see the class docstring); returns the seconds waited."""
        if self.current is not None or self._thread is None or self._done.is_set():
            return 0.0
        started = time.monotonic()
        end = self._begun_at + self._settings.name_index_wait_s
        left = deadline.left()
        if left is not None:  # the lookup itself needs a moment of the call's time too
            end = min(end, started + left - _LOOKUP_RESERVE_S)
        if self._decided.wait(max(0.0, end - time.monotonic())) and self.small:
            self._done.wait(max(0.0, end - time.monotonic()))
        return time.monotonic() - started

    def wait(self, timeout: float | None = None) -> EndpointIndex | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.current

    def _prepare(self) -> None:
        with graph_access.reading(self._graph_set):  # this thread reads the graphs the index is for
            self._prepare_here()

    def _prepare_here(self) -> None:
        try:
            # An engine with a text search of its own answers lookups with it: no index is built.
            if self._backend._text_engine() != "labels":
                self.note = ""
                return
            with _one_build(self.path, self._stop) as other:
                if other:  # another kg-mcp built it meanwhile: its index, if it fits
                    self._reopen()
                    return
                self._build()
        except BuildStopped:
            self.note = "the name index build was stopped"
        except (EndpointError, OSError, sqlite3.Error) as e:
            self._build_failed(e)
        finally:
            if self._lease is not None:
                self._lease.release()
            self._decided.set()
            self._done.set()

    def _reopen(self) -> None:
        meta = read_index_meta(self.path)
        if fits(meta, self.url, self.graphs, self._backend.profile, self._settings.languages):
            self.current, self.note = open_index(self.path, self._settings.warm_name_index), ""
        else:
            self.note = "another kg-mcp server's build of the name index did not finish"

    def _build(self) -> None:
        backend, settings, profile = self._backend, self._settings, self._backend.profile
        cap = settings.endpoint_index_max_labels
        counted = count_labels(
            backend._solutions, [*profile.label_predicates, *profile.alias_predicates], settings.languages, cap
        )
        if counted > cap:
            self.note = f"the endpoint has more than {cap:,} labels: its name index is built by kg-mcp index --sparql URL"
            log.warning("%s has more than %s labels and aliases: find_entities uses label queries there; "
                        "build its name index with kg-mcp index --sparql %s", self.url, f"{cap:,}", self.url)
            return
        self._counted = counted
        self.small = counted <= settings.endpoint_index_wait_labels
        self._decided.set()
        log.warning("building the name index of %s (%s labels and aliases; cached in %s)", self.url,
                    f"{counted:,}", self.path)
        with metrics.name_index_build("endpoint"):
            build_endpoint_index(
                backend._solutions, self.path, url=self.url, graphs=self.graphs, profile=profile,
                languages=settings.languages, degree_cap=settings.degree_cap, counted=counted, stop=self._stop,
                read=self._read, whole_degrees=self.small,
            )
        self.current = open_index(self.path, self._settings.warm_name_index)
        self.note = ""

    def _build_failed(self, error: Exception) -> None:
        profile, settings = self._backend.profile, self._settings
        if fits(read_index_meta(self.path), self.url, self.graphs, profile, settings.languages):
            self.current, self.note = open_index(self.path, self._settings.warm_name_index), ""  # the previous one, past its age
            log.warning("cannot rebuild the name index of %s (%s): the previous one is used", self.url, error)
            return
        self.note = "the name index could not be built"
        log.warning("cannot build the name index of %s (%s): find_entities uses label queries", self.url, error)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        if self.current is not None:
            self.current.index.close()
