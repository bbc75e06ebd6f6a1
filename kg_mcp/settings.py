"""Settings shared by the server, the tools and the backends, from flags or KG_MCP_* variables."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from kg_mcp.errors import ConfigError
from kg_mcp.namespaces import OWN_GRAPHS

# An absolute IRI as SPARQL writes it between < >: a scheme, then no spaces, quotes or brackets.
_GRAPH_IRI = re.compile(r'[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>"{}|^`\\]+')
LIST_FORM = "values separated by commas or spaces (or a JSON list)"
PAIRS_FORM = "NAME=IRI pairs separated by commas or spaces (or a JSON object)"


def words(value):
    """A list setting from a variable, in any form a shell or systemd leaves of it: comma or space
    separated, or a JSON list, even one whose quotes a shell took away.

    >>> words("en, mul"), words('["127.0.0.1", "10.0.0.0/8"]'), words("[127.0.0.1]")
    (['en', 'mul'], ['127.0.0.1', '10.0.0.0/8'], ['127.0.0.1'])
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except ValueError:
            text = text[1:-1] if text.endswith("]") else text[1:]
    return [part.strip("'\"") for part in re.split(r"[\s,]+", text) if part.strip("'\"")]


def pairs(value):
    """A NAME -> IRI setting from a variable: `NAME=IRI` pairs separated by commas or spaces, or a JSON object.

    >>> pairs("ex=http://example.org/ wd=http://www.wikidata.org/entity/")
    {'ex': 'http://example.org/', 'wd': 'http://www.wikidata.org/entity/'}
    """
    if not isinstance(value, str):
        return value
    if value.strip().startswith("{"):
        try:
            return json.loads(value)
        except ValueError:
            raise ValueError("not a JSON object") from None
    found = {}
    for part in words(value):
        name, equals, iri = part.partition("=")
        if not equals or not name or not iri:
            raise ValueError(f"{part!r} is not NAME=IRI")
        found[name] = iri
    return found


# Lists and tables as a variable gives them (`words`, `pairs`), not pydantic-settings' JSON alone.
WordList = Annotated[list[str], NoDecode, BeforeValidator(words)]
PairTable = Annotated[dict[str, str], NoDecode, BeforeValidator(pairs)]


