"""mkdocs hook: links from a page to a file of the repository outside docs/ lead to a page showing it.

Pages link to `../../prompts/sog/system.md` or `../bench/virtuoso.py` as they would on a code host;
such a link is checked (a file that does not exist stays a broken link and fails the strict build),
and the site gets a page under repo/ holding the file verbatim, with the link pointed at it. A link
to a folder gets a page listing the folder's files, each with its own page. Only files that git
would check in are shown (nothing ignored, no virtual environment, no data).
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from pathlib import Path, PurePosixPath

from mkdocs.structure.files import File

LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?(?:\s+\"[^\"]*\")?\))")
LANGUAGES = {".py": "python", ".md": "text", ".j2": "jinja", ".json": "json", ".toml": "toml", ".yml": "yaml", ".ttl": "turtle"}
_targets: dict[str, str] = {}  # repository path -> src_uri of the page made for it


def on_files(files, config):
    _targets.clear()
    docs_dir = Path(config["docs_dir"]).resolve()
    root = Path(config["config_file_path"]).resolve().parent
    shown = _repository_files(root)
    wanted: set[str] = set()
    for file in files.documentation_pages():
        page_dir = (docs_dir / file.src_path).parent
        for match in LINK.finditer(file.content_string):
            target = _outside(match.group(2), page_dir, docs_dir, root)
            if target is not None:
                wanted.add(target)
    for target in sorted(wanted):
        inside = sorted(p for p in shown if p.startswith(target.rstrip("/") + "/"))
        if target in shown and _is_text(root / target):
            _add_file_page(files, config, root, target)
        elif inside:
            inside = [path for path in inside if _is_text(root / path)]
            for path in inside:
                _add_file_page(files, config, root, path)
            _add_folder_page(files, config, target, inside)
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if not _targets:
        return markdown
    docs_dir = Path(config["docs_dir"]).resolve()
    root = Path(config["config_file_path"]).resolve().parent
    page_dir = (docs_dir / page.file.src_path).parent

    def point(match: re.Match) -> str:
        target = _outside(match.group(2), page_dir, docs_dir, root)
        if target is None or target not in _targets:
            return match.group(0)
        here = PurePosixPath(page.file.src_uri).parent
        return match.group(1) + posixpath.relpath(_targets[target], here) + match.group(3)

    return LINK.sub(point, markdown)


def _outside(link: str, page_dir: Path, docs_dir: Path, root: Path) -> str | None:
    """The repository path a relative link points to, when it leaves docs/ and stays in the repository."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", link) or link.startswith("/"):
        return None
    target = (page_dir / link).resolve()
    if target == root or not target.is_relative_to(root) or target.is_relative_to(docs_dir):
        return None
    return target.relative_to(root).as_posix() + ("/" if link.endswith("/") else "")


def _repository_files(root: Path) -> set[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root,
                                capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file but the usual clutter
        listed = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                  and not any(part.startswith(".") or part in ("__pycache__", "site") for part in p.relative_to(root).parts)]
    return {p for p in listed if (root / p).is_file() and not p.startswith("docs/")}


def _is_text(path: Path) -> bool:
    """Source and prompts are shown; an image or other binary stays a broken link (put it under docs/)."""
    try:
        path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _add_file_page(files, config, root: Path, path: str) -> None:
    if path in _targets:
        return
    src_uri = f"repo/{path}" if path.endswith(".md") else f"repo/{path}.md"
    text = (root / path).read_text(encoding="utf-8")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    language = LANGUAGES.get(PurePosixPath(path).suffix, "text")
    content = f"# `{path}`\n\nThe file as it is in the repository.\n\n{fence} {language}\n{text.rstrip()}\n{fence}\n"
    files.append(File.generated(config, src_uri, content=content))
    _targets[path] = src_uri


def _add_folder_page(files, config, folder: str, inside: list[str]) -> None:
    folder = folder.rstrip("/")
    src_uri = f"repo/{folder}/index.md"
    lines = [f"# `{folder}/`", "", "The files of this folder of the repository:", ""]
    for path in inside:
        lines.append(f"- [`{path[len(folder) + 1:]}`]({posixpath.relpath(_targets[path], posixpath.dirname(src_uri))})")
    files.append(File.generated(config, src_uri, content="\n".join(lines) + "\n"))
    _targets[folder + "/"] = _targets[folder] = src_uri
