"""Commands that serve a KG or make its store: serve, load, index, info. They never import the drivers."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from kg_mcp.cli.common import _open, _settings, _store_options, chosen_graphs, graph_option, main
from kg_mcp.errors import ConfigError
from kg_mcp.profiles import PROFILES
from kg_mcp.settings import sparql_offered

log = logging.getLogger("kg_mcp")


@main.command()
@_store_options
@click.option("--transport", type=click.Choice(["stdio", "http", "sse"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8000, show_default=True, type=int)
@click.option("--auth-token-env", metavar="VAR", help="Require this bearer token (read from the variable VAR) on HTTP.")
@click.option("--auth-token-file", type=click.Path(dir_okay=False),
              help="Require the bearer token kept in this file (KG_MCP_AUTH_TOKEN_FILE).")
@click.option("--tokens", "tokens_file", type=click.Path(dir_okay=False),
              help="Named tokens for scripts and CI (TOML: [tokens.NAME] with sha256 and scopes); read again when it "
                   "changes (KG_MCP_TOKENS).")
@click.option("--oauth-issuer", metavar="URL",
              help="Accept access tokens of this OAuth 2.1 / OpenID issuer (https, or http on loopback); needs "
                   "--public-url (KG_MCP_OAUTH_ISSUER).")
@click.option("--public-url", metavar="URL",
              help="The URL clients reach the MCP endpoint at, e.g. https://kg.example.org/mcp: the audience of every "
                   "access token, and a Host header accepted (KG_MCP_PUBLIC_URL).")
@click.option("--oauth-client-id", metavar="ID",
              help="This server's own client at the issuer, to introspect opaque tokens (RFC 7662; KG_MCP_OAUTH_CLIENT_ID).")
@click.option("--oauth-client-secret-env", metavar="VAR",
              help="The variable holding that client's secret (default: KG_MCP_OAUTH_CLIENT_SECRET).")
@click.option("--graph-access", type=click.Path(dir_okay=False),
              help="TOML: which named graphs each scope may read ([scopes] \"graph:movies\" = [IRI, ...]; KG_MCP_GRAPH_ACCESS).")
@click.option("--metadata-scopes", type=click.Choice(["all", "base"]),
              help="Scopes named in the public Protected Resource Metadata: all, or base (kg:read and kg:sparql, the "
                   "graph scopes unnamed; the issuer must then grant them unasked) [all] (KG_MCP_METADATA_SCOPES).")
@click.option("--audit-log", metavar="FILE",
              help="Append one JSON line per call (who, what, outcome, rows, ms) to this file, rotated past 10 MB; or "
                   "send the lines to stdout (HTTP only), stderr or journald (KG_MCP_AUDIT_LOG).")
@click.option("--allow-host", "allowed_hosts", multiple=True,
              help="Extra Host header to accept, e.g. kg.example.org:443 (KG_MCP_ALLOWED_HOSTS).")
@click.option("--allow-origin", "allowed_origins", multiple=True, help="Extra Origin to accept (KG_MCP_ALLOWED_ORIGINS).")
@click.option("--rate-limit", type=click.IntRange(min=0), metavar="N",
              help="HTTP/SSE: at most N requests a minute per client (a signed-in caller, else an address), then 429 with "
                   "Retry-After (default off; KG_MCP_RATE_LIMIT).")
@click.option("--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDR",
              help="A reverse proxy (address or network) whose X-Forwarded-For names the client; repeatable. "
                   "Without one, the peer address is the client (rate limits, caps).")
@click.option("--header-timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="HTTP/SSE: close a connection that has not sent a whole request head within S s [10].")
@click.option("--body-timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="HTTP/SSE: close a connection whose request body has not arrived S s after its head [30].")
@click.option("--write-timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="HTTP/SSE: close a connection that takes none of its response for S s [30].")
@click.option("--max-body", type=click.IntRange(min=1024), metavar="BYTES",
              help="HTTP/SSE: refuse (413) a request body larger than BYTES before reading it [262144].")
@click.option("--max-connections", type=click.IntRange(min=0), metavar="N",
              help="HTTP/SSE: connections held at once, more are closed at once [0: the open-file limit less a reserve].")
@click.option("--max-connections-per-client", type=click.IntRange(min=0), metavar="N",
              help="HTTP/SSE: connections from one address (trusted proxies exempt) [256; 0: no cap].")
@click.option("--max-sessions", type=click.IntRange(min=1), metavar="N", help="HTTP: MCP sessions open at once, all clients [1000].")
@click.option("--max-sessions-per-client", type=click.IntRange(min=1), metavar="N",
              help="HTTP: MCP sessions of one client (a signed-in caller, else an address); opening one more ends its "
                   "oldest idle one [64].")
@click.option("--session-idle-timeout", type=click.FloatRange(min=0, min_open=True), metavar="S",
              help="HTTP: end an MCP session after S s without requests [1800].")
@click.option("--stateless", is_flag=True, default=None,
              help="HTTP: keep no MCP session, so any replica behind a load balancer can take any request (KG_MCP_STATELESS).")
@click.option("--redis", "redis_url", metavar="URL",
              help="Keep traversals, rate limits, long-call places and build locks in this Redis, shared by replicas "
                   "(redis://host:6379/0; KG_MCP_REDIS). Without it, in this process.")
@click.option("--otlp-endpoint", metavar="URL", envvar="OTEL_EXPORTER_OTLP_ENDPOINT",
              help="Send OpenTelemetry traces of each call and its queries to this OTLP/HTTP collector "
                   "(needs pip install 'kg-mcp[otel]'; OTEL_EXPORTER_OTLP_ENDPOINT).")
def serve(store, sparql_url, wikidata, profile, languages, enable_sparql, transport, host, port, auth_token_env, auth_token_file,
          tokens_file, oauth_issuer, public_url, oauth_client_id, oauth_client_secret_env, graph_access, metadata_scopes, audit_log,
          allowed_hosts, allowed_origins, rate_limit, trusted_proxies, header_timeout, body_timeout, write_timeout, max_body, max_connections,
          max_connections_per_client, max_sessions, max_sessions_per_client, session_idle_timeout, stateless, redis_url, otlp_endpoint):
    """Serve the KG tools over stdio (default), streamable HTTP or SSE.

    Over HTTP every connection, session and request is bounded (docs/security.md, "Security and limits");
    each bound is an option here and a KG_MCP_* setting.

    What the tools print is bounded by KG_MCP_* settings too: KG_MCP_MAX_CELL_CHARS (a value in a
    table, 200 characters; a cut one ends in …[N of M chars]), KG_MCP_MAX_NESTED_CHARS (a blank
    node's inline description, 600), KG_MCP_MAX_OUTPUT_CHARS (one tool's output or a listing's
    page, 20,000), KG_MCP_MAX_VALUE_CHARS (values read whole by a search for one property of one
    entity, 100,000), KG_MCP_SEARCH_K and KG_MCP_SEARCH_P (rows of a search, 50 unfiltered and
    1,000 filtered), KG_MCP_EXPLORE_LIMIT (triples per relation of explore_kg, 100).
    """
    from kg_mcp.backends.graph_access import read_graph_access
    from kg_mcp.server import build_server
    from kg_mcp.serving import serve as run_server
    from kg_mcp.serving.audit import open_audit
    from kg_mcp.serving.auth import endpoint_url, public_host, read_token, server_auth
    from kg_mcp.serving.health import MetricsAccess

    settings = _settings(languages, enable_sparql)
    # Each sign-in flag, else its KG_MCP_* setting (an environment file's).
    auth_token_file = auth_token_file or (settings.auth_token_file if not auth_token_env else "") or None
    tokens_file = tokens_file or settings.tokens or None
    oauth_issuer = oauth_issuer or settings.oauth_issuer or None
    public_url = public_url or settings.public_url or None
    oauth_client_id = oauth_client_id or settings.oauth_client_id or None
    graph_access = graph_access or settings.graph_access or None
    audit_log = audit_log or settings.audit_log or None
    allowed_hosts = [*allowed_hosts, *settings.allowed_hosts]
    allowed_origins = [*allowed_origins, *settings.allowed_origins]
    client_secret = (read_token(env_var=oauth_client_secret_env) if oauth_client_secret_env
                     else settings.oauth_client_secret.get_secret_value() or None)
    token = read_token(env_var=auth_token_env, file=auth_token_file)
    if (token or tokens_file or oauth_issuer) and transport == "stdio":
        raise ConfigError("Auth tokens apply to --transport http or sse; stdio is reached only by its parent process.")
    if rate_limit and transport == "stdio":
        raise ConfigError("--rate-limit applies to --transport http or sse; stdio has one client, its parent process.")
    access = read_graph_access(graph_access) if graph_access else None
    if access is not None and not (tokens_file or oauth_issuer):
        raise ConfigError("--graph-access gives each caller its graphs by the scopes of its token: "
                          "give --oauth-issuer or --tokens too (over --transport http or sse).")
    graph_scopes = access.scopes if access is not None and (metadata_scopes or settings.metadata_scopes) == "all" else []
    display_host = f"[{host}]" if ":" in host else host
    path = "/mcp" if transport == "http" else "/sse"
    public_endpoint = endpoint_url(public_url, path)
    auth = server_auth(
        token=token, tokens_file=tokens_file, issuer=oauth_issuer, public_url=public_endpoint,
        client_id=oauth_client_id, client_secret=client_secret, more_scopes=graph_scopes, leeway_s=settings.oauth_leeway_s,
    )
    if public_endpoint:
        allowed_hosts.append(public_host(public_endpoint))
    if transport != "stdio" and host not in ("127.0.0.1", "localhost", "::1") and not auth:
        log.warning("serving on %s without --auth-token-env, --tokens or --oauth-issuer: anyone who can reach it can query", host)
    audit = open_audit(audit_log, transport=transport) if audit_log else None
    limits = None
    if transport != "stdio":  # checked before the store opens: a bad --trusted-proxy fails at once
        from kg_mcp.serving.limits import HttpLimits

        limits = HttpLimits.from_settings(
            settings, trusted_proxies=trusted_proxies, header_timeout_s=header_timeout,
            body_timeout_s=body_timeout, write_timeout_s=write_timeout, max_body_bytes=max_body, max_connections=max_connections, max_connections_per_client=max_connections_per_client,
            max_sessions=max_sessions, max_sessions_per_client=max_sessions_per_client, session_idle_timeout_s=session_idle_timeout)
    settings = settings.model_copy(update={"sparql_tool": sparql_offered(settings.sparql_tool, transport)})
    if stateless is None:  # KG_MCP_STATELESS (an environment file's) concerns streamable HTTP only
        stateless = settings.stateless and transport == "http"
    redis_url = settings.redis if redis_url is None else redis_url
    if stateless and transport != "http":
        raise ConfigError("--stateless applies to --transport http (streamable HTTP).")
    if otlp_endpoint:
        from kg_mcp.observability import tracing

        tracing.configure(otlp_endpoint)
    from kg_mcp.state import open_shared_state

    shared = open_shared_state(redis_url, tool_timeout_s=settings.tool_timeout_s)  # a bad URL fails before the store opens
    backend = _open(store, sparql_url, wikidata, profile, settings, shared, named_graphs=access is not None)
    server = build_server(backend, backend.settings, auth=auth, audit=audit, graph_access=access, shared=shared)
    if transport != "stdio":
        where = getattr(backend, "location", None) or getattr(backend, "url", "")
        signin = f" (sign in at {oauth_issuer})" if oauth_issuer else " (bearer token required)" if auth else ""
        click.echo(f"kg-mcp: serving {where} at http://{display_host}:{port}{path}{signin}", err=True)
    try:
        limit = backend.settings.rate_limit if rate_limit is None else rate_limit
        readiness = None
        if transport != "stdio":
            from kg_mcp.serving.health import Readiness, backend_check

            checks = {"store" if backend.kind == "oxigraph" else "endpoint": backend_check(backend)}
            if redis_url:
                checks["redis"] = shared.ping
            readiness = Readiness(checks, _warnings(backend, access))
        run_server(server, transport, host=host, port=port, allowed_hosts=list(allowed_hosts),
                   allowed_origins=list(allowed_origins), rate_limit=limit or None, limits=limits,
                   stateless=stateless, readiness=readiness, shared=shared,
                   metrics_access=MetricsAccess.from_settings(settings))
    except KeyboardInterrupt:
        pass
    finally:
        backend.close()
        if audit is not None:
            audit.close()
        shared.close()
        if otlp_endpoint:
            tracing.shutdown()


def _warnings(backend, access) -> dict:
    """What /readyz tells without failing: graph sets granted without a name index."""
    from kg_mcp.server import name_index_gaps_text

    if not hasattr(backend, "name_index_gaps"):
        return {}

    def name_indexes():
        gaps = backend.name_index_gaps()
        return name_index_gaps_text(gaps, backend.path, access.source if access else "") if gaps else None

    return {"name_indexes": name_indexes}


@main.command()
@click.argument("sources", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--store", required=True, type=click.Path(file_okay=False, path_type=Path), help="Store directory (created if missing).")
@click.option("--format", "fmt",
              help="Override the format guessed from the file name (nt, nq, ttl, trig, rdfxml, n3, jsonld, owx, ofn, obo, "
                   "text, wikidata-json).")
@click.option("--base-iri", help="Namespace for names minted from plain-text triple files.")
@click.option("--skip-bad", is_flag=True, help="Skip and count malformed lines instead of stopping.")
@click.option("--hub-threshold", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Keep predicate statistics for nodes with at least this many edges in one direction.")
@click.option("--optimize/--no-optimize", default=True, show_default=True,
              help="Compact the store once loaded: a longer load, and reads 2-7x faster on big stores.")
@click.option("--graph", metavar="IRI",
              help="Load into this named graph rather than the default graph (serve it with --graph, or per caller "
                   "with --graph-access); its name index is built with it. Not for nq and trig, which name their graphs.")
@click.option("--context", "contexts", multiple=True, metavar="URL=FILE",
              help="JSON-LD: read the remote @context URL (as the document writes it) from FILE, a local copy; "
                   "repeatable. Nothing is fetched from the network (schema.org's context ships with kg-mcp).")
@click.option("--graph-access", type=click.Path(exists=True, dir_okay=False),
              help="Also build the name index of every set of graphs this file's scopes can give a caller, so that "
                   "`kg-mcp serve --graph-access FILE` finds each ready on a read-only store.")
def load(sources, store, fmt, base_iri, skip_bad, hub_threshold, optimize, graph, contexts, graph_access):
    """Bulk-load RDF, plain-text triples or Wikidata JSON into a store, atomically.

    A load adds to what the store holds. A failed or interrupted load leaves the previous store as it was.
    """
    from kg_mcp.loading import LoadError, load_sources
    from kg_mcp.namespaces import DEFAULT_BASE_IRI

    copies = {}
    for given in contexts:
        url, equals, file = given.rpartition("=")
        if not equals or not url or not file:
            raise click.BadParameter(f"{given!r}: write it URL=FILE (the context's URL, then the local copy)", param_hint="--context")
        copies[url] = Path(file)
    grants = None
    if graph_access:
        from kg_mcp.backends.graph_access import grant_sets, read_graph_access

        access = read_graph_access(graph_access)

        def grants(held):
            return grant_sets(access, held)

    try:
        report = load_sources(
            list(sources),
            store,
            format=fmt,
            base_iri=base_iri or DEFAULT_BASE_IRI,
            skip_bad=skip_bad,
            hub_threshold=hub_threshold,
            optimize=optimize,
            graph=graph,
            contexts=copies,
            grant_sets=grants,
        )
    except LoadError as e:
        raise click.ClickException(f"load failed, the store is unchanged: {e}") from None
    click.echo(report.summary(), err=True)


@main.command()
@click.option("--store", type=click.Path(exists=True, file_okay=False, path_type=Path), help="A store made by `kg-mcp load`.")
@click.option("--sparql", "sparql_url", metavar="URL", help="A SPARQL endpoint: its index is cached under $KG_MCP_CACHE.")
@graph_option
@click.option("--rebuild", is_flag=True, help="With --sparql: build again even if the cached index is current.")
@click.option("--degrees", is_flag=True,
              help="With --store: also record each entity's degree, so lookups rank without reading the store "
                   "(an endpoint's index always has them).")
@click.option("--from", "sources", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="With --store: read the names, their degrees and labels from the N-Triples files the store was "
                   "loaded from (repeatable), as kg-mcp load does: at scale much quicker than reading the store.")
@click.option("--graph-access", type=click.Path(exists=True, dir_okay=False),
              help="With --store: build the index of every set of graphs this file's scopes can give a caller "
                   "(what `kg-mcp serve --graph-access FILE` looks names up in), before replicas open the store read-only.")
@click.option("--profile", type=click.Choice(sorted(PROFILES)), help="Schema profile (detected if not given).")
@click.option("--language", "languages", multiple=True, help="Label language, in order of preference (repeatable).")
def index(store, sparql_url, rebuild, degrees, sources, graph_access, profile, languages):
    """(Re)build the name index that `find_entities` looks names up in, of a store or an endpoint.

    `kg-mcp load` builds a store's with the store, and a store without one gets it on first open;
    this rebuilds it for other languages or a store loaded by an older kg-mcp. With --graph, it
    builds the index of those named graphs read as one; with --graph-access FILE, of every set of
    graphs the file can grant a caller (a server that opens the store read-only cannot build them).
    An endpoint without text search gets its index at start when it has at most
    `endpoint_index_max_labels` labels; this builds it for larger ones (and the server then uses it
    whatever the size).
    """
    if bool(store) == bool(sparql_url):
        raise ConfigError("Give one of --store DIR or --sparql URL.")
    if sparql_url:
        if graph_access:
            raise ConfigError("--graph-access goes with --store: an endpoint's index holds every graph it serves.")
        _index_endpoint(sparql_url, rebuild, profile, languages)
        return
    if rebuild:
        raise ConfigError("--rebuild goes with --sparql; a store's index is always rebuilt.")
    if (chosen_graphs() or graph_access) and (sources or degrees):
        raise ConfigError("--from and --degrees build the default graph's index; give them without --graph and --graph-access.")
    if chosen_graphs() or graph_access:
        _index_graph_sets(store, graph_access, profile, languages)
        return
    if sources and degrees:
        raise ConfigError("--from records the degrees already; --degrees reads them from the store instead.")
    settings = _settings(languages, False)
    import pyoxigraph as ox

    from kg_mcp.names.store_index import build_store_index, store_profile

    try:
        opened = ox.Store.read_only(str(store))
    except OSError as e:
        raise ConfigError(f"Cannot open the store at {store}: {e}") from e
    chosen = store_profile(opened, profile)
    if sources:
        from kg_mcp.names import index_path
        from kg_mcp.names.scan import index_from_text
        from kg_mcp.names.store_index import store_stamp

        try:
            count = index_from_text(list(sources), index_path(store), chosen, settings.languages, store_stamp(opened))
        except ValueError as e:
            raise ConfigError(f"Cannot index {store} from its files: {e}") from None
        click.echo(f"name index of {store}: {count:,} names with degrees and labels, from {len(sources)} file(s) "
                   f"({chosen.name} profile)", err=True)
        return
    count = build_store_index(opened, store, profile=chosen, languages=settings.languages)
    click.echo(f"name index of {store}: {count:,} names ({chosen.name} profile)", err=True)
    if degrees:
        from kg_mcp.backends.name_degrees import add_store_degrees
        from kg_mcp.names import index_path

        seconds = add_store_degrees(index_path(store), opened, chosen, settings.degree_cap)
        click.echo(f"degrees recorded in {seconds:.1f} s", err=True)


def _index_graph_sets(store: Path, graph_access: str | None, profile: str | None, languages) -> None:
    """The name index of --graph's set, and of every graph set --graph-access can grant."""
    import pyoxigraph as ox

    from kg_mcp.backends.graph_access import grant_sets, read_graph_access
    from kg_mcp.backends.oxigraph_store import named_data_graphs
    from kg_mcp.names.store_index import build_store_index, store_profile

    settings = _settings(languages, False)
    try:
        opened = ox.Store.read_only(str(store))
    except OSError as e:
        raise ConfigError(f"Cannot open the store at {store}: {e}") from e
    held = named_data_graphs(opened)
    missing = [g for g in chosen_graphs() if g not in held]
    if missing:
        raise ConfigError(f"The store at {store} has no graph {missing[0]} (its named graphs: {', '.join(held) or 'none'}).")
    sets = [tuple(sorted(chosen_graphs()))] if chosen_graphs() else []
    if graph_access:
        sets += [s for s in grant_sets(read_graph_access(graph_access), held) if s not in sets]
    chosen = store_profile(opened, profile)
    for graphs in sets:
        count = build_store_index(opened, store, profile=chosen, languages=settings.languages, graphs=graphs)
        click.echo(f"name index of {', '.join(graphs)}: {count:,} names ({chosen.name} profile)", err=True)


