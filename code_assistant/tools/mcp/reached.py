"""The files of the repository a server's script imports, and those they import in turn: what an approval of a
repository's MCP server covers beyond the files its command line names (tools/mcp/trust.py). A plan that rewrites a
module the approved script imports changes what runs as the user, outside the sandbox, as surely as one that rewrites
the script.

Read statically, the way the interpreter looks (never run): Python's `import`s and `from … import`s, relative ones
from the file's package, absolute ones from the script's directory (sys.path[0]), the repository's root, `src/` and the
server's PYTHONPATH entries inside the repository, each package's `__init__.py` on the way; JavaScript's and
TypeScript's relative `import`/`require`/`export … from` specifiers, with the extensions and `index` files Node and
TypeScript try. An import built at run time (importlib, a computed `require`), an editable install, a binary, or a shell
script's commands are not followed.

What an import may find first is covered too (`shadows`): Python puts the script's folder (`-m`: the working
directory, the repository) first on sys.path for every import, the standard library's included, so a `gettext.py`
a plan adds beside the script runs in the server when argparse imports gettext; every module and package in those
folders, and in the server's PYTHONPATH entries inside the repository, is covered, whatever imports it. Node looks
for a bare specifier (`require("express")`) in `node_modules` of the script's folder and of each folder above it: the
files that would answer each bare specifier the covered scripts name, in each of those folders inside the
repository, are covered (a package there that is not yet: its appearance changes the approval).
"""
from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from code_assistant.index.import_graph import JS_EXTS, js_candidates

FILES_REACHED = 2000  # at most this many files are followed from one server's command line
_SPECIFIER = re.compile(r"""(?:\bfrom\s*|\bimport\s*|\brequire\s*\(\s*|\bimport\s*\(\s*)['"](\.{1,2}/[^'"\n]*)['"]""")
_BARE = re.compile(r"""(?:\bfrom\s*|\bimport\s*|\brequire\s*\(\s*|\bimport\s*\(\s*)['"]([^'"\n./][^'"\n]*)['"]""")
PYTHON_LOADS = (".py", ".pyc", ".so", ".pyd")  # what `import name` loads from a folder on sys.path (a package: its
#                                                __init__.py): a source, a sourceless .pyc, an extension module


def python_imports(source: str) -> list[tuple[int, str, tuple[str, ...]]]:
    """Every import of a Python source as (level, module, names): `import a.b` is (0, "a.b", ()), `from .m import x, y`
    (1, "m", ("x", "y")). A file that does not parse imports nothing (it would not run either)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.level, node.module or "", tuple(alias.name for alias in node.names)))
    return found


def script_specifiers(source: str) -> list[str]:
    """The relative specifiers (`./x`, `../y/z.js`) a JavaScript or TypeScript source imports, requires or re-exports."""
    return _SPECIFIER.findall(source)


def python_candidates(file: Path, imported: tuple[int, str, tuple[str, ...]], bases: Iterable[Path]) -> Iterator[Path]:
    """The files an import in `file` may load: each package's `__init__.py` on the way and the module, from the file's
    package (a relative import) or from each of `bases` (sys.path's entries in the repository)."""
    level, module, names = imported
    if level:
        base = file.parent
        for _ in range(level - 1):
            base = base.parent
        roots = [base]
    else:
        roots = list(bases)
    dotted = [part for part in module.split(".") if part]
    for root in roots:
        if level:
            yield root / "__init__.py"  # the package a relative import starts from
        for depth in range(1, len(dotted) + 1):
            path = root.joinpath(*dotted[:depth])
            yield path.with_name(path.name + ".py")
            yield path / "__init__.py"
        for name in names:  # `from pkg import sub`: sub may be a module
            if name != "*":
                path = root.joinpath(*dotted, name)
                yield path.with_name(path.name + ".py")
                yield path / "__init__.py"


def script_candidates(file: Path, specifier: str) -> list[Path]:
    """The files a relative specifier may name (the index's resolver's candidates, import_graph.js_candidates): all
    of them, not the first found, since Node and a TypeScript loader take different ones of them."""
    return [Path(c) for c in js_candidates(os.path.normpath(file.parent / specifier))]


def reached(root: Path, entries: Iterable[Path], python_path: Iterable[Path] = ()) -> list[Path]:
    """The files inside `root` that the entry files import, directly or through each other (not the entries
    themselves), as paths under `root` as written (a link is not resolved here); at most FILES_REACHED."""
    root = Path(os.path.normpath(root))
    queue = [Path(os.path.normpath(entry)) for entry in entries]
    seen = set(queue)
    found: list[Path] = []
    extra = [Path(os.path.normpath(p)) for p in python_path]
    while queue and len(found) < FILES_REACHED:
        file = queue.pop(0)
        try:
            source = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if file.suffix == ".py":
            bases = list(dict.fromkeys([file.parent, root, root / "src", *extra]))
            candidates = [c for imported in python_imports(source) for c in python_candidates(file, imported, bases)]
        elif file.name.endswith(JS_EXTS):
            candidates = [c for spec in script_specifiers(source) for c in script_candidates(file, spec)]
            candidates += node_shadows(root, file, source)
        else:
            continue
        for candidate in candidates:
            if candidate in seen or not candidate.is_relative_to(root) or not candidate.is_file():
                continue
            seen.add(candidate)
            found.append(candidate)
            queue.append(candidate)
    return found[:FILES_REACHED]


def python_shadows(folders: Iterable[Path]) -> list[Path]:
    """Every file an `import` of any name could load from these folders of sys.path, before the standard library's:
    their modules (PYTHON_LOADS) and their packages' `__init__.py`, in name order."""
    found: list[Path] = []
    for folder in dict.fromkeys(Path(os.path.normpath(f)) for f in folders):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = folder / name
            if name.endswith(PYTHON_LOADS) and path.is_file():
                found.append(path)
            elif (path / "__init__.py").is_file():
                found.append(path / "__init__.py")
    return found


def node_shadows(root: Path, file: Path, source: str) -> list[Path]:
    """The files that may answer the bare specifiers a JavaScript or TypeScript source names (`express`,
    `@scope/pkg/sub`), in `node_modules` of its folder and of each folder above it inside `root`, that exist now."""
    packages = []
    for specifier in _BARE.findall(source):
        if specifier.startswith("node:"):
            continue
        parts = specifier.split("/")
        packages.append("/".join(parts[:2] if specifier.startswith("@") else parts[:1]))
    found: list[Path] = []
    folder = Path(os.path.normpath(file.parent))
    while folder.is_relative_to(root):
        for package in dict.fromkeys(packages):
            where = folder / "node_modules" / package
            for candidate in [where / "package.json", *map(Path, js_candidates(str(where)))]:
                if candidate.is_file():
                    found.append(candidate)
        if folder == root:
            break
        folder = folder.parent
    return found
