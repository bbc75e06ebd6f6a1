"""Names read from N-Triples while `kg-mcp load` reads the file anyway, so the index of a new store
needs no query over the loaded store (which costs more than finding the lines in the text).

Every profile's label and alias predicates are looked for, since the profile is known only once
the store is loaded; `NameScan.matches` then tells whether the names seen are exactly those the
store's profile indexes, else the index is built from the store as before.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from kg_mcp.names.build import finish_index, insert_batch, start_index, written_whole
from kg_mcp.names.details import TextDetails
from kg_mcp.profiles import DETECTION_PROBES, GENERIC, PROFILES, Profile
from kg_mcp.settings import Settings

SCANNED_FILE = ".kg-mcp-names.scanned"  # in the staging copy until the load ends, then the index file
_BATCH = 50_000
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def _unescape(text: str) -> str:
    """An N-Triples string or IRI with its \\-escapes replaced by the characters they stand for."""

    def one(m: re.Match) -> str:
        code = m.group(1) or m.group(2)
        return chr(int(code, 16)) if code else _ECHAR.get(m.group(3), m.group(3))

    return _ESCAPE.sub(one, text)


def name_predicates() -> tuple[dict[str, int], set[str]]:
    """({label or alias predicate of any profile: alias flag}, predicates whose flag differs by profile)."""
    flags: dict[str, set[int]] = {}
    for profile in PROFILES.values():
        for predicate in profile.label_predicates:
            flags.setdefault(predicate, set()).add(0)
        for predicate in profile.alias_predicates:
            flags.setdefault(predicate, set()).add(0 if predicate in profile.label_predicates else 1)
    return {p: min(f) for p, f in flags.items()}, {p for p, f in flags.items() if len(f) > 1}


def noted_predicates() -> list[str]:
    """Every profile's description predicates: their lines are noted for the hits' descriptions and,
    where a profile hides them (Freebase's common.topic.description), for its degrees
    (kg_mcp.names.details), but they name nothing."""
    descriptions = {p for profile in PROFILES.values() for p in profile.description_predicates}
    return sorted(descriptions - set(name_predicates()[0]))


class NameScan:
    """Collects the name lines of N-Triples chunks (cut anywhere) into a new index database.

    `finish_guessed` builds the word indexes in a thread of their own, so `connection` must be
    usable from another thread (check_same_thread=False); the scan never uses it from two at once.
    """

    def __init__(self, connection: sqlite3.Connection, languages: Sequence[str]):
        self._db = connection
        self._languages = set(languages) | {""}
        self._language_list = list(languages)
        self._finished_for: str | None = None  # the profile whose word indexes are built
        self._finishing: threading.Thread | None = None  # building them (finish_guessed)
        self._finish_error: BaseException | None = None
        self._probes_seen: set[str] = set()
        self._probes = [(probe, f"<{probe}>".encode()) for _, probe in DETECTION_PROBES]
        self._flags, self._ambiguous = name_predicates()
        self.details = TextDetails([*sorted(self._flags), *noted_predicates()], languages)
        self._code = {p.encode(): i for i, p in enumerate(self.details.predicates)}
        alternatives = b"|".join(re.escape(p.encode()) for p in self.details.predicates)
        # subject IRI, predicate, the string's body, then @language or ^^<datatype>. The body is
        # matched as runs of plain characters between escapes, not one character at a time through
        # an alternation: the scan's regex took a third less time over the 10M-triple file.
        body = rb'"([^"\\\n]*(?:\\.[^"\\\n]*)*)"'
        subject_and_predicate = rb'\n[ \t]*<([^>\n]*)>[ \t]+<(' + alternatives + rb')>[ \t]+'
        self._line = re.compile(subject_and_predicate + body + rb'(@[A-Za-z0-9-]+)?')
        self._carry = b"\n"
        self._pending: list[tuple[str, str, int]] = []
        self._pending_details: list[tuple[int, int, int]] = []  # (node key, language rank, predicate) of each
        self.seen: set[str] = set()
        self.count = 0
        self.seconds = 0.0  # spent here (much of it while pyoxigraph loads the same file)
        self.waited = 0.0  # of which the load waited for, as the loader measures it
        start_index(connection)

    def feed(self, chunk: bytes) -> None:
        started = time.perf_counter()
        data = self._carry + chunk
        cut = data.rfind(b"\n")
        self._carry = data[cut:]
        self._scan(data[:cut])
        self.seconds += time.perf_counter() - started

    def _scan(self, data: bytes) -> None:
        self._probes_seen.update(probe for probe, iri in self._probes if probe not in self._probes_seen and iri in data)
        if b"\r" in data:  # CRLF lines: as the edge counter reads lines, and as pyoxigraph reads them
            data = data.replace(b"\r", b"")
        self.details.edges.feed(data.split(b"\n")[1:])
        languages, flags, pending, details, code = self._languages, self._flags, self._pending, self.details, self._code
        for subject, predicate, body, tag in self._line.findall(data):
            key, noted = hash(b"<" + subject + b">"), code[predicate]
            details.line(key, noted)
            language = tag.lower()[1:].decode()
            predicate = predicate.decode()
            if language not in languages or predicate not in flags:
                continue
            self.seen.add(predicate)
            # Invalid UTF-8 fails the load itself (pyoxigraph's error, with its line): not raised here.
            entity, text = subject.decode(errors="replace"), body.decode(errors="replace")
            if "\\" in text:
                text = _unescape(text)
            if "\\" in entity:
                entity = _unescape(entity)
            pending.append((entity, text, flags[predicate]))
            self._pending_details.append((key, details.language_rank(language), noted))
        if len(pending) >= _BATCH:
            self._flush()

    def close(self) -> None:
        if self._finishing is not None:  # a load that failed meanwhile: its index is not wanted
            self._db.interrupt()
            self._finishing.join()
        self._db.close()

    def _flush(self) -> None:
        sources = insert_batch(self._db, self._pending)
        noted = [self._pending_details[i] for i in sources]
        self.details.rows([k for k, _, _ in noted], [lang for _, lang, _ in noted], [p for _, _, p in noted])
        self.count += len(sources)
        self._pending.clear()
        self._pending_details.clear()

    def end_of_source(self) -> None:
        """The last line of a file may have no line break."""
        self._scan(self._carry + b"\n")
        self._carry = b"\n"

    def matches(self, profile: Profile) -> bool:
        """Whether the names seen are those `profile` indexes (none of another profile's, no flag in
        doubt), and the index, if already finished, was finished for it."""
        self._wait_finishing()
        wanted = set(profile.label_predicates) | set(profile.alias_predicates)
        fits = self.seen <= wanted and not (self.seen & self._ambiguous)
        return fits and (self._finished_for is None or self._finished_for == profile.name)

    def guessed_profile(self) -> Profile:
        """The profile `detect_profile` will find in the store, from the predicates seen in the text."""
        return next((p for p, probe in DETECTION_PROBES if probe in self._probes_seen), GENERIC)

    def finish_guessed(self) -> None:
        """Start building the word indexes for the profile the text shows, in a thread: they are built
        while the loader compacts the store and counts its hubs, work that leaves a core free (the
        build is about half the index's processor time at 10M triples, the scan beside bulk_load the
        other half). `finish` waits for it, and checks the profile."""
        profile = self.guessed_profile()
        if self.matches(profile):
            self._finishing = threading.Thread(
                target=self._finish_caught, args=(profile,), name="kg-mcp name index", daemon=True
            )
            self._finishing.start()

    def _finish_caught(self, profile: Profile) -> None:
        try:
            self._finish_words(profile)
        except BaseException as error:  # handed to the loader's thread by _wait_finishing
            self._finish_error = error

    def _wait_finishing(self) -> None:
        if self._finishing is None:
            return
        self._finishing.join()
        self._finishing = None
        error, self._finish_error = self._finish_error, None
        if error is not None:
            raise error

    def _finish_words(self, profile: Profile) -> None:
        started = time.perf_counter()
        self._flush()
        details = self.details.apply(self._db, profile, Settings().degree_cap)
        finish_index(
            self._db, profile.label_predicates, profile.alias_predicates, self._language_list, "", self.count,
            extra={"details": details},
        )
        self._finished_for = profile.name
        self.seconds += time.perf_counter() - started

    def finish(self, profile: Profile, stamp: str) -> int:
        """Finish the index for `profile` (which must match) and stamp it with the store's load; returns the names."""
        self._wait_finishing()
        if self._finished_for is None:
            self._finish_words(profile)
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'stamp'", (json.dumps(stamp),))
        self._db.commit()
        return self.count


def index_from_text(
    paths: Sequence[Path], index_file: Path, profile: Profile, languages: Sequence[str], stamp: str, chunk: int = 1 << 20
) -> int:
    """Write a store's name index (with its names' degrees and labels) from the N-Triples files the
    store was loaded from, replacing `index_file` once complete; returns the names. At scale this
    costs a read of the files instead of a read of the store in random order."""
    with written_whole(index_file) as connection:
        scan = NameScan(connection, languages)
        for path in paths:
            with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as source:
                while data := source.read(chunk):
                    scan.feed(data)
            scan.end_of_source()
        if not scan.matches(profile):
            raise ValueError(
                f"the names in {', '.join(map(str, paths))} are not those of the {profile.name} profile: "
                "build the index from the store (without --from)"
            )
        return scan.finish(profile, stamp)