def _index_endpoint(url: str, rebuild: bool, profile: str | None, languages) -> None:
    from kg_mcp.backends import endpoint_names as en
    from kg_mcp.backends import open_endpoint
    from kg_mcp.errors import EndpointError
    from kg_mcp.names import read_index_meta

    # Opened without a name index (this command builds it), reading the graphs of --graph or KG_MCP_GRAPHS.
    settings = _settings(languages, False).model_copy(update={"name_index": False})
    graphs = settings.graphs
    backend = open_endpoint(url, profile=profile, settings=settings)
    try:
        path = en.endpoint_index_path(url, graphs)
        meta = read_index_meta(path)
        if (
            not rebuild
            and en.fits(meta, url, graphs, backend.profile, settings.languages)
            and en.young(meta, settings.name_index_max_age_days)
        ):
            click.echo(f"name index of {url} is current ({meta['names']:,} names, {path}); --rebuild builds it again",
                       err=True)
            return
        predicates = [*backend.profile.label_predicates, *backend.profile.alias_predicates]
        try:
            counted = en.count_labels(backend._solutions, predicates, settings.languages, 10**10)
        except EndpointError:
            counted = None  # too many to count within the query time limit: the build goes on without a total
        report = en.build_endpoint_index(
            backend._solutions, path, url=url, graphs=graphs, profile=backend.profile, languages=settings.languages,
            degree_cap=settings.degree_cap, counted=counted, by=en.BUILT_BY_COMMAND,
        )
    except EndpointError as e:
        raise ConfigError(f"Cannot build the name index of {url}: {e}") from None
    finally:
        backend.close()
    click.echo(f"name index of {url}: {report.summary()}; cached in {path}", err=True)


