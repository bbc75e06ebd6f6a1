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

# kg-mcp's own bookkeeping (prefixes, profile, load history, hub statistics) lives in these named
# graphs of the store, which the tools never read (--graph and --graph-access refuse them).
META_GRAPH = "urn:kg-mcp:meta"
STATS_GRAPH = "urn:kg-mcp:stats"  # hub statistics (kg_mcp.hubs)
OWN_GRAPHS = (META_GRAPH, STATS_GRAPH)  # never a data graph to read, whatever graphs are chosen
META_SUBJECT = "urn:kg-mcp:store"
META_JSON = "urn:kg-mcp:json"

# The RDF, RDFS, OWL, SKOS and SHACL terms kg-mcp reasons with (verify's entailments, the profiles'
# names and the summary of an ontology-shaped KG).
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SH = "http://www.w3.org/ns/shacl#"
RDFS_SUBCLASS = RDFS + "subClassOf"
RDFS_SUBPROPERTY = RDFS + "subPropertyOf"
OWL_EQUIVALENT_CLASS = OWL + "equivalentClass"
OWL_EQUIVALENT_PROPERTY = OWL + "equivalentProperty"
OWL_SAME_AS = OWL + "sameAs"
OWL_INVERSE_OF = OWL + "inverseOf"
OWL_DISJOINT_WITH = OWL + "disjointWith"
OWL_DIFFERENT_FROM = OWL + "differentFrom"
OWL_TRANSITIVE = OWL + "TransitiveProperty"
OWL_SYMMETRIC = OWL + "SymmetricProperty"
OWL_FUNCTIONAL = OWL + "FunctionalProperty"
