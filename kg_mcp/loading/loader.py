"""``kg-mcp load``: stream sources of any supported format into an Oxigraph store, atomically."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.loading.atomic import exclusive_load, recover_interrupted_swap, remove_stale_staging, staged_store
from kg_mcp.loading.errors import BadLines, LoadError
from kg_mcp.loading.json_dump import read_wikidata_json
from kg_mcp.loading.rdf_files import read_rdf_document, read_rdf_lines
from kg_mcp.loading.report import LoadReport, SourceReport
from kg_mcp.loading.sources import Format, check_readable, detect_format, open_source
from kg_mcp.loading.text_triples import TextMinter, read_text_triples
from kg_mcp.namespaces import DEFAULT_BASE_IRI, ENTITY_PATH, ENTITY_PREFIX, META_GRAPH, RELATION_PATH
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
) -> LoadReport:
    """Load ``sources`` into the Oxigraph store at ``store_dir`` (created if missing).

    All or nothing: on any error or interruption the store stays exactly as it was. Raises
    LoadError for unreadable, unrecognised or malformed sources (malformed lines of line-based
    formats are skipped and counted instead when ``skip_bad``).
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
                report = _load_into(store, plan, store_dir, base_iri, BadLines(skip_bad), progress)
                store.flush()
                store.optimize()
            finally:
                del store  # closed before the directory is renamed or deleted
    report.seconds = time.perf_counter() - started
    log.info("%s", report.summary())
    return report


def _load_into(store, plan, store_dir, base_iri, bad, progress) -> LoadReport:
    started = time.perf_counter()
    entities = TextMinter(base_iri + ENTITY_PATH)
    relations = TextMinter(base_iri + RELATION_PATH)
    prefixes: dict[str, str] = {}
    reports = []
    with tqdm(unit="triples", unit_scale=True, file=sys.stderr, disable=None if progress else True) as bar:
        for path, fmt in plan:
            source_started, bad_before = time.perf_counter(), bad.count
            bar.set_description(path.name)
            counter = [0]
            with open_source(path) as stream:
                quads = _read(stream, path, fmt, base_iri, bad, entities, relations, prefixes)
                store.bulk_extend(_counted(quads, counter, bar))
            seconds = time.perf_counter() - source_started
            reports.append(SourceReport(str(path), fmt.name, counter[0], bad.count - bad_before, seconds))
            log.debug("%s: %d triples in %.1fs", path, counter[0], seconds)

    text_loaded = any(fmt.name == "text" for _, fmt in plan)
    triples = sum(r.triples for r in reports)
    _update_meta(
        store, plan, prefixes, base_iri, text_loaded, triples, time.perf_counter() - started, bad.count
    )
    meta_quads = sum(1 for _ in store.quads_for_pattern(None, None, None, ox.NamedNode(META_GRAPH)))
    return LoadReport(str(store_dir), reports, bad.count, bad.examples, store_triples=len(store) - meta_quads)


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


def _update_meta(store, plan, prefixes, base_iri, text_loaded, triples, seconds, bad_lines) -> None:
    meta = read_meta(store)
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
