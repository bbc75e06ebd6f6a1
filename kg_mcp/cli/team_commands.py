"""Commands for a server a team shares: `token` makes a named token, `audit` summarises the audit log."""

from __future__ import annotations

import json

import click

from kg_mcp.cli.common import main


@main.command()
@click.argument("name")
@click.option("--scope", "scopes", multiple=True, default=["kg:read"], show_default=True,
              help="A scope the token grants (repeatable): kg:read, kg:sparql, graph scopes of --graph-access.")
def token(name, scopes):
    """Make a token for a script or CI job called NAME.

    Prints the token (on stderr, once: keep it in the job's secrets) and the table to add to the file of
    `kg-mcp serve --tokens FILE`, which holds only the token's SHA-256.
    """
    from kg_mcp.serving.tokens import new_token

    secret, table = new_token(name, list(scopes))
    click.echo(f"token for {name} (shown once): {secret}", err=True)
    click.echo(table, nl=False)


@main.command()
@click.argument("log_file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON rows.")
def audit(log_file, as_json):
    """Summarise an audit log (`serve --audit-log FILE`, with its rotated files): calls, errors,
    refusals, rows and time per subject and tool."""
    from kg_mcp.serving.audit import audit_lines, summarise, summary_text

    table = summarise(audit_lines(log_file))
    click.echo(json.dumps(table, indent=1) if as_json else summary_text(table))
