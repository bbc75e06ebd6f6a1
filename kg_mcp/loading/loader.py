"""``kg-mcp load``: stream sources of any supported format into an Oxigraph store, atomically."""

from __future__ import annotations

import logging
import os
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.hubs import DEFAULT_THRESHOLD, STATS_GRAPH, HubSampler, record_hubs
from kg_mcp.loading.atomic import exclusive_load, recover_interrupted_swap, remove_stale_staging, staged_store
from kg_mcp.loading.errors import BadLines, LoadError
from kg_mcp.loading.json_dump import read_wikidata_json
from kg_mcp.loading.rdf_files import blame_line, bulk_load_lines, read_rdf_document, read_rdf_lines, syntax_reason
from kg_mcp.loading.report import LoadReport, SourceReport
from kg_mcp.loading.sources import Format, check_readable, detect_format, open_source
from kg_mcp.loading.text_triples import TextMinter, read_text_triples
from kg_mcp.names.store_index import build_store_index, store_profile
from kg_mcp.namespaces import DEFAULT_BASE_IRI, ENTITY_PATH, ENTITY_PREFIX, META_GRAPH, RELATION_PATH
from kg_mcp.settings import Settings
from kg_mcp.store_meta import read_meta, write_meta

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
    optimize: bool = False,
    languages: Sequence[str] | None = None,
) -> LoadReport:
    """Load ``sources`` into the Oxigraph store at ``store_dir`` (created if missing).

    All or nothing: on any error or interruption the store stays exactly as it was. Raises
    LoadError for unreadable, unrecognised or malformed sources (malformed lines of line-based
    formats are skipped and counted instead when ``skip_bad``). Nodes with at least
    ``hub_threshold`` edges in one direction get predicate statistics (kg_mcp.hubs);
    ``optimize`` compacts the store afterwards (slower load, somewhat faster reads). The store's
    name index (labels and aliases in ``languages``, default the settings') is rebuilt with it.
    """
    started = time.perf_counter()
    store_dir = Path(store_dir)
    if isinstance(sources, (str, Path)):  # one path, not a sequence of its characters
        sources = [sources]
    plan = [(Path(s), detect_format(s, format)) for s in sources]
    if not plan:
        raise LoadError(None, None, "no sources to load")
    for path, _ in plan:
        check_readable(path)
    try:
        ox.NamedNode(base_iri + ENTITY_PATH)
    except ValueError as e:
        raise LoadError(None, None, f"invalid base IRI {base_iri!r} ({e})") from None

    recover_interrupted_swap(store_dir)
    with exclusive_load(store_dir):
        remove_stale_staging(store_dir)
        with staged_store(store_dir) as staging:
            store = ox.Store(str(staging))
            try:
                report = _load_into(store, plan, store_dir, base_iri, BadLines(skip_bad), progress, hub_threshold)
                store.flush()
                # Inside the staging copy: the swap below replaces store and name index together.
                index_started = time.perf_counter()
                report.names = build_store_index(
                    store, staging, profile=store_profile(store), languages=languages or Settings().languages,
                    progress=progress,
                )
                report.index_seconds = time.perf_counter() - index_started
                if optimize:
                    store.optimize()
            except BaseException as error:
                # The traceback keeps the loader's frames, and with them this Store on the staging
                # copy: drop them so the Store closes now, not whenever the garbage collector runs
                # (RocksDB would refuse the next load into the same path in this process).
                traceback.clear_frames(error.__traceback__)
                raise
            finally:
                del store  # closed before the directory is renamed or deleted
    report.seconds = time.perf_counter() - started
    log.info("%s", report.summary())
    return report


def _load_into(store, plan, store_dir, base_iri, bad, progress, hub_threshold) -> LoadReport:
    started = time.perf_counter()
    entities = TextMinter(base_iri + ENTITY_PATH)
    relations = TextMinter(base_iri + RELATION_PATH)
    prefixes: dict[str, str] = {}
    reports = []
    sampler = HubSampler(hub_threshold)
    with tqdm(unit="triples", unit_scale=True, file=sys.stderr, disable=None if progress else True) as bar:
        for path, fmt in plan:
            source_started, bad_before = time.perf_counter(), bad.count
            bar.set_description(path.name)
            if fmt.name == "nt" and not bad.skip:
                triples = _load_natively(store, path, fmt, base_iri, sampler, bar)
            else:
                counter = [0]
                with open_source(path) as stream:
                    quads = sampler.sample_quads(_read(stream, path, fmt, base_iri, bad, entities, relations, prefixes))
                    store.bulk_extend(_counted(quads, counter, bar))
                triples = counter[0]
            seconds = time.perf_counter() - source_started
            reports.append(SourceReport(str(path), fmt.name, triples, bad.count - bad_before, seconds))
            log.debug("%s: %d triples in %.1fs", path, triples, seconds)
        bar.set_description("hub statistics")
        hubs = record_hubs(store, *sampler.candidates(), threshold=hub_threshold)

    text_loaded = any(fmt.name == "text" for _, fmt in plan)
    triples = sum(r.triples for r in reports)
    _update_meta(
        store, plan, prefixes, base_iri, text_loaded, triples, time.perf_counter() - started, bad.count, hub_threshold
    )
    own_graphs = (ox.NamedNode(META_GRAPH), STATS_GRAPH)
    kept_aside = sum(1 for graph in own_graphs for _ in store.quads_for_pattern(None, None, None, graph))
    return LoadReport(str(store_dir), reports, bad.count, bad.examples, store_triples=len(store) - kept_aside, hubs=hubs)


def _load_natively(store, path: Path, fmt: Format, base_iri, sampler: HubSampler, bar: tqdm) -> int:
    """N-Triples through pyoxigraph's own bulk loader, with no Python work per triple.

    A plain file is first read once in Python (hub sampling, line count, progress), then handed
    to pyoxigraph by path, which parses it in parallel; a compressed one is streamed through the
    sampler into the loader. Returns the lines read: the triples, blank and comment lines aside.
    """

    def on_chunk(data: bytes) -> None:
        sampler.sample_lines(data)
        bar.update(data.count(b"\n"))

    with open_source(path, on_chunk) as stream:
        if path.suffix.lower() == ".nt":
            bar.set_description(f"{path.name}: scanning")
            while stream.read(1 << 20):
                pass
            bar.set_description(f"{path.name}: loading")
            try:
                store.bulk_load(path=str(path), format=fmt.rdf, base_iri=base_iri)
            except SyntaxError as error:
                line, culprit = blame_line(path, fmt.rdf, base_iri, error)
                raise LoadError(path, line, syntax_reason(culprit)) from None
        else:
            bulk_load_lines(store, stream, path, fmt.rdf, base_iri)
        return stream.raw.lines


def _read(stream, path: Path, fmt: Format, base_iri, bad, entities, relations, prefixes) -> Iterable[ox.Quad]:
    if fmt.name == "text":
        return read_text_triples(stream, path, entities, relations, bad)
    if fmt.name == "wikidata-json":
        return read_wikidata_json(stream, path, bad)
    if fmt.line_based:
        return read_rdf_lines(stream, path, fmt.rdf, base_iri, bad)
    return read_rdf_document(stream, path, fmt.rdf, base_iri, bad.skip, prefixes)


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


def _update_meta(store, plan, prefixes, base_iri, text_loaded, triples, seconds, bad_lines, hub_threshold) -> None:
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
    meta.setdefault("loads", []).append(entry)
    write_meta(store, meta)