class Settings(BaseSettings):
    """Defaults follow Search-on-Graph (k = 50, p = 1000); every one can be set as KG_MCP_<NAME>."""

    model_config = SettingsConfigDict(env_prefix="KG_MCP_", extra="ignore")

    search_k: int = Field(50, ge=1, le=10_000, description="above this many rows, search shows properties only")
    search_p: int = Field(1000, ge=1, le=100_000, description="rows shown for a filtered search")
    explore_limit: int = Field(100, ge=1, le=100_000, description="triples shown per relation by explore_kg")
    languages: WordList = Field(["en", "mul"], description="label languages in order of preference")
    max_cell_chars: int = Field(
        200, ge=20, description="a value longer than this is cut in the markdown output, ending in …[N of M chars]"
    )
    max_nested_chars: int = Field(
        600, ge=100, description="a blank node's inline description ([ p v ; ... ], lists as ( a b )) is cut here"
    )
    max_output_chars: int = Field(
        20_000, ge=1000,
        description="characters of one result (--max-output-chars): a listing's page holds the rows that fit it, as "
        "text and as JSON alike, and gives a cursor to the next; any other result is cut at it",
    )
    max_value_chars: int = Field(
        100_000, ge=1000,
        description="search filtered to one property of one entity returns its values whole up to this many characters in all",
    )
    degree_cap: int = Field(10_000, ge=1, description="degrees are counted up to this and shown as N+")
    count_cap: int = Field(
        100_000, ge=100, description="edge counts of a hub without load-time statistics stop here (shown as N+)"
    )
    prefixes: PairTable = Field(
        {}, description="extra prefixes, name -> namespace IRI (--prefix NAME=IRI; KG_MCP_PREFIXES: NAME=IRI pairs "
        "separated by spaces or commas): ids are shown and read with them"
    )
    prefix_discovery: bool = Field(
        True,
        description="on an endpoint, look at what it holds at start: its data graphs (leaving out the "
        "engine's own) and prefixes for its dominant namespaces (VoID, a bounded sample)",
    )
    schema_summary_s: float = Field(
        10.0, ge=0, description="at start, the KG summary in the server instructions takes at most this long on an endpoint (0: no summary)"
    )
    name_index: bool = Field(
        True,
        description="find_entities: a name index (a local store's own; on an endpoint without text search, one "
        "built from its labels and cached); off: label queries",
    )
    endpoint_index_max_labels: int = Field(
        2_000_000, ge=0, description="an endpoint without text search gets a name index (built from server start) up to this many labels"
    )
    endpoint_index_wait_labels: int = Field(
        100_000, ge=0, description="a lookup waits for an endpoint's name index being built up to this many labels (seconds away)"
    )
    name_index_wait_s: float = Field(
        60.0, ge=0, description="a lookup waits for a small endpoint name index until its build is this old "
        "(and at most the call's own time limit)"
    )
    name_index_max_age_days: float = Field(
        7.0, gt=0, description="an endpoint's cached name index is rebuilt (or, if kg-mcp index built it, flagged) past this age"
    )
    warm_name_index: bool = Field(
        True, description="read a name index into the page cache when a server opens it (in the background) and "
        "at the end of kg-mcp load, if it fits in half the memory free (a big store's first lookups then do not "
        "wait for the disk)"
    )
    semantic_lookup: bool = Field(
        False, description="find_entities: when no name matches by words or typos, offer the nearest by embedding"
    )
    text_search: str = Field(
        "auto",
        pattern="^(auto|mwapi|virtuoso|qlever|labels)$",
        description="find_entities on an endpoint: its own text search (auto: detected), or label queries",
    )
    graphs: WordList = Field(
        [],
        description="the named graphs every query reads, as one graph (--graph IRI, repeatable; "
        "KG_MCP_GRAPHS: IRIs separated by spaces or commas); empty: an endpoint's data graphs, a store's default graph",
    )
    sparql_tool: bool | None = Field(
        None, description="offer the read-only sparql tool (--enable-sparql / --no-sparql); unset: offered over stdio "
        "and in-process, where the caller owns the data, and not over HTTP or SSE unless enabled (then to callers "
        "whose token holds kg:sparql)"
    )
    sparql_row_cap: int = Field(200, ge=1, le=100_000)
    # An endpoint's answers are read as they stream in and no further than these (kg_mcp.backends.engine_answers).
    sparql_answer_mb: float = Field(
        4.0, gt=0, description="the sparql tool reads an endpoint's answer up to this many MB; past it the rows read are shown, flagged cut"
    )
    endpoint_answer_mb: float = Field(
        16.0, gt=0, description="the other tools read an endpoint's answer to one of their queries up to this many MB; past it the call fails and says so"
    )
    timeout_s: float = Field(30.0, gt=0, description="per query on a remote endpoint, and per sparql query on a local store")
    query_workers: int = Field(2, ge=1, le=64, description="processes running sparql queries on a local store")
    retries: int = Field(3, ge=0, le=10, description="on 429/5xx and dropped connections")
    rate_limit: int = Field(0, ge=0, description="HTTP requests a minute per client: a signed-in caller, else an address (0: no limit)")
    contact: str = Field(
        "https://github.com/kg-mcp/kg-mcp",
        description="contact put in the User-Agent, as Wikimedia's policy asks (an URL or e-mail)",
    )
    query_memory_mb: int = Field(
        1024, ge=0, description="a local sparql query's worker is stopped past this much private memory (0: no limit)"
    )
    tool_timeout_s: float = Field(
        30.0, gt=0, description="every tool call is stopped past this many seconds, with an error that says how to narrow it"
    )
    heavy_calls: int = Field(
        2, ge=1, le=64,
        description="long tool calls (verify, follow, kgr_search, batches) run at once, half of them at most one caller's; "
        "more wait their turn",
    )
    oauth_leeway_s: float = Field(
        30.0, ge=0, le=300, description="OAuth access tokens: clock skew allowed on exp and nbf (kg_mcp.serving.oauth)"
    )
    worker_processes: int = Field(
        0, ge=0, le=64, description="long tool calls run in this many worker processes, each with the store open "
        "read-only, so light calls never wait on them for the interpreter (0: worker threads; local stores only)"
    )
    sparql_calls: int = Field(
        2, ge=1, le=64,
        description="sparql queries run at once on an endpoint (on a local store: query_workers), one at a time per caller",
    )
    short_calls: int = Field(
        16, ge=1, le=64,
        description="other calls on threads (every call on an endpoint, name lookups) run at once, a quarter at most one caller's",
    )
    queued_calls_per_caller: int = Field(
        32, ge=0, le=1000,
        description="calls of one caller waiting for a turn in each lane (a team behind one address: one call each); "
        "more are refused as busy",
    )
    queued_calls: int = Field(256, ge=0, le=100_000, description="calls waiting for a turn in each lane, all callers together")
    # The HTTP transports' bounds (kg_mcp.serving.limits explains the defaults).
    header_timeout_s: float = Field(10.0, gt=0, description="HTTP: a connection that has not sent a whole request head by then is closed")
    body_timeout_s: float = Field(30.0, gt=0, description="HTTP: a request body that has not arrived by then closes its connection")
    write_timeout_s: float = Field(
        30.0, gt=0, description="HTTP: a connection that takes none of its response for this long is closed"
    )
    max_body_bytes: int = Field(
        262_144, ge=1024, description="HTTP: a request body larger than this is refused (413) before it is read"
    )
    max_connections: int = Field(0, ge=0, description="HTTP connections held at once (0: the open-file limit less a reserve)")
    max_connections_per_client: int = Field(256, ge=0, description="HTTP connections from one address (0: no cap)")
    max_sessions: int = Field(1000, ge=1, description="MCP sessions open at once on streamable HTTP, all clients together")
    max_sessions_per_client: int = Field(64, ge=1, description="MCP sessions of one client (a signed-in caller, else an address); its oldest idle one ends first")
    session_idle_timeout_s: float = Field(1800.0, gt=0, description="an MCP session without requests this long is ended")
    trusted_proxies: WordList = Field(
        [], description="peers whose X-Forwarded-For names the client (addresses or networks, separated by commas or spaces)"
    )
    allowed_hosts: WordList = Field(
        [], description="HTTP: more Host headers to accept (--allow-host), e.g. kg.example.org:443; the public URL's is accepted anyway"
    )
    allowed_origins: WordList = Field([], description="HTTP: more Origin headers to accept (--allow-origin)")
    # Sign-in (docs/team/signin.md): what `kg-mcp serve` is given as flags, or here.
    auth_token_file: str = Field("", description="HTTP: require the one bearer token kept in this file (--auth-token-file)")
    tokens: str = Field("", description="HTTP: the named tokens file (--tokens), read again when it changes")
    oauth_issuer: str = Field("", description="HTTP: accept access tokens of this OAuth / OpenID issuer (--oauth-issuer)")
    public_url: str = Field(
        "", description="HTTP: the URL clients reach the MCP endpoint at (--public-url): every access token's audience, "
        "and a Host header accepted"
    )
    oauth_client_id: str = Field("", description="HTTP: this server's own client at the issuer, to introspect opaque tokens (--oauth-client-id)")
    oauth_client_secret: SecretStr = Field(
        SecretStr(""), description="that client's secret (or --oauth-client-secret-env VAR naming the variable that holds it)"
    )
    graph_access: str = Field("", description="HTTP: the TOML file of which named graphs each scope reads (--graph-access)")
    metadata_scopes: Literal["all", "base"] = Field(
        "all", description="scopes listed in the public Protected Resource Metadata (--metadata-scopes): all (kg:read, "
        "kg:sparql and the graph scopes) or base (kg:read and kg:sparql: graph scopes go unnamed)"
    )
    audit_log: str = Field(
        "", description="append one JSON line per call to this file (--audit-log), or send it to stdout (HTTP only), "
        "stderr or journald"
    )
    # Replicas behind a load balancer (docs/team/deploy.md).
    stateless: bool = Field(False, description="streamable HTTP without MCP sessions: any replica can take any request")
    redis: str = Field("", description="redis:// URL of the store shared by replicas (traversals, rate limits, places, locks); empty: this process")
    metrics_callers: bool = Field(
        False, description="/metrics shows tool calls by signed-in caller, naming each subject, to anyone who reaches it"
    )
    metrics_token: SecretStr = Field(
        SecretStr(""), description="bearer token /metrics asks for (then it shows the series by caller too); empty: "
        "none asked"
    )
    cursor_key: SecretStr = Field(
        SecretStr(""), description="secret that signs the cursors of paged listings (any text); empty: one kept in "
        "the shared Redis, else one made by each process at start (a restart then ends open cursors)"
    )

    @field_validator("graphs")
    @classmethod
    def _check_graphs(cls, value: list[str]) -> list[str]:
        for iri in value:
            if (problem := graph_iri_problem(iri)) is not None:
                raise ValueError(problem)
        return list(dict.fromkeys(value))


