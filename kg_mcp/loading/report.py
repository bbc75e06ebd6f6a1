"""What a load did, for the CLI to print (on stderr) and for tests to check."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SourceReport:
    """One source: its format, the triples it added (labels of minted names included)."""

    path: str
    format: str
    triples: int
    bad_lines: int
    seconds: float


@dataclass
class LoadReport:
    """A whole load: per-source counts, skipped lines, timing and the store's size afterwards."""

    store_dir: str
    sources: list[SourceReport]
    bad_lines: int
    bad_line_examples: list[str] = field(default_factory=list)  # "file:line: reason"
    seconds: float = 0.0
    store_triples: int = 0  # quads in the store after the load, kg-mcp's own metadata excluded
    hubs: int = 0  # (node, direction) pairs with predicate statistics after the load
    names: int = 0  # labels and aliases in the store's name index
    # Of `seconds`, those the load spent on the name index alone; names read from the text while
    # pyoxigraph loaded the file count only where they took longer than the load.
    index_seconds: float = 0.0
    names_read_from: str = ""  # "text" (picked out of the N-Triples as they were read), "store", or not built
    graph: str | None = None  # the named graph loaded into (None: the default graph)
    graph_indexes: list[tuple[tuple[str, ...], int]] = field(default_factory=list)  # graph sets indexed, with their names

    @property
    def triples(self) -> int:
        """Triples read from all sources (duplicates of stored ones included)."""
        return sum(s.triples for s in self.sources)

    @property
    def triples_per_second(self) -> float:
        """Load throughput over the whole load, copy and swap included."""
        return self.triples / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """A few human-readable lines."""
        into = f", into <{self.graph}>" if self.graph else ""
        lines = [f"{s.path}: {s.triples:,} triples ({s.format}, {s.seconds:.1f}s{into})" for s in self.sources]
        if self.hubs:
            lines.append(f"predicate statistics kept for {self.hubs:,} hub direction(s)")
        if self.names_read_from:
            took = f" ({self.index_seconds:.1f}s for the name indexes)"
            if self.names or not self.graph_indexes:
                lines.append(f"name index: {self.names:,} names from the {self.names_read_from}{took}")
            else:  # the data is in named graphs: each graph set's index holds its names
                lines.append(f"name index of the default graph: empty, no labels there{took}")
            for graphs, names in self.graph_indexes:
                lines.append(f"name index of {', '.join(f'<{g}>' for g in graphs)}: {names:,} names")
        else:
            lines.append("name index: not built (the store gets one when first opened)")
        if self.bad_lines:
            lines.append(f"skipped {self.bad_lines:,} bad lines, e.g.:")
            lines += [f"  {example}" for example in self.bad_line_examples]
        lines.append(
            f"{self.triples:,} triples in {self.seconds:.1f}s ({self.triples_per_second:,.0f} triples/s); "
            f"{self.store_dir} now holds {self.store_triples:,}"
        )
        return "\n".join(lines)
