"""Bulk loading of RDF, plain-text triple files and Wikidata JSON dumps into Oxigraph stores."""

from kg_mcp.loading.atomic import recover_interrupted_swap
from kg_mcp.loading.errors import LoadError
from kg_mcp.loading.loader import load_sources
from kg_mcp.loading.report import LoadReport, SourceReport
from kg_mcp.loading.sources import FORMATS, detect_format
from kg_mcp.loading.text_triples import mint_local_name

__all__ = [
    "FORMATS",
    "LoadError",
    "LoadReport",
    "SourceReport",
    "detect_format",
    "load_sources",
    "mint_local_name",
    "recover_interrupted_swap",
]