def sparql_offered(setting: bool | None, transport: str = "stdio") -> bool:
    """Whether the sparql tool is offered over `transport` (stdio, http, sse; in-process use is stdio's
    case): as set, else where the caller owns the data. A model with it answered 12 of 12 ontology
    questions in 78.7k characters against 129.5k without it (issue 39), so it is on by default there;
    a team's HTTP server offers it when its operator enables it, to the callers its scope lets in.

    >>> sparql_offered(None), sparql_offered(None, "http"), sparql_offered(False), sparql_offered(True, "http")
    (True, False, False, True)
    """
    return setting if setting is not None else transport == "stdio"


def graph_iri_problem(iri: str) -> str | None:
    """What is wrong with `iri` as a graph name, or None when it is a full IRI of a data graph.

    >>> graph_iri_problem("urn:kg-mcp:stats")
    "'urn:kg-mcp:stats' is kg-mcp's own bookkeeping graph, not a graph of data to read"
    """
    if iri in OWN_GRAPHS:
        return f"{iri!r} is kg-mcp's own bookkeeping graph, not a graph of data to read"
    if _GRAPH_IRI.fullmatch(iri):
        return None
    return f"{iri!r} is not a graph IRI: write it in full, e.g. http://example.org/graph/movies"


def load_settings(**overrides) -> Settings:
    """Settings from the KG_MCP_* variables with `overrides` (flags) on top, or a ConfigError that
    names each variable that does not read and the form it takes."""
    try:
        return Settings(**overrides)
    except (ValidationError, SettingsError) as error:
        raise settings_error(error) from None


