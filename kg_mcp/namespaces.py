"""IRIs that kg-mcp itself mints or reads: the namespaces of plain-text KBs and the store's metadata graph."""

from __future__ import annotations

RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
XSD = "http://www.w3.org/2001/XMLSchema#"

# Plain-text triple files (MetaQA, PathQuestion) have names, not IRIs. Each name is minted into
# one of these two namespaces (under the load's --base-iri) and keeps its text as rdfs:label.
DEFAULT_BASE_IRI = "http://kg-mcp.local/"
ENTITY_PATH = "entity/"
RELATION_PATH = "relation/"
ENTITY_PREFIX = "kg"  # shown as kg:Steven_Spielberg; relations are shown bare (directed_by)

# kg-mcp's own bookkeeping (prefixes, profile, load history, hub statistics) lives in this named
# graph of the store, so the tools, which read only the default graph, never see it.
META_GRAPH = "urn:kg-mcp:meta"
META_SUBJECT = "urn:kg-mcp:store"
META_JSON = "urn:kg-mcp:json"
