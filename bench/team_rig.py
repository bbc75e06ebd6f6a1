"""A team deployment on this machine, as deploy/ ships it and docs/team/deploy.md sets it up:
Redis, N replicas, and nginx started from deploy/nginx/kg-mcp.conf itself (only its ports and
certificate paths replaced) ending TLS in front.

Each replica is what deploy/systemd/kg-mcp@.service starts: its ExecStart (the port for %i, this
interpreter for the installed command), its Environment= lines, and deploy/kg-mcp.env with this
run's values, read as systemd's EnvironmentFile= reads it (even replicas) or as a shell sources
it (odd ones; bench/env_file.py); its ReadOnlyPaths= made read-only as systemd makes them, by a
read-only bind mount in a mount namespace of its own (`unshare --mount`). Each runs in a process
group of its own, so that what is left of one after it is stopped can be counted.

Used by tests/test_deploy.py and bench/team.py. Redis and nginx are Debian's (`make install-test`
installs them); Redis starts from its stock /etc/redis/redis.conf with this run's port and folder.
Everything listens on 127.0.0.1 and is stopped on exit.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Self

from bench.common import REPO, free_port, wait_http
from bench.env_file import shell_environment, systemd_environment

SHIPPED_NGINX = REPO / "deploy" / "nginx" / "kg-mcp.conf"
SHIPPED_ENV = REPO / "deploy" / "kg-mcp.env"
SHIPPED_UNIT = REPO / "deploy" / "systemd" / "kg-mcp@.service"
INSTALLED_COMMAND = "/opt/kg-mcp/.venv/bin/kg-mcp"  # where the unit expects kg-mcp (docs/team/deploy.md)
STOCK_REDIS_CONF = Path("/etc/redis/redis.conf")
_UPSTREAM_LINE = re.compile(r"^(\s*)server 127\.0\.0\.1:\d+ (max_fails=\S+ fail_timeout=\S+;).*$", re.M)

# What the test wraps the shipped file in, as Debian's /etc/nginx/nginx.conf wraps conf.d/*.conf,
# with this run's folders and an access log naming the replica(s) each request went to.
_MAIN = """
daemon off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    log_format team '$request_id|$status|$upstream_addr|$upstream_status|$request_time|$uri';
    access_log {prefix}/access.log team;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    include {prefix}/kg-mcp.conf;
}}
"""


def shipped_env_for(settings: dict[str, str | None]) -> str:
    """deploy/kg-mcp.env with `settings` written in: each variable's line (set, or commented out as
    shipped) given the value, or removed for None. A variable the file does not name fails here."""
    text = SHIPPED_ENV.read_text()
    for name, value in settings.items():
        line = re.compile(rf"^#?{re.escape(name)}=.*\n", re.M)
        if len(line.findall(text)) != 1:
            raise AssertionError(f"deploy/kg-mcp.env should name {name} once (set or commented out)")
        text = line.sub(lambda _: "" if value is None else f"{name}={value}\n", text)
    return text


def unit_service(port: int, work: Path, store_dir: Path) -> tuple[list[str], dict[str, str], list[str]]:
    """What deploy/systemd/kg-mcp@.service runs for instance `port`: the command (ExecStart), the
    variables of its Environment= lines, and its ReadOnlyPaths=, with the unit's system folders
    placed under `work` (/var/cache/kg-mcp, /var/log/kg-mcp) and /srv/kg-mcp at `store_dir`'s folder."""
    if work.is_relative_to(store_dir.parent):
        raise ValueError(f"{work} is inside {store_dir.parent}, which the replicas see read-only")
    text = SHIPPED_UNIT.read_text().replace("\\\n", " ")
    places = {INSTALLED_COMMAND: shlex.join([sys.executable, "-m", "kg_mcp"]), "%i": str(port),
              "/var/cache/kg-mcp": str(work / "cache"), "/var/log/kg-mcp": str(work / "log"),
              "/srv/kg-mcp": str(store_dir.parent)}
    for old, new in places.items():
        if old not in text:
            raise AssertionError(f"deploy/systemd/kg-mcp@.service should name {old}")
        text = text.replace(old, new)
    values = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    environment = dict(line.split("=", 1) for line in re.findall(r"^Environment=(.*)$", text, re.M))
    return shlex.split(values["ExecStart"]), environment, values["ReadOnlyPaths"].split()


