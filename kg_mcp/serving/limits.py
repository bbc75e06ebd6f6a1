"""The bounds of the HTTP transports (`serve --transport http|sse`): how long a client may take to
send a request, how many connections and sessions one client and all of them may hold, and which
peers may speak for others (X-Forwarded-For). The guards that apply them: kg_mcp.serving.connections
(sockets), kg_mcp.serving.sessions (MCP sessions), kg_mcp.serving.guards (Host/Origin, JSON-RPC ids).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import os
from dataclasses import dataclass, field

from kg_mcp.errors import ConfigError
from kg_mcp.settings import Settings

log = logging.getLogger(__name__)

# File descriptors kept free for the store, query workers, logs and the listening socket, on top of
# those already open when the server starts.
FD_RESERVE = 256
MIN_CONNECTIONS = 16
MIN_BODY_BYTES = 1024  # an initialize request fits

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _default(name: str):
    return Settings.model_fields[name].default


@dataclass(frozen=True)
class HttpLimits:
    """Every bound of the HTTP layer; 0 for a count means "automatic" (max_connections) or "off".

    Defaults, and why: a client that has not sent its request head in 10 s is not a slow client but
    a held socket (any real client sends it at once); 30 s covers a body at the cap on a slow link,
    and a client that takes none of its response for 30 s is not reading it. A request body is at
    most 256 KiB: the largest call a tool allows (50 path claims of 10 hops, a 20,000-character
    query) is a tenth of that, and a body is parsed whole before any check. One client (an
    address, IPv6 per /64) may hold 256 connections (a team behind one NAT, each MCP client using
    2-3) and 64 sessions (clients that forget to close theirs lose their oldest idle ones); all
    clients together 1,000 sessions (about 33 KB each), closed after 30 idle minutes or, when the
    server is full, the oldest idle one of the client holding the most.
    """

    # The defaults are the settings' own (kg_mcp.settings), written once there.
    header_timeout_s: float = _default("header_timeout_s")
    body_timeout_s: float = _default("body_timeout_s")
    write_timeout_s: float = _default("write_timeout_s")
    max_body_bytes: int = _default("max_body_bytes")
    max_connections: int = _default("max_connections")  # 0: the open-file limit less a reserve (connection_cap)
    max_connections_per_client: int = _default("max_connections_per_client")
    max_sessions: int = _default("max_sessions")
    max_sessions_per_client: int = _default("max_sessions_per_client")
    session_idle_timeout_s: float = _default("session_idle_timeout_s")
    trusted_proxies: tuple[str, ...] = ()
    networks: tuple[Network, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "networks", tuple(parse_proxies(self.trusted_proxies)))
        if min(self.header_timeout_s, self.body_timeout_s, self.write_timeout_s, self.session_idle_timeout_s) <= 0:
            raise ConfigError("HTTP timeouts must be positive numbers of seconds.")
        if self.max_body_bytes < MIN_BODY_BYTES:
            raise ConfigError(f"The request body cap must be at least {MIN_BODY_BYTES:,} bytes.")
        if min(self.max_connections, self.max_connections_per_client) < 0 or min(self.max_sessions, self.max_sessions_per_client) < 1:
            raise ConfigError("Connection caps must be 0 (automatic/off) or more, session caps 1 or more.")

    @classmethod
    def from_settings(cls, settings, **overrides) -> HttpLimits:
        """The limits a Settings object names, with the non-None `overrides` (CLI flags) on top."""
        # Every field but the derived `networks` is a setting of the same name.
        values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(cls) if f.init}
        values.update({k: v for k, v in overrides.items() if v not in (None, ())})
        values["trusted_proxies"] = tuple(values["trusted_proxies"])
        return cls(**values)

    def is_trusted_proxy(self, address: str | None) -> bool:
        """Whether a peer address is one of the --trusted-proxy addresses or networks."""
        if not address or not self.networks:
            return False
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self.networks)

    @property
    def forwarded_allow_ips(self) -> str:
        """uvicorn's forwarded_allow_ips: only these peers' X-Forwarded-For is read."""
        return ",".join(str(n) for n in self.networks)


def parse_proxies(entries) -> list[Network]:
    """--trusted-proxy values (an address or a network: 10.0.0.5, 10.0.0.0/8, ::1) as networks."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(str(entry).strip(), strict=False))
        except ValueError:
            raise ConfigError(
                f"--trusted-proxy {str(entry)[:60]!r} is not an IP address or network (e.g. 127.0.0.1 or 10.0.0.0/8)."
            ) from None
    return networks


def raise_file_limit() -> int:
    """Raise the soft open-file limit to the hard one where allowed; return the soft limit now in force."""
    try:
        import resource
    except ImportError:  # not on POSIX: nothing to raise, and no limit we can read
        return 1024
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("open-file limit raised from %d to %d", soft, target)
            soft = target
        except (ValueError, OSError) as error:
            log.warning("could not raise the open-file limit from %d: %s", soft, error)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def open_files() -> int:
    """File descriptors this process holds now (0 where the platform does not tell)."""
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return 0


def connection_cap(limits: HttpLimits) -> int:
    """The most connections to hold at once: below the open-file limit, so accept() never fails.

    The soft limit is raised to the hard one first; the cap leaves the files open now (store,
    workers, logs) and FD_RESERVE more free. A --max-connections above that is lowered to it.
    """
    soft = raise_file_limit()
    room = max(MIN_CONNECTIONS, soft - open_files() - FD_RESERVE)
    if limits.max_connections and limits.max_connections > room:
        log.warning("--max-connections %d is above what the open-file limit (%d) leaves: using %d", limits.max_connections, soft, room)
    return min(limits.max_connections, room) if limits.max_connections else room
