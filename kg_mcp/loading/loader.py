"""``kg-mcp load``: stream sources of any supported format into an Oxigraph store, atomically."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.hubs import DEFAULT_THRESHOLD, STATS_GRAPH, HubSampler, record_hubs
from kg_mcp.loading.atomic import exclusive_load, recover_interrupted_swap, remove_stale_staging, staged_store
from kg_mcp.loading.blank_labels import may_hold_blank_nodes
from kg_mcp.loading.errors import BadLines, LoadError
from kg_mcp.loading.json_dump import read_wikidata_json
from kg_mcp.loading.jsonld import Contexts, read_jsonld
from kg_mcp.loading.owl_files import OWL_FORMATS, read_owl
from kg_mcp.loading.rdf_files import blame_line, bulk_load_lines, read_rdf_document, read_rdf_lines, syntax_reason
from kg_mcp.loading.report import LoadReport, SourceReport
from kg_mcp.loading.sources import QUAD_FORMATS, Format, check_readable, detect_format, open_source
from kg_mcp.loading.text_triples import TextMinter, read_text_triples
from kg_mcp.names import index_path
from kg_mcp.names.scan import SCANNED_FILE, NameScan
from kg_mcp.names.store_index import build_store_index, graph_set_indexes, store_profile, store_stamp
from kg_mcp.names.warm import warm
from kg_mcp.namespaces import DEFAULT_BASE_IRI, ENTITY_PATH, ENTITY_PREFIX, META_GRAPH, RELATION_PATH
from kg_mcp.settings import Settings, graph_iri_problem
from kg_mcp.store_meta import named_data_graphs, read_meta, write_meta

log = logging.getLogger(__name__)


def load_sources(
    sources: Sequence[str | Path],
    store_dir: str | Path,
    *,
    format: str | None = None,
    base_iri: str = DEFAULT_BASE_IRI,
    skip_bad: bool = False,
    progress: bool = True,
    hub_threshold: int = DEFAULT_THRESHOLD,
    optimize: bool = True,
    languages: Sequence[str] | None = None,
    name_index: bool = True,
    graph: str | None = None,
    contexts: Mapping[str, str | Path] | None = None,
    grant_sets: Callable[[list[str]], Iterable[Sequence[str]]] | None = None,
) -> LoadReport:
    """Load ``sources`` into the Oxigraph store at ``store_dir`` (created if missing): into its
    default graph, or into the named ``graph`` (its IRI).

    All or nothing: on any error or interruption the store stays exactly as it was. Raises
    LoadError for unreadable, unrecognised or malformed sources (malformed lines of line-based
    formats are skipped and counted instead when ``skip_bad``). Nodes with at least
    ``hub_threshold`` edges in one direction get predicate statistics (kg_mcp.hubs);
    ``optimize`` compacts the store, after the triples and at the end (see `_compact`). The store's
    name index (labels and aliases in ``languages``, default the settings') is rebuilt with it,
    unless not ``name_index`` (then the store gets one when first opened), and so is the index of
    ``graph`` and of every graph set the store had one of (kg_mcp.names.store_index), and of
    every set ``grant_sets`` gives for the store's named graphs after the load (the graph sets a
    --graph-access file can give a caller). Hub statistics describe the default graph: a load into
    a named graph records none.

    Each source file's blank nodes are its own (kg_mcp.loading.blank_labels). A JSON-LD source's
    remote contexts are read from the local copies in ``contexts`` ({URL as written: file}) or
    those kg-mcp ships, never from the network (kg_mcp.loading.jsonld).
    """
    started = time.perf_counter()
    store_dir = Path(store_dir)
    if isinstance(sources, (str, Path)):  # one path, not a sequence of its characters
        sources = [sources]
    plan = [(Path(s), detect_format(s, format)) for s in sources]
    if not plan:
        raise LoadError(None, None, "no sources to load")
    for path, fmt in plan:
        check_readable(path)
        if graph is not None and fmt.name in QUAD_FORMATS:
            raise LoadError(path, None, f"{fmt.name} names the graph of each statement itself: load it without --graph")
    if graph is not None and (problem := graph_iri_problem(graph)) is not None:
        raise LoadError(None, None, f"--graph {problem}")
    try:
        ox.NamedNode(base_iri + ENTITY_PATH)
    except ValueError as e:
        raise LoadError(None, None, f"invalid base IRI {base_iri!r} ({e})") from None
    json_contexts = Contexts(contexts)
    json_contexts.check()

    recover_interrupted_swap(store_dir)
    with exclusive_load(store_dir):
        remove_stale_staging(store_dir)
        graph_sets = set(graph_set_indexes(store_dir)) | ({(graph,)} if graph else set())
        with staged_store(store_dir) as staging:
            store = ox.Store(str(staging))
            languages = languages or Settings().languages
            empty = next(store.quads_for_pattern(None, None, None), None) is None
            # The names scanned from the text are the default graph's only when it is loaded into.
            scanned = name_index and graph is None and empty
            scan = _name_scan(staging, plan, skip_bad, languages) if scanned else None
            try:
                report = _load_into(
                    store, plan, store_dir, base_iri, BadLines(skip_bad), progress, hub_threshold, scan, optimize, graph,
                    json_contexts, empty,
                )
                store.flush()
                if optimize:  # a second, short pass: what the hub records added, and what the first left
                    _compact(store)
                # Inside the staging copy: the swap below replaces store and name index together.
                if name_index:
                    report.names, report.index_seconds, report.names_read_from = _name_index(
                        store, staging, scan, languages, progress
                    )
                    if grant_sets is not None:
                        graph_sets |= {tuple(sorted(s)) for s in grant_sets(named_data_graphs(store))}
                    seconds, report.graph_indexes = _graph_set_indexes(store, staging, sorted(graph_sets), languages, progress)
                    report.index_seconds += seconds
                    # Its first pages were written early in a long load, and the store's files have
                    # pushed them out of the page cache since: read it in last, for the server that
                    # is started next (kg_mcp.names.warm; seconds at 100M triples).
                    reading = warm(index_path(staging)) if Settings().warm_name_index else None
                    if reading is not None:
                        reading.join()
                report.graph = graph
            except BaseException as error:
                # The traceback keeps the loader's frames, and with them this Store on the staging
                # copy: drop them so the Store closes now, not whenever the garbage collector runs
                # (RocksDB would refuse the next load into the same path in this process).
                traceback.clear_frames(error.__traceback__)
                raise
            finally:
                if scan is not None:
                    scan.close()
                del store  # closed before the directory is renamed or deleted
    report.seconds = time.perf_counter() - started
    log.info("%s", report.summary())
    return report


def _name_scan(staging: Path, plan, skip_bad: bool, languages) -> NameScan | None:
    """A scan for names in the N-Triples read into an empty store, when they are all it will hold;
    else None (other formats: the index is then built from the store)."""
    if skip_bad or any(fmt.name != "nt" for _, fmt in plan):
        return None
    # Its word indexes are built in a thread of their own, beside the compaction (NameScan.finish_guessed).
    return NameScan(sqlite3.connect(staging / SCANNED_FILE, check_same_thread=False), languages)


def _name_index(store: ox.Store, staging: Path, scan: NameScan | None, languages, progress) -> tuple[int, float, str]:
    """Finish the names scanned, or index the store's names; returns (names, seconds spent, "text" or "store")."""
    profile = store_profile(store)
    if scan is not None and scan.matches(profile):
        started = time.perf_counter()
        names = scan.finish(profile, store_stamp(store))
        scan.close()
        os.replace(staging / SCANNED_FILE, index_path(staging))
        return names, scan.waited + time.perf_counter() - started, "text"
    started = time.perf_counter()
    names = build_store_index(store, staging, profile=profile, languages=languages, progress=progress)
    return names, time.perf_counter() - started, "store"