def read_only(command: list[str], paths: list[str]) -> list[str]:
    """`command` with `paths` read-only to it, as systemd's ReadOnlyPaths= makes them: bind-mounted
    read-only onto themselves in a mount namespace of its own (its process id stays the command's)."""
    mounts = " && ".join(f"mount --bind -o ro {shlex.quote(p)} {shlex.quote(p)}" for p in paths)
    as_root = [] if os.geteuid() == 0 else ["--map-root-user"]
    return ["unshare", "--mount", *as_root, "sh", "-c", f'{mounts} && exec "$@"', "sh", *command]


def shipped_config_for(ports: list[int], https_port: int, http_port: int, cert: Path, key: Path) -> str:
    """deploy/nginx/kg-mcp.conf with these replicas, ports and certificate; every value replaced must
    be there as shipped (a change to the file that this rig does not follow fails here)."""
    text = SHIPPED_NGINX.read_text()
    lines = _UPSTREAM_LINE.findall(text)
    if not lines:
        raise AssertionError("deploy/nginx/kg-mcp.conf has no `server 127.0.0.1:PORT max_fails=.. fail_timeout=..;` line")
    indent, options = lines[0]
    first = _UPSTREAM_LINE.search(text)
    text = _UPSTREAM_LINE.sub("", text)
    servers = "".join(f"{indent}server 127.0.0.1:{port} {options}\n" for port in ports)
    text = text[: first.start()] + servers + text[first.start():]
    if text.count("server_name kg.example.org;") != 2:
        raise AssertionError("deploy/nginx/kg-mcp.conf should name kg.example.org in both its servers")
    text = text.replace("server_name kg.example.org;", "server_name 127.0.0.1;")
    for old, new in [
        ("listen 80;", f"listen 127.0.0.1:{http_port};"),
        ("listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;"),
        ('set $kg_mcp_https_port "";', f'set $kg_mcp_https_port ":{https_port}";'),
        ("/etc/kg-mcp/tls/fullchain.pem", str(cert)),
        ("/etc/kg-mcp/tls/privkey.pem", str(key)),
    ]:
        if text.count(old) != 1:
            raise AssertionError(f"deploy/nginx/kg-mcp.conf should hold {old!r} once")
        text = text.replace(old, new)
    return text


