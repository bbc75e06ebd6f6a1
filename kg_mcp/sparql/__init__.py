"""User SPARQL: parsed once, checked, and written back by kg-mcp before anything runs it.

    lexing      the query's tokens: a size bound and the papers' Virtuoso dialect
    writer      kg-mcp's own text from rdflib's parse tree, every IRI absolute, every node known
    policy      what may be named: the graphs read, the services and functions called
    checked     lex, parse once, write: the CheckedQuery that is the only text run
    parse_pool  worker processes that do the checking, stopped at a time limit
"""

from kg_mcp.sparql.checked import MAX_QUERY_CHARS, MAX_QUERY_TOKENS, CheckedQuery, checked_query
from kg_mcp.sparql.policy import INTERNAL_SERVICES, QueryPolicy, policy_for

__all__ = [
    "INTERNAL_SERVICES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_TOKENS",
    "CheckedQuery",
    "QueryPolicy",
    "checked_query",
    "policy_for",
]
