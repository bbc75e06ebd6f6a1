"""Names read from N-Triples while `kg-mcp load` reads the file anyway, so the index of a new store
needs no query over the loaded store (which costs more than finding the lines in the text).

Every profile's label and alias predicates are looked for, since the profile is known only once
the store is loaded; `NameScan.matches` then tells whether the names seen are exactly those the
store's profile indexes, else the index is built from the store as before.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Sequence

from kg_mcp.names.build import finish_index, insert_names, start_index
from kg_mcp.profiles import DETECTION_PROBES, GENERIC, PROFILES, Profile

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


class NameScan:
    """Collects the name lines of N-Triples chunks (cut anywhere) into a new index database."""

    def __init__(self, connection: sqlite3.Connection, languages: Sequence[str]):
        self._db = connection
        self._languages = set(languages) | {""}
        self._language_list = list(languages)
        self._finished_for: str | None = None  # the profile whose word indexes are built
        self._probes_seen: set[str] = set()
        self._probes = [(probe, f"<{probe}>".encode()) for _, probe in DETECTION_PROBES]
        self._flags, self._ambiguous = name_predicates()
        alternatives = b"|".join(re.escape(p.encode()) for p in sorted(self._flags))
        # subject IRI, predicate, the string's body, then @language or ^^<datatype>
        self._line = re.compile(
            rb'\n[ \t]*<([^>\n]*)>[ \t]+<(' + alternatives + rb')>[ \t]+"((?:[^"\\\n]|\\.)*)"(@[A-Za-z0-9-]+)?'
        )
        self._carry = b"\n"
        self._pending: list[tuple[str, str, int]] = []
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
        languages, flags, pending = self._languages, self._flags, self._pending
        for subject, predicate, body, tag in self._line.findall(data):
            if tag.lower()[1:].decode() not in languages:
                continue
            predicate = predicate.decode()
            self.seen.add(predicate)
            # Invalid UTF-8 fails the load itself (pyoxigraph's error, with its line): not raised here.
            entity, text = subject.decode(errors="replace"), body.decode(errors="replace")
            if "\\" in text:
                text = _unescape(text)
            if "\\" in entity:
                entity = _unescape(entity)
            pending.append((entity, text, flags[predicate]))
        if len(pending) >= _BATCH:
            self._flush()

    def close(self) -> None:
        self._db.close()

    def _flush(self) -> None:
        self.count += insert_names(self._db, self._pending)
        self._pending.clear()

    def end_of_source(self) -> None:
        """The last line of a file may have no line break."""
        self._scan(self._carry + b"\n")
        self._carry = b"\n"

    def matches(self, profile: Profile) -> bool:
        """Whether the names seen are those `profile` indexes (none of another profile's, no flag in
        doubt), and the index, if already finished, was finished for it."""
        wanted = set(profile.label_predicates) | set(profile.alias_predicates)
        fits = self.seen <= wanted and not (self.seen & self._ambiguous)
        return fits and (self._finished_for is None or self._finished_for == profile.name)

    def guessed_profile(self) -> Profile:
        """The profile `detect_profile` will find in the store, from the predicates seen in the text."""
        return next((p for p, probe in DETECTION_PROBES if probe in self._probes_seen), GENERIC)

    def finish_guessed(self) -> None:
        """Build the word indexes now, for the profile the text shows (checked again by `finish`)."""
        profile = self.guessed_profile()
        if self.matches(profile):
            self._finish_words(profile)

    def _finish_words(self, profile: Profile) -> None:
        started = time.perf_counter()
        self._flush()
        finish_index(self._db, profile.label_predicates, profile.alias_predicates, self._language_list, "", self.count)
        self._finished_for = profile.name
        self.seconds += time.perf_counter() - started

    def finish(self, profile: Profile, stamp: str) -> int:
        """Finish the index for `profile` (which must match) and stamp it with the store's load; returns the names."""
        if self._finished_for is None:
            self._finish_words(profile)
        self._db.execute("UPDATE meta SET value = ? WHERE key = 'stamp'", (json.dumps(stamp),))
        self._db.commit()
        return self.count
