"""An environment file (deploy/kg-mcp.env) read as the two readers an operator may give it:
systemd's `EnvironmentFile=`, and a shell that sources it (`set -a; . FILE`).

`systemd_environment` follows the rules of systemd.exec(5) and of systemd's own reader (its
env-file parser, as of systemd 252): a line is NAME=VALUE; blank lines and lines starting with
`#` or `;` are skipped; whitespace around NAME and around an unquoted VALUE is dropped; a value in
single quotes is taken as written, one in double quotes with `\\"`, `\\\\`, `` \\` `` and `\\$`
unescaped (quotes count only where a value begins, or right after a quoted part:
`["127.0.0.1"]` keeps its quotes, which a shell drops); outside quotes a backslash keeps the next
character; a backslash at the end of a line (a comment's too) joins the next line to it. Nothing is expanded (`$X` stays `$X`), and `#` after a value is part of it;
a shell does both differently, which is why the shipped file keeps to what both read alike.
`shell_environment` runs `sh` itself, in an empty environment.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

_DOUBLE_QUOTED_ESCAPES = '"\\`$'


def systemd_environment(path: Path) -> dict[str, str]:
    """The variables systemd's EnvironmentFile= sets from the file at `path`."""
    found: dict[str, str] = {}
    text = path.read_text(encoding="utf-8")
    lines = iter(text.split("\n"))
    for line in lines:
        while line.endswith("\\"):  # comments too: systemd joins a comment's next line to it
            line = line[:-1] + next(lines, "")
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        name, equals, value = stripped.partition("=")
        if not equals:
            continue  # systemd skips a line without an assignment (and says so)
        found[name.strip()] = _value(value.lstrip())
    return found


def _value(text: str) -> str:
    """A value as systemd reads it: quotes open only where a value (or a quoted part) begins."""
    out: list[str] = []
    kept = 0  # the length of `out` up to its last character that is not trailing whitespace
    i, begins = 0, True
    while i < len(text):
        c = text[i]
        if begins and c.isspace():
            i += 1
            continue
        if begins and c in "'\"":
            end = i + 1
            while end < len(text) and text[end] != c:
                if c == '"' and text[end] == "\\" and end + 1 < len(text) and text[end + 1] in _DOUBLE_QUOTED_ESCAPES:
                    end += 1
                out.append(text[end])
                end += 1
            i, kept = end + 1, len(out)
            continue  # after a closing quote, a value may begin again
        begins = False
        if c == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i, kept = i + 2, len(out)
            continue
        out.append(c)
        if not c.isspace():
            kept = len(out)
        i += 1
    return "".join(out[:kept])


def shell_environment(path: Path) -> dict[str, str]:
    """The variables a POSIX shell exports from the file at `path` (`set -a; . FILE`), less its own."""
    script = 'set -a; . "$1"; set +a; env -0'
    own = _shell_own()
    run = subprocess.run(["env", "-i", "sh", "-c", script, "sh", str(path)], capture_output=True)
    if run.returncode != 0:
        raise ValueError(f"sh cannot source {path}: {run.stderr.decode(errors='replace').strip()}")
    output = run.stdout
    pairs = (entry.split(b"=", 1) for entry in output.split(b"\0") if b"=" in entry)
    return {k.decode(): v.decode() for k, v in pairs if k.decode() not in own}


def _shell_own() -> set[str]:
    """The variables `sh` sets by itself in an empty environment (PWD, SHLVL, ...)."""
    output = subprocess.run(["env", "-i", "sh", "-c", "env -0"], capture_output=True, check=True).stdout
    return {entry.split(b"=", 1)[0].decode() for entry in output.split(b"\0") if b"=" in entry}
