"""The name index behind `find_entities` on local stores: labels and aliases, folded, by words and typos."""

from kg_mcp.names.build import INDEX_FILE, build_index, index_path, read_index_meta
from kg_mcp.names.fold import fold, words
from kg_mcp.names.index import TIERS, NameIndex, NameMatch, max_edits

__all__ = [
    "INDEX_FILE",
    "TIERS",
    "NameIndex",
    "NameMatch",
    "build_index",
    "fold",
    "index_path",
    "max_edits",
    "read_index_meta",
    "words",
]