def settings_error(error: ValidationError | SettingsError) -> ConfigError:
    """What is wrong with the KG_MCP_* variables, in our words (never a value of a secret).

    >>> try:
    ...     Settings(search_k="many")
    ... except ValidationError as e:
    ...     print(settings_error(e))
    Bad setting: KG_MCP_SEARCH_K is 'many': Input should be a valid integer, unable to parse string as an integer (expected a whole number from 1 to 10000)
    """
    if isinstance(error, SettingsError):  # a field whose variable pydantic-settings could not decode
        field = re.search(r'field "(\w+)"', str(error))
        name = f"{Settings.model_config['env_prefix']}{field.group(1).upper()}" if field else "a KG_MCP_* variable"
        return ConfigError(f"Bad setting: {name} does not read as {_form(field.group(1) if field else '')}.")
    problems = []
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else ""
        name = f"{Settings.model_config['env_prefix']}{field.upper()}"
        secret = field in Settings.model_fields and Settings.model_fields[field].annotation is SecretStr
        given = problem.get("input")
        message = problem["msg"].removeprefix("Value error, ")
        shown = f" is {given!r}" if isinstance(given, (str, int, float)) and not secret and repr(given) not in message else ""
        problems.append(f"{name}{shown}: {message} (expected {_form(field)})")
    return ConfigError("Bad setting: " + "; ".join(problems))


def _form(field: str) -> str:
    """How the variable of setting `field` is written."""
    info = Settings.model_fields.get(field)
    if info is None:
        return "a value"
    kind = info.annotation
    if any(isinstance(m, BeforeValidator) and m.func is words for m in info.metadata) or kind == list[str]:
        return LIST_FORM
    if any(isinstance(m, BeforeValidator) and m.func is pairs for m in info.metadata):
        return PAIRS_FORM
    if kind is bool:
        return "true or false"
    if kind is int:
        return "a whole number" + _bounds(info)
    if kind is float:
        return "a number" + _bounds(info)
    if getattr(kind, "__origin__", None) is Literal:
        return "one of " + ", ".join(kind.__args__)
    return "text"


def _bounds(info) -> str:
    def bound(name):
        return next((getattr(m, name) for m in info.metadata if getattr(m, name, None) is not None), None)

    low, above, high = bound("ge"), bound("gt"), bound("le")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if above is not None:
        return f" above {above}"
    return f", at least {low}" if low is not None else ""


def cache_dir() -> Path:
    """Where kg-mcp keeps what it can build again (benchmark stores, endpoint name indexes):
    $KG_MCP_CACHE, else $XDG_CACHE_HOME/kg-mcp, else ~/.cache/kg-mcp."""
    if os.environ.get("KG_MCP_CACHE"):
        return Path(os.environ["KG_MCP_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kg-mcp"


def read_toml_file(path: Path, what: str) -> dict:
    """The TOML document at `path` (the server's `what`, e.g. "tokens file"), or a ConfigError that
    says why it could not be read."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"Cannot read the {what} {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"The {what} {path} is not valid TOML: {e}") from None