def _graph_set_indexes(
    store: ox.Store, staging: Path, graph_sets: list[tuple[str, ...]], languages, progress
) -> tuple[float, list[tuple[tuple[str, ...], int]]]:
    """(Re)build the name index of each graph set (a load changes the store they were built from);
    returns the seconds spent and each set with its names."""
    started = time.perf_counter()
    profile = store_profile(store)
    built = []
    for graphs in graph_sets:
        names = build_store_index(store, staging, profile=profile, languages=languages, progress=progress, graphs=graphs)
        built.append((graphs, names))
    return time.perf_counter() - started, built


def _load_into(
    store, plan, store_dir, base_iri, bad, progress, hub_threshold, scan=None, optimize=True, graph=None,
    contexts=None, empty=False,
) -> LoadReport:
    """Load the sources of `plan` into `store` (`empty` if it holds no triple yet), then compact it
    and record its hubs."""
    started = time.perf_counter()
    blank_nodes_loaded = False  # as far as is known: True once a source may have held any
    entities = TextMinter(base_iri + ENTITY_PATH)
    relations = TextMinter(base_iri + RELATION_PATH)
    prefixes: dict[str, str] = {}
    reports = []
    sampler = HubSampler(hub_threshold)
    into = ox.NamedNode(graph) if graph else None
    with tqdm(unit="triples", unit_scale=True, file=sys.stderr, disable=None if progress else True) as bar:
        for number, (path, fmt) in enumerate(plan, 1):
            source_started, bad_before = time.perf_counter(), bad.count
            bar.set_description(path.name)
            if fmt.name == "nt" and not bad.skip:
                last = number == len(plan)
                triples, blank = _load_natively(store, path, fmt, base_iri, sampler, bar, scan, last, into)
                blank_nodes_loaded |= blank
            else:
                blank_nodes_loaded = True
                counter = [0]
                with open_source(path) as stream:
                    quads = _read(stream, path, fmt, base_iri, bad, entities, relations, prefixes, contexts or Contexts())
                    quads = sampler.sample_quads(quads)
                    store.bulk_extend(_counted(_into_graph(quads, into), counter, bar))
                triples = counter[0]
            seconds = time.perf_counter() - source_started
            reports.append(SourceReport(str(path), fmt.name, triples, bad.count - bad_before, seconds))
            log.debug("%s: %d triples in %.1fs", path, triples, seconds)
        if optimize:
            bar.set_description("compacting")
            _compact(store)
        hubs = 0
        if into is None:  # the records count the default graph's edges (kg_mcp.hubs)
            bar.set_description("hub statistics")
            outgoing, incoming = sampler.candidates()
            no_blank = empty and not blank_nodes_loaded
            hubs = record_hubs(store, outgoing, incoming, threshold=hub_threshold, no_blank_nodes=no_blank)

    text_loaded = any(fmt.name == "text" for _, fmt in plan)
    triples = sum(r.triples for r in reports)
    _update_meta(
        store, plan, prefixes, base_iri, text_loaded, triples, time.perf_counter() - started, bad.count, hub_threshold,
        graph,
    )
    own_graphs = (ox.NamedNode(META_GRAPH), STATS_GRAPH)
    kept_aside = sum(1 for graph in own_graphs for _ in store.quads_for_pattern(None, None, None, graph))
    return LoadReport(str(store_dir), reports, bad.count, bad.examples, store_triples=len(store) - kept_aside, hubs=hubs)