@main.command()
@_store_options
def info(store, sparql_url, wikidata, profile, languages, enable_sparql):
    """Size and shape of a KG: triples, entities, relations, top relations."""
    backend = _open(store, sparql_url, wikidata, profile, _settings(languages, enable_sparql))
    stats = backend.stats()
    click.echo(f"kind: {stats.kind}\nprofile: {stats.profile}")
    for key, value in stats.details.items():
        click.echo(f"{key}: {value}")
    for key in ("triples", "entities", "relations"):
        value = getattr(stats, key)
        if value is None:
            click.echo(f"{key}: not counted")
        else:
            click.echo(f"{key}: {'at least ' if stats.bounded else ''}{value:,}")
    if stats.top_relations:
        labels = backend.labels([p for p, _ in stats.top_relations])
        click.echo("top relations:")
        for predicate, count in stats.top_relations:
            label = labels.get(predicate)
            click.echo(f"  {count:>10,}  {backend.vocab.compact(predicate)}" + (f"  ({label})" if label else ""))
    if hasattr(backend, "graph_sizes"):
        _echo_graphs(backend)
    backend.close()


def _echo_graphs(backend) -> None:
    """An endpoint's named graphs, their sizes, and which ones the tools read."""
    plan = backend.graph_plan
    if not plan.graphs:  # else the stats' details named them
        click.echo(f"graphs: {plan.reason}")
    sizes = backend.graph_sizes()
    if not sizes:
        click.echo("named graphs: none listed")
        return
    click.echo(f"named graphs (triples, counted up to {backend.count_cap:,}):")
    for graph in sizes:
        if graph.triples is None:
            count = "not counted"
        else:
            count = f"{'at least ' if graph.bounded else ''}{graph.triples:,}"
        if graph.read is None:
            note = f"{graph.engine}'s own" if graph.engine else ""
        elif graph.read:
            note = "read"
        else:
            note = f"{graph.engine}'s own, not read" if graph.engine else "not read"
        click.echo(f"  {count:>18}  {graph.iri}" + (f"  ({note})" if note else ""))

