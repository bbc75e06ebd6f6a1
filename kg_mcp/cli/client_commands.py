"""Commands that talk to an MCP server as a client: call, tools. The server is spawned
(--server-cmd), reached over HTTP (--url, kg_mcp.cli.remote), or a KG served in-process."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys

import click

from kg_mcp.cli.common import _open, _settings, _store_options, main
from kg_mcp.errors import ConfigError


def _any_server_options(func):
    """The KG options, or another MCP server: spawned (--server-cmd) or over HTTP (--url)."""
    options = [
        click.option("--server-cmd", metavar="'CMD'", help="Spawn this MCP server command and talk to it over stdio."),
        click.option("--url", metavar="URL", help="An MCP server over streamable HTTP, e.g. https://kg.example.org/mcp."),
        click.option("--auth-token-env", metavar="VAR", help="Send the bearer token kept in variable VAR (with --url)."),
        click.option("--cacert", type=click.Path(exists=True, dir_okay=False),
                     help="Trust this CA (PEM) too, beside the system's CAs: a team's own CA that signed the "
                          "server's certificate (with --url)."),
        click.option("--client-id", metavar="ID",
                     help="Sign in with OAuth client credentials as this client of the server's issuer, found from "
                          "the server's metadata (with --url and --client-secret-env)."),
        click.option("--client-secret-env", metavar="VAR", help="The variable holding the --client-id's secret."),
        click.option("--scope", "scopes", multiple=True, metavar="SCOPE",
                     help="With --client-id: ask for this scope (repeatable); default: every scope the server lists, "
                          "which an issuer refuses if the client does not hold them all."),
        click.option("--issuer", metavar="URL",
                     help="With --client-id: send the credentials only to this issuer (default: the one the server "
                          "names, over https, in metadata that describes --url)."),
    ]
    for option in reversed(options):
        func = option(func)
    return _store_options(func)


@main.command()
@_any_server_options
@click.option("--json", "as_json", is_flag=True, help="Print the structured content instead of the text.")
@click.argument("tool")
@click.argument("arguments", default="{}")
def call(store, sparql_url, wikidata, profile, languages, enable_sparql, as_json, tool, arguments, **remote):
    """Call TOOL with ARGUMENTS (a JSON object) on any MCP server and print the result.

    \b
    kg-mcp call find_entities '{"name": "Vincent van Gogh"}'
    kg-mcp call --store S search '{"entity": "kg:Catch_Me_If_You_Can"}'
    kg-mcp call --url http://127.0.0.1:8000/mcp --auth-token-env TOKEN get_relations '{"entity": "wd:Q42"}'
    kg-mcp call --url https://kg.example.org/mcp --cacert team-ca.pem --client-id nightly \\
        --client-secret-env NIGHTLY_SECRET --scope kg:read find_entities '{"name": "Tom Hanks"}'
    """
    try:
        args = json.loads(arguments)
    except json.JSONDecodeError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint="ARGUMENTS") from None
    if not isinstance(args, dict):
        raise click.BadParameter("must be a JSON object", param_hint="ARGUMENTS")
    result = _talk(_call, (tool, args), (store, sparql_url, wikidata, profile, languages, enable_sparql), **remote)
    if as_json:
        click.echo(json.dumps(result.structured_content, indent=1, ensure_ascii=False))
    else:
        click.echo("\n".join(getattr(c, "text", str(c)) for c in result.content))
    if result.is_error:
        sys.exit(1)


@main.command()
@_any_server_options
@click.option("--json", "as_json", is_flag=True, help="Print the server's lists as JSON.")
def tools(store, sparql_url, wikidata, profile, languages, enable_sparql, as_json, **remote):
    """List any MCP server's tools with their arguments, its resources and its prompts.

    \b
    kg-mcp tools --store S
    kg-mcp tools --server-cmd 'npx -y @modelcontextprotocol/server-everything'
    """
    from kg_mcp.cli.listing import describe, read_lists

    lists = _talk(read_lists, (), (store, sparql_url, wikidata, profile, languages, enable_sparql), **remote)
    if as_json:
        click.echo(json.dumps({kind: [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in items]
                               for kind, items in lists.items()}, indent=1, ensure_ascii=False))
    else:
        click.echo(describe(lists))


def _talk(conversation, args, kg, *, server_cmd, url, auth_token_env, cacert, client_id, client_secret_env, scopes, issuer):
    """Run `conversation(client, *args)` against a spawned server, a URL, or the KG `kg` (the store
    options) served in-process."""
    from mcp import StdioServerParameters

    from kg_mcp.cli.remote import Remote, secret_from

    if server_cmd and url:
        raise ConfigError("Give --server-cmd or --url, not both.")
    if not url and (cacert or client_id or scopes or issuer):
        raise ConfigError("--cacert, --client-id, --scope and --issuer go with --url.")
    remote = None
    if url:
        remote = Remote(url, secret_from(auth_token_env), cacert, client_id, secret_from(client_secret_env),
                        tuple(scopes), issuer)
        target = remote.transport()
    elif server_cmd:
        command, *cmd_args = shlex.split(server_cmd)
        target = StdioServerParameters(command=command, args=cmd_args, env=dict(os.environ))
    else:
        from kg_mcp.server import build_server

        store, sparql_url, wikidata, profile, languages, enable_sparql = kg
        backend = _open(store, sparql_url, wikidata, profile, _settings(languages, enable_sparql))
        target = build_server(backend, backend.settings)

    async def session():
        from mcp import Client

        async with Client(target) as client:
            return await conversation(client, *args)

    try:
        return asyncio.run(session())
    except Exception as e:  # a server that cannot be started or reached, or refuses us (401...)
        if not (server_cmd or url):
            raise
        cause = _root_cause(e)
        said = remote.explain(cause) if remote is not None else ""
        raise click.ClickException(said or f"cannot talk to the MCP server: {type(cause).__name__}: {cause}") from None


def _root_cause(error: BaseException) -> BaseException:
    """The first error inside the exception groups that anyio wraps transport failures in."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


async def _call(client, tool: str, args: dict):
    return await client.call_tool(tool, args)