def nginx_prefix(prefix: Path, site: str) -> subprocess.CompletedProcess:
    """A folder for nginx (`nginx -p PREFIX -c PREFIX/nginx.conf`) serving `site` as Debian's
    nginx.conf serves a conf.d file; returns what `nginx -t` said of it."""
    shutil.rmtree(prefix, ignore_errors=True)
    (prefix / "tmp").mkdir(parents=True)
    (prefix / "kg-mcp.conf").write_text(site)
    main = _MAIN.format(prefix=prefix)
    if os.geteuid() == 0:  # as root, nginx's workers would switch to `nobody`, who cannot enter the run's folder
        main = "user root;\n" + main
    (prefix / "nginx.conf").write_text(main)
    return subprocess.run(["nginx", "-t", "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                          capture_output=True, text=True)


class Team:
    """Redis, `replicas` kg-mcp replicas and nginx; `url` is the MCP endpoint over TLS (trust `ca_file`).

    The replicas read deploy/kg-mcp.env with the store, the public URL, Redis and a shared token
    (`token`, in a file) of this run, and `settings` on top (a value of None removes the variable's
    line, as the docs say to remove the shared token once people sign in). `https_port`: nginx's
    (chosen here when not given), for a caller that must know the public URL before the team starts.
    """

    def __init__(self, store: Path, work: Path, replicas: int = 3, *extra: str, settings: dict | None = None,
                 https_port: int | None = None):
        import trustme

        work = work.resolve()
        self.store, self.work, self.extra = store.resolve(), work, extra
        work.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1", "localhost")
        self.ca_file, self.cert_file, self.key_file = work / "ca.pem", work / "cert.pem", work / "key.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        cert.cert_chain_pems[0].write_to_path(str(self.cert_file))
        cert.private_key_pem.write_to_path(str(self.key_file))
        self.redis_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.ports = [free_port() for _ in range(replicas)]
        self.processes: list[subprocess.Popen | None] = [None] * replicas
        self.redis: subprocess.Popen | None = None
        self.nginx: subprocess.Popen | None = None
        self.https_port, self.http_port = https_port or free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.https_port}/mcp"
        self.token = secrets.token_urlsafe(32)
        (work / "token").write_text(self.token + "\n")
        self.settings = {"KG_MCP_STORE": str(self.store), "KG_MCP_PUBLIC_URL": self.url,
                         "KG_MCP_REDIS": self.redis_url, "KG_MCP_AUTH_TOKEN_FILE": str(work / "token"), **(settings or {})}
        if self.settings["KG_MCP_AUTH_TOKEN_FILE"] is None:
            self.token = None
        self.env_file = work / "kg-mcp.env"
        self.env_file.write_text(shipped_env_for(self.settings))
        try:
            self.start_redis()
            for i in range(replicas):
                self.processes[i] = self._replica(i)
            for i in range(replicas):
                self._wait_replica(i)
            self._start_nginx()
        except BaseException:
            self.close()
            raise

    # --- parts ----------------------------------------------------------------------------------
    def start_redis(self) -> None:
        self.redis = start_redis(self.redis_port, self.work / "redis")

    def stop_redis(self) -> None:
        if self.redis is not None:
            _end(self.redis)
            self.redis = None

    def environment(self, i: int) -> dict[str, str]:
        """Replica `i`'s variables: the machine's (no KG_MCP_* of this process), the unit's Environment=
        lines, then the environment file, read by systemd's rules or by a shell in turn."""
        _, unit_environment, _ = unit_service(self.ports[i], self.work, self.store)
        read = systemd_environment if i % 2 == 0 else shell_environment
        env = {k: v for k, v in os.environ.items() if not k.startswith("KG_MCP_")}
        return {**env, "PYTHONUNBUFFERED": "1", **unit_environment, **read(self.env_file)}

    def _replica(self, i: int) -> subprocess.Popen:
        command, _, read_only_paths = unit_service(self.ports[i], self.work, self.store)
        (self.work / "log").mkdir(exist_ok=True)  # what the unit's LogsDirectory= makes
        log = (self.work / f"replica-{i}.log").open("ab")
        return subprocess.Popen(read_only([*command, *self.extra], read_only_paths), stdout=subprocess.DEVNULL,
                                stderr=log, env=self.environment(i), cwd=str(REPO), process_group=0)

    def _wait_replica(self, i: int, timeout_s: float = 300.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                wait_http(self.replica_url(i, "/healthz"), timeout=1)
                return
            except TimeoutError:
                if self.processes[i].poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"replica {i} did not start: {self.log(i)[-1500:]}") from None

    def restart(self, i: int) -> None:
        self.processes[i] = self._replica(i)
        self._wait_replica(i)

    def kill(self, i: int, sig: int = signal.SIGKILL) -> None:
        """SIGKILL: no goodbye, its connections reset mid-request (SIGTERM: a supervisor's stop). Only the
        replica's own process is signalled, as a supervisor that knows one pid would (systemd signals
        the unit's whole cgroup)."""
        process = self.processes[i]
        if process is not None and process.poll() is None:
            os.kill(process.pid, sig)
            process.wait(timeout=60)

    def leftovers(self, i: int, wait_s: float = 30.0) -> dict[int, str]:
        """What is still running of replica `i`'s process group once it was stopped, after waiting up to
        `wait_s` for it to go (its workers end when they see it gone)."""
        group = self.processes[i].pid
        deadline = time.monotonic() + wait_s
        while group_processes(group) and time.monotonic() < deadline:
            time.sleep(0.1)
        return group_processes(group)

    def _start_nginx(self) -> None:
        prefix = self.work / "nginx"
        check = nginx_prefix(prefix, shipped_config_for(self.ports, self.https_port, self.http_port, self.cert_file,
                                                       self.key_file))
        if check.returncode != 0:
            raise RuntimeError(f"nginx -t refused the config: {check.stderr}")
        self.nginx = subprocess.Popen(["nginx", "-p", str(prefix), "-c", str(prefix / "nginx.conf")],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(f"https://127.0.0.1:{self.https_port}/", timeout=2, context=self.ssl_context())
            except urllib.error.HTTPError:
                return  # nginx's own 404 for /
            except OSError:
                if time.monotonic() > deadline or self.nginx.poll() is not None:
                    raise RuntimeError(f"nginx did not start: {(prefix / 'error.log').read_text()[-1500:]}") from None
                time.sleep(0.1)

    # --- reading ---------------------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def replica_url(self, i: int, path: str) -> str:
        return f"http://127.0.0.1:{self.ports[i]}{path}"

    def get(self, i: int, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.replica_url(i, path), timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def access_log(self) -> list[list[str]]:
        """nginx's lines for /mcp: request id, status, upstream address(es) ("a, b" when it was sent
        again to another), upstream status(es), time."""
        path = self.work / "nginx" / "access.log"
        lines = [line.split("|") for line in path.read_text().splitlines()] if path.exists() else []
        return [line[:5] for line in lines if line[5] == "/mcp"]

    def log(self, i: int) -> str:
        return (self.work / f"replica-{i}.log").read_text(errors="replace")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.nginx is not None:
            _end(self.nginx, signal.SIGQUIT)
        for process in self.processes:
            if process is not None:
                _end(process)
                for pid in group_processes(process.pid):  # never past the run, whatever it left
                    os.kill(pid, signal.SIGKILL)
        self.stop_redis()


def start_redis(port: int, folder: Path) -> subprocess.Popen:
    """Debian's redis-server from its stock config, on 127.0.0.1:`port`, nothing saved to disk."""
    import redis

    folder.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(
        ["redis-server", str(STOCK_REDIS_CONF), "--port", str(port), "--bind", "127.0.0.1",
         "--daemonize", "no", "--supervised", "no", "--dir", str(folder.resolve()), "--logfile", "",
         "--pidfile", str(folder.resolve() / "redis.pid"), "--save", "", "--appendonly", "no", "--unixsocket", "",
         "--maxmemory", "128mb", "--maxmemory-policy", "noeviction"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            redis.Redis(host="127.0.0.1", port=port, socket_timeout=1).ping()
            return process
        except redis.RedisError:
            if time.monotonic() > deadline or process.poll() is not None:
                _end(process)
                raise RuntimeError(f"redis-server did not start on port {port}") from None
            time.sleep(0.1)


def _end(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def tool_counts(metrics_text: str, tool: str | None = None) -> dict[tuple[str, str], float]:
    """kg_mcp_tool_calls_total by (tool, outcome) from a replica's /metrics."""
    counts = {}
    for name, labels, value in re.findall(r'^(kg_mcp_tool_calls_total)\{([^}]*)\} (\S+)$', metrics_text, re.M):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if tool is None or fields["tool"] == tool:
            counts[(fields["tool"], fields["outcome"])] = float(value)
    return counts


def group_processes(group: int) -> dict[int, str]:
    """The processes of process group `group` still alive (zombies aside): pid -> command line."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z" or int(fields[2]) != group:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found
