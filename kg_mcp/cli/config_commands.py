"""`kg-mcp config`: set up an MCP client to start this installation's server."""

from __future__ import annotations

import json

import click

from kg_mcp.cli import client_config
from kg_mcp.cli.common import _store_options, chosen_graphs, main


@main.command()
@click.argument("client", type=click.Choice(sorted(client_config.CLIENTS)))
@_store_options
@click.option("--name", default="kg-mcp", show_default=True, help="The server's name in the client.")
@click.option("--write", "write_file", is_flag=True, help="Merge it into the client's config file (diff shown, old file kept as .bak).")
@click.option("--file", "file_path", type=click.Path(dir_okay=False), help="The config file to merge into (default: the client's own).")
def config(client, store, sparql_url, wikidata, profile, languages, enable_sparql, name, write_file, file_path):
    """Print CLIENT's config snippet for this installation, or merge it into CLIENT's config file.

    \b
    kg-mcp config claude-desktop --store ~/kg/metaqa.store
    kg-mcp config cursor --wikidata --write
    """
    from pathlib import Path

    args = client_config.serve_args(
        store, sparql_url, wikidata, profile, languages, enable_sparql, chosen_graphs()
    )
    if not write_file:
        click.echo(json.dumps(client_config.snippet(client, name, args), indent=2, ensure_ascii=False))
        click.echo(f"(goes into {client_config.config_path(client)}; --write merges it there)", err=True)
        return
    path = Path(file_path) if file_path else client_config.config_path(client)
    before, after = client_config.merged(client, path, name, args)
    if before == after:
        click.echo(f"{path} already has this entry; nothing to change.", err=True)
        return
    click.echo(client_config.diff(path, before, after), err=True, nl=False)
    backup = client_config.write(path, before, after)
    kept = f" (the old file is {backup})" if backup else ""
    click.echo(f"wrote {path}{kept}; restart {client} to load it.", err=True)