def _compact(store: ox.Store) -> None:
    """Compact the store: once its triples are in, and again at the end of the load.

    A bulk load leaves its triples in many overlapping files that every read has to look into: on
    the scale bench's stores, reads were 2 to 7 times slower before compaction (10M and 100M
    triples), and a served store, opened read-only, never compacts. The first write after a bulk
    load (the hub records) would wait for most of the first pass anyway. The second pass took 16 s
    at 100M and made reads there faster again (`search` p50 1.5 to 0.9 ms with the page cache
    emptied).
    """
    started = time.perf_counter()
    store.optimize()
    log.debug("compacted in %.1fs", time.perf_counter() - started)


def _load_natively(
    store, path: Path, fmt: Format, base_iri, sampler: HubSampler, bar: tqdm, scan=None, last=False, into=None
) -> int:
    """N-Triples through pyoxigraph's own bulk loader, with no Python work per triple.

    A plain file without blank nodes is handed to pyoxigraph by path, which parses it in parallel,
    while this thread reads it once more (hub sampling, line count, progress, and the names for
    the index: `scan`, whose index is finished meanwhile after the `last` source); a compressed
    one, or one with blank nodes (one parser, so one mapping of its labels: see
    kg_mcp.loading.blank_labels), is streamed through the sampler into the loader, into the named
    graph `into` (None: the default graph). Returns the lines read (the triples, blank and comment
    lines aside), and whether the file may have held blank nodes.
    """
    lines_seen = 0

    def on_chunk(data: bytes) -> None:
        nonlocal lines_seen
        sampler.sample_lines(data)
        if scan is not None:
            scan.feed(data)
        bar.update(stream.raw.lines - lines_seen)  # counted by the stream already
        lines_seen = stream.raw.lines

    blank = path.suffix.lower() != ".nt" or may_hold_blank_nodes(path)
    with open_source(path, on_chunk) as stream:
        if not blank:
            bar.set_description(f"{path.name}: loading")
            # bulk_load lets go of the GIL: the reading here costs the load no time where a core is free.
            loading = _Background(store.bulk_load, path=str(path), format=fmt.rdf, base_iri=base_iri, to_graph=into)
            try:
                while stream.read(1 << 20):
                    pass
                if scan is not None:
                    scan.end_of_source()
                    read = time.perf_counter()
                    if last:  # in the background: `_name_index` waits for it
                        scan.finish_guessed()
            finally:
                error = loading.wait()
            if scan is not None:  # the load waited only for what was left once bulk_load had ended
                scan.waited += max(0.0, read - loading.ended)
            if isinstance(error, SyntaxError):
                line, culprit = blame_line(path, fmt.rdf, base_iri, error)
                raise LoadError(path, line, syntax_reason(culprit)) from None
            if error is not None:
                raise error
        else:
            before = scan.seconds if scan is not None else 0.0
            bulk_load_lines(store, stream, path, fmt.rdf, base_iri, into)
            if scan is not None:
                scan.end_of_source()
                scan.waited += scan.seconds - before  # read inline, as the loader asked for the data
        return stream.raw.lines, blank


