"""KG-Reasoner's retrieval (Wang & Yu, 2026), behind the `kgr_search` tool: a traversal tree per
question that a search extends and a backtrack climbs (`traversal`), and the rankers that order
the triples around an entity by relevance to the question (`ranking`: lexical and embedding;
`gnn_ranker`: the graph-attention model, trained by `gnn_training`; `choice`: which one a server
uses, from KG_MCP_RANKER).
"""

from kg_mcp.kg_reasoner.choice import get_ranker, ranker_from_env

__all__ = ["get_ranker", "ranker_from_env"]
