"""Commands for a server a team shares: `token` makes a named token, `audit` summarises audit logs."""

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
@click.argument("logs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="The summary as JSON rows.")
@click.option("--lines", "as_lines", is_flag=True, help="Print the lines themselves, merged by time, instead of a summary.")
def audit(logs, as_json, as_lines):
    """Summarise audit logs (`serve --audit-log FILE`): calls, errors, refusals, rows and time per
    subject and tool, over every log given, merged by time.

    LOGS are files (each read with its rotated FILE.1, FILE.2, ...), folders of logs, glob patterns
    (quoted, e.g. '/var/log/kg-mcp/audit-*.jsonl'), or - for lines on stdin:

    \b
    kg-mcp audit /var/log/kg-mcp/
    journalctl -t kg-mcp-audit -o cat | kg-mcp audit -
    """
    from kg_mcp.serving.audit_trail import audit_trail, summarise, summary_text

    trail = audit_trail(logs)
    if as_lines:
        for entry in trail:
            click.echo(json.dumps(entry, ensure_ascii=False))
        return
    table = summarise(trail)
    click.echo(json.dumps(table, indent=1) if as_json else summary_text(table))
