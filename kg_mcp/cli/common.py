"""What every `kg-mcp` command shares: the group, logging, the store options.

Only the command line turns errors into exit messages; everything it calls raises.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import click
from pydantic import ValidationError
from pydantic_settings.exceptions import SettingsError

from kg_mcp import __version__
from kg_mcp.errors import ConfigError
from kg_mcp.profiles import PROFILES
from kg_mcp.settings import Settings, load_settings, settings_error

log = logging.getLogger("kg_mcp")


def _setup_logging(verbose: bool) -> None:
    # stderr only: on stdio, stdout carries the protocol and nothing else.
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )


def _store_options(func):
    """--store / --sparql / --wikidata / --profile, shared by serve, call and info."""
    options = [
        # The variables are how an MCP Bundle (manifest.json) passes its settings; empty means unset.
        click.option("--store", type=click.Path(file_okay=False, path_type=Path), envvar="KG_MCP_STORE",
                     help="An Oxigraph store made by `kg-mcp load` (KG_MCP_STORE)."),
        click.option("--sparql", "sparql_url", metavar="URL", envvar="KG_MCP_SPARQL_URL",
                     help="A SPARQL endpoint URL, read-only (KG_MCP_SPARQL_URL)."),
        click.option("--wikidata", is_flag=True, envvar="KG_MCP_WIKIDATA", help="The public Wikidata query service (KG_MCP_WIKIDATA)."),
        click.option("--profile", type=click.Choice(sorted(PROFILES)), help="Schema profile (detected if not given)."),
        click.option("--language", "languages", multiple=True, help="Label language, in order of preference (repeatable)."),
        click.option("--enable-sparql/--no-sparql", "enable_sparql", default=None,
                     help="Offer the read-only `sparql` tool, or not (KG_MCP_SPARQL_TOOL). Default: offered over "
                          "stdio and in-process, not over HTTP or SSE."),
        click.option(
            "--max-output-chars",
            type=click.IntRange(min=1000),
            metavar="N",
            expose_value=False,  # read by _settings, as --prefix is
            callback=_remember_budget,
            help="Characters of one result: a listing's page holds the rows that fit, then gives a cursor to the "
                 "next (KG_MCP_MAX_OUTPUT_CHARS) [20000].",
        ),
        click.option(
            "--prefix",
            multiple=True,
            metavar="NAME=IRI",
            expose_value=False,  # read by _settings, so that no command's signature changes
            callback=_remember_prefixes,
            help="Show and accept ids of namespace IRI as NAME:local (repeatable).",
        ),
        graph_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


def graph_option(func):
    """--graph IRI (repeatable), read by _settings as --prefix is, so no command's signature changes."""
    return click.option(
        "--graph",
        multiple=True,
        metavar="IRI",
        expose_value=False,
        callback=_remember_graphs,
        help="Read only this named graph, of an endpoint or of a store (`kg-mcp load --graph`); repeatable, the "
             "graphs read as one (KG_MCP_GRAPHS). Default: an endpoint's every graph but the engine's own, a store's "
             "default graph.",
    )(func)


def _remember_prefixes(ctx: click.Context, param, values: tuple[str, ...]) -> None:
    prefixes = {}
    for value in values:
        name, _, iri = value.partition("=")
        if not re.fullmatch(r"[A-Za-z][\w\-.]*", name) or not iri.startswith(("http://", "https://", "urn:")):
            raise click.BadParameter(f"{value!r}: write NAME=IRI, e.g. --prefix ex=http://example.org/", param=param)
        prefixes[name] = iri
    ctx.meta["kg_mcp.prefixes"] = prefixes


def _remember_budget(ctx: click.Context, param, value: int | None) -> None:
    if value is not None:
        ctx.meta["kg_mcp.max_output_chars"] = value


def _remember_graphs(ctx: click.Context, param, values: tuple[str, ...]) -> None:
    from kg_mcp.settings import graph_iri_problem

    for value in values:
        if (problem := graph_iri_problem(value)) is not None:
            raise click.BadParameter(problem, param=param)
    ctx.meta["kg_mcp.graphs"] = list(values)


def chosen_graphs() -> list[str]:
    """The --graph values of the running command (empty when none was given)."""
    ctx = click.get_current_context(silent=True)
    return list(ctx.meta.get("kg_mcp.graphs", [])) if ctx is not None else []


def _settings(languages: tuple[str, ...], enable_sparql: bool | None) -> Settings:
    overrides: dict = {}
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get("kg_mcp.prefixes"):
        overrides["prefixes"] = ctx.meta["kg_mcp.prefixes"]
    if graphs := chosen_graphs():
        overrides["graphs"] = graphs
    if ctx is not None and ctx.meta.get("kg_mcp.max_output_chars"):
        overrides["max_output_chars"] = ctx.meta["kg_mcp.max_output_chars"]
    if languages:
        overrides["languages"] = list(languages)
    if enable_sparql is not None:
        overrides["sparql_tool"] = enable_sparql
    return load_settings(**overrides)


def _open(store, sparql_url, wikidata, profile, settings, shared=None, named_graphs=False):
    from kg_mcp.backends import open_backend

    backend = open_backend(store=store, sparql=sparql_url, wikidata=wikidata, profile=profile, settings=settings,
                           named_graphs=named_graphs)
    if shared is not None and getattr(backend, "names", None) is not None:
        backend.names.locks = shared  # one replica builds an endpoint's name index at a time
    backend.prepare_lookups()  # an endpoint's name index is built while the server starts, not at the first lookup
    return backend


class _Group(click.Group):
    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as e:
            raise click.ClickException(str(e)) from None
        except (ValidationError, SettingsError) as e:  # Settings() read where a command did not read them first
            if isinstance(e, ValidationError) and e.title != Settings.__name__:
                raise
            raise click.ClickException(str(settings_error(e))) from None


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="kg-mcp")
@click.option("-v", "--verbose", is_flag=True, help="Log progress to stderr.")
def main(verbose: bool) -> None:
    """kg-mcp: knowledge-graph tools for LLMs over the Model Context Protocol.

    With no --store, --sparql or --wikidata, `serve` and `call` use a small demo KG.
    """
    _setup_logging(verbose)