class _Background:
    """`call(**arguments)` run in a thread; `wait` returns the exception it raised, if any."""

    def __init__(self, call, **arguments):
        self._call, self._arguments = call, arguments
        self._error: BaseException | None = None
        self.ended = float("inf")  # time.perf_counter() when the call returned
        self._thread = threading.Thread(target=self._run, name="kg-mcp bulk load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._call(**self._arguments)
        except BaseException as error:  # handed to the caller's thread by wait()
            self._error = error
        finally:
            self._call = self._arguments = None  # a bound Store method: the Store must close when the load ends
            self.ended = time.perf_counter()

    def wait(self) -> BaseException | None:
        self._thread.join()
        error, self._error = self._error, None
        if error is not None:  # its frames hold the Store too
            traceback.clear_frames(error.__traceback__)
        return error


def _read(stream, path: Path, fmt: Format, base_iri, bad, entities, relations, prefixes, contexts) -> Iterable[ox.Quad]:
    if fmt.name == "text":
        return read_text_triples(stream, path, entities, relations, bad)
    if fmt.name == "wikidata-json":
        return read_wikidata_json(stream, path, bad)
    if fmt.name == "jsonld":
        return read_jsonld(stream, path, base_iri, contexts, prefixes)
    if fmt.name in OWL_FORMATS:
        return read_owl(stream, path, fmt.name, prefixes)
    if fmt.line_based:
        return read_rdf_lines(stream, path, fmt.rdf, base_iri, bad)
    return read_rdf_document(stream, path, fmt.rdf, base_iri, bad.skip, prefixes)


def _into_graph(quads: Iterable[ox.Quad], graph: ox.NamedNode | None) -> Iterable[ox.Quad]:
    """The triples of `quads` in `graph` (None: as they are, in the default graph)."""
    if graph is None:
        return quads
    return (ox.Quad(q.subject, q.predicate, q.object, graph) for q in quads)


def _counted(quads: Iterable[ox.Quad], counter: list[int], bar: tqdm) -> Iterator[ox.Quad]:
    # The bar is updated every few thousand quads: per-quad updates would cost more than parsing.
    pending = 0
    for quad in quads:
        yield quad
        pending += 1
        if pending == 4096:
            counter[0] += pending
            bar.update(pending)
            pending = 0
    counter[0] += pending
    bar.update(pending)


def _update_meta(store, plan, prefixes, base_iri, text_loaded, triples, seconds, bad_lines, hub_threshold, graph=None) -> None:
    meta = read_meta(store)
    meta["hub_threshold"] = hub_threshold
    known = meta.setdefault("prefixes", {})
    for prefix, iri in prefixes.items():
        known.setdefault(prefix, iri)
    if text_loaded:
        known[ENTITY_PREFIX] = base_iri + ENTITY_PATH
        meta["relation_namespace"] = base_iri + RELATION_PATH
    entry = {
        "sources": [os.path.abspath(path) for path, _ in plan],
        "triples": triples,
        "seconds": round(seconds, 3),
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if bad_lines:
        entry["bad_lines"] = bad_lines
    if graph:
        entry["graph"] = graph
    meta.setdefault("loads", []).append(entry)
    write_meta(store, meta)
