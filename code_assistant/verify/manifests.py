"""What a repository declares about what it needs installed: its Python distributions and their dependencies, its npm
dependencies. Read when a baseline's output names a module that is missing, to tell a package the user must install
(the fix is theirs: `pip install -e .`, `npm install`) from a module of the repository's own (a task may be to write
it). Only the manifests' text is read; nothing is imported or run."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

REQUIREMENT_FILES = ("requirements.txt", "requirements-dev.txt", "requirements-test.txt", "requirements_dev.txt",
                     "requirements_test.txt", "dev-requirements.txt", "test-requirements.txt")
# import names that differ from the distribution that provides them (the common ones; others match by name)
IMPORT_NAMES = {"yaml": "pyyaml", "bs4": "beautifulsoup4", "PIL": "pillow", "sklearn": "scikit-learn",
                "cv2": "opencv-python", "dateutil": "python-dateutil", "jwt": "pyjwt", "dotenv": "python-dotenv",
                "attr": "attrs", "git": "gitpython", "magic": "python-magic", "serial": "pyserial",
                "OpenSSL": "pyopenssl", "google": "protobuf", "markdown_it": "markdown-it-py", "Crypto": "pycryptodome"}
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalized(name: str) -> str:
    """A distribution's name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(_read(path))
    except tomllib.TOMLDecodeError:
        return {}


def _names(requirements: list[Any]) -> set[str]:
    return {normalized(m.group(1)) for r in requirements if isinstance(r, str) and (m := _REQUIREMENT.match(r))}


def own_distribution(repo: Path) -> str | None:
    """The name the repository's own package is installed under (pyproject, setup.cfg or setup.py), if it has one."""
    project = _toml(repo / "pyproject.toml")
    name = project.get("project", {}).get("name") or project.get("tool", {}).get("poetry", {}).get("name")
    if not name:
        found = re.search(r"^\s*name\s*=\s*(\S+)", _read(repo / "setup.cfg"), re.M) or \
            re.search(r"\bname\s*=\s*['\"]([^'\"]+)['\"]", _read(repo / "setup.py"))
        name = found.group(1) if found else None
    return normalized(name) if isinstance(name, str) and name else None


def declared_by(repo: Path, distribution: str) -> str | None:
    """Which manifest of the repository lists the distribution as a dependency (its file name), or None."""
    wanted = normalized(distribution)
    for name in REQUIREMENT_FILES:
        lines = _read(repo / name).splitlines()
        if wanted in _names([line for line in lines if not line.lstrip().startswith(("#", "-"))]):
            return name
    project = _toml(repo / "pyproject.toml")
    table = project.get("project", {})
    listed = list(table.get("dependencies", []))
    for extra in table.get("optional-dependencies", {}).values():
        listed += extra
    for group in project.get("dependency-groups", {}).values():
        listed += group
    poetry = project.get("tool", {}).get("poetry", {})
    listed += list(poetry.get("dependencies", {})) + list(poetry.get("dev-dependencies", {}))
    if wanted in _names(listed):
        return "pyproject.toml"
    for name in ("setup.cfg", "setup.py", "Pipfile", "tox.ini"):
        text = _read(repo / name)
        if text and re.search(rf"(?<![\w.-]){re.escape(wanted).replace('-', '[-_.]')}(?![\w.-])", text, re.I):
            return name
    return None


def python_install_fix(module: str, repo: Path) -> str | None:
    """How to install a module that a test imports and Python cannot find: `pip install -e .` for the repository's own
    package (a src/ layout, or the distribution's name), the manifest that lists it for a dependency; None when the
    module is the repository's own to write (a file or package in it, or named nowhere)."""
    top = module.split(".")[0]
    if (repo / top).is_dir() or (repo / f"{top}.py").is_file():
        return None  # importable from the repository's root: what is missing is a part of its own code
    own = (repo / "src" / top).is_dir() or (repo / "src" / f"{top}.py").is_file() or \
        own_distribution(repo) == normalized(top)
    if own:
        return "pip install -e . (the repository's own package is not installed)"
    where = declared_by(repo, IMPORT_NAMES.get(top, top))
    if where is None:
        return None
    if where.endswith(".txt"):
        return f"pip install -r {where}"
    return f"pip install -e . (or the environment {where} describes)" if where == "tox.ini" else "pip install -e ."


def npm_dependencies(repo: Path) -> set[str] | None:
    """Every package package.json lists (dependencies of every kind); None without a package.json."""
    path = repo / "package.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(_read(path))
    except ValueError:
        return set()
    if not isinstance(data, dict):
        return set()
    kinds = ("dependencies", "devDependencies", "optionalDependencies", "peerDependencies")
    return {name for kind in kinds if isinstance(data.get(kind), dict) for name in data[kind]}


def npm_install_fix(package: str, repo: Path) -> str | None:
    """`npm install` when package.json lists the package (or a program of it: mocha, jest) and node_modules does not
    hold it; None when package.json does not list it."""
    listed = npm_dependencies(repo)
    if not listed or package not in listed or (repo / "node_modules" / package).is_dir():
        return None
    return f"npm install (package.json lists {package}; node_modules does not hold it)"
