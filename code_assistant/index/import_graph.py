"""Imports resolved to repository files, and the test files that go with a source file (and back)."""
from __future__ import annotations

import json
import logging
import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable

from code_assistant.parse.code_parser import Import

logger = logging.getLogger(__name__)

JS_EXTS = (".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts")
_JS_LANGS = {"javascript", "typescript", "tsx", "vue"}
_TS_FOR_JS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}


def js_candidates(target: str) -> list[str]:
    """The files a relative specifier's target path (posix) may be, in the order tried: itself, its TypeScript
    source, with an extension, or its index."""
    stem, ext = posixpath.splitext(target)
    return [target, *(stem + alt for alt in _TS_FOR_JS.get(ext, ())), *(target + e for e in JS_EXTS),
            *(f"{target}/index{e}" for e in JS_EXTS)]


def go_module_path(go_mod_text: str) -> str | None:
    match = re.search(r"^\s*module\s+\"?([^\s\"]+)\"?", go_mod_text, re.MULTILINE)
    return match.group(1) if match else None


_ENTRY_FIELDS = ("source", "module", "main", "types", "typings")  # package.json fields naming the entry, best first


def js_package(path: str, text: str) -> tuple[str, str, list[str]] | None:
    """(name, directory, entry files as declared) of a workspace package from its package.json (path, text);
    None when it has no name or is not JSON. `exports` counts by its "." entry (a string or its conditions)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    entries = [data[f] for f in _ENTRY_FIELDS if isinstance(data.get(f), str)]
    exports = data.get("exports")
    if isinstance(exports, dict):
        exports = exports.get(".", exports if not any(k.startswith(".") for k in exports) else None)
    entries += _strings(exports)
    directory = posixpath.dirname(path)
    return data["name"], directory, [posixpath.normpath(posixpath.join(directory, e)) for e in entries]


def _strings(value: object) -> list[str]:
    """The strings of a (nested) exports condition, in order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


class ModuleResolver:
    """Lookup tables over one repository's file list (repo-relative posix paths), built once."""

    def __init__(self, files: Iterable[str], go_module: str | None = None,
                 java_roots: Iterable[str] | None = None,
                 js_packages: Iterable[tuple[str, str, list[str]]] = ()) -> None:
        self.files = set(files)
        self.go_module = go_module
        # a monorepo's workspaces: `@scope/pkg/sub` resolves inside the package's directory, longest name first
        self.js_packages = sorted(js_packages, key=lambda p: -len(p[0]))
        go_mods = sorted(f for f in self.files if posixpath.basename(f) == "go.mod")
        self.go_root = posixpath.dirname(go_mods[0]) if go_mods else ""
        self.by_dir: dict[str, list[str]] = defaultdict(list)
        for f in sorted(self.files):
            self.by_dir[posixpath.dirname(f)].append(f)
        self.py_roots = self._python_roots()
        self.py_modules: dict[str, list[str]] = defaultdict(list)
        for f in self.files:
            if f.endswith((".py", ".pyi")):
                self._index_python(f)
        self.java: dict[str, list[str]] = defaultdict(list)  # "com/acme/Foo" or "com/acme/" -> files
        roots = [r.strip("/") for r in java_roots] if java_roots is not None else None
        for f in sorted(self.files):
            if f.endswith((".java", ".kt")):
                self._index_java(f, roots)

    def _python_roots(self) -> set[str]:
        """Repo root, src/, lib/, and the directory above the top of every `pkg/__init__.py` chain."""
        roots = {"", "src", "lib"}
        for f in self.files:
            if posixpath.basename(f) == "__init__.py":
                package = posixpath.dirname(f)
                while package and f"{posixpath.dirname(package)}/__init__.py".lstrip("/") in self.files:
                    package = posixpath.dirname(package)
                roots.add(posixpath.dirname(package))
        return roots

    def _index_python(self, path: str) -> None:
        stem = path.rsplit(".", 1)[0]
        parts = stem.split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        for depth in range(len(parts)):
            root = "/".join(parts[:depth])
            if root in self.py_roots and depth < len(parts):
                self.py_modules[".".join(parts[depth:])].append(path)

    def _index_java(self, path: str, roots: list[str] | None) -> None:
        stem = path.rsplit(".", 1)[0]
        parts = stem.split("/")
        if roots is not None:
            root = next((r for r in roots if stem.startswith(r + "/") or r == ""), None)
            if root is None:
                return
            parts = (stem[len(root) + 1:] if root else stem).split("/")
            self.java["/".join(parts)].append(path)
            self.java["/".join(parts[:-1]) + "/"].append(path)
            return
        for depth in range(len(parts)):
            self.java["/".join(parts[depth:])].append(path)
            self.java["/".join(parts[depth:-1]) + "/"].append(path)

    def resolve(self, path: str, language: str, imp: Import) -> list[str]:
        """Repository files `imp` (found in `path`) refers to; [] for third-party or unknown modules."""
        if language == "python":
            found = self._python(path, imp)
        elif language in _JS_LANGS:
            found = self._js(path, imp.module)
        elif language == "go":
            found = self._go(imp.module)
        elif language in ("java", "kotlin"):
            found = self._java(imp)
        elif language == "rust":
            found = self._rust(path, imp)
        else:
            found = []
        return list(dict.fromkeys(f for f in found if f != path))

    # --- python
    def _py_lookup(self, dotted: str, base: str | None) -> list[str]:
        if base is None:
            return list(self.py_modules.get(dotted, []))
        rel = "/".join(p for p in [base, *dotted.split(".")] if p) if dotted else base
        return [c for c in (f"{rel}.py", f"{rel}.pyi", f"{rel}/__init__.py") if c in self.files]

    def _python(self, path: str, imp: Import) -> list[str]:
        base: str | None = None
        if imp.level:
            base = posixpath.dirname(path)
            for _ in range(imp.level - 1):
                base = posixpath.dirname(base)
        module_files = self._py_lookup(imp.module, base) if imp.module or base is not None else []
        if base is None and not module_files:  # scripts importing a sibling module
            module_files = self._py_lookup(imp.module, posixpath.dirname(path) or "")
        found: list[str] = []
        missing_name = not imp.names  # `import x` / a name that is not a submodule refers to the module itself
        for name in imp.names:
            sub = [] if name == "*" else self._py_lookup(f"{imp.module}.{name}" if imp.module else name, base)
            found.extend(sub)
            missing_name = missing_name or not sub
        return (module_files if missing_name else []) + found

    # --- javascript / typescript
    def _js(self, path: str, spec: str) -> list[str]:
        if spec.startswith("."):
            return self._js_file(posixpath.normpath(posixpath.join(posixpath.dirname(path), spec)))
        for name, directory, entries in self.js_packages:
            if spec == name or spec.startswith(name + "/"):
                return self._js_workspace(directory, entries, spec[len(name):].strip("/"))
        return []

    def _js_file(self, target: str) -> list[str]:
        """The file a specifier's target path is (the first of js_candidates the repository has)."""
        return next(([c] for c in js_candidates(target) if c in self.files), [])

    def _js_workspace(self, directory: str, entries: list[str], rest: str) -> list[str]:
        """A workspace package's file: its declared entry (or, when that is a build output the index does not
        hold, src/index), or the subpath under the package, its src/ or its lib/."""
        def under(*parts: str) -> str:
            return "/".join(p for p in (directory, *parts) if p)

        if rest:
            targets = [under(rest), under("src", rest), under("lib", rest)]
        else:
            targets = [*entries, under("src", "index"), under("index"), under("lib", "index")]
        return next((found for t in targets if (found := self._js_file(t))), [])

    # --- go
    def _go(self, module: str) -> list[str]:
        if not self.go_module or not (module == self.go_module or module.startswith(self.go_module + "/")):
            return []
        rel = module[len(self.go_module):].strip("/")
        directory = "/".join(p for p in (self.go_root, rel) if p)
        return [f for f in self.by_dir.get(directory, []) if f.endswith(".go") and not f.endswith("_test.go")]

    # --- java
    def _java(self, imp: Import) -> list[str]:
        parts = imp.module.split(".")
        if imp.names == ("*",):
            direct = self.java.get("/".join(parts), [])
            return direct or list(self.java.get("/".join(parts) + "/", []))
        while len(parts) >= 2:  # drop nested-class / static-member segments until a file matches
            found = self.java.get("/".join(parts))
            if found:
                return list(found)
            parts = parts[:-1]
        return []

    # --- rust
    def _crate_src(self, path: str) -> str:
        """`src` of the crate holding `path`: the nearest ancestor with src/lib.rs or src/main.rs."""
        directory = posixpath.dirname(path)
        while True:
            src = f"{directory}/src" if directory else "src"
            if f"{src}/lib.rs" in self.files or f"{src}/main.rs" in self.files or not directory:
                return src
            directory = posixpath.dirname(directory)

    def _rust_module_dir(self, path: str) -> str:
        """The directory holding the submodules of the module defined by `path`."""
        name = posixpath.basename(path)
        if name in ("lib.rs", "main.rs", "mod.rs"):
            return posixpath.dirname(path)
        return path[:-3]

    def _rust_file(self, directory: str, segments: list[str]) -> list[str]:
        for end in range(len(segments), 0, -1):  # longest module path that exists; the rest are items
            rel = "/".join(p for p in (directory, *segments[:end]) if p)
            found = [c for c in (f"{rel}.rs", f"{rel}/mod.rs") if c in self.files]
            if found:
                return found[:1]
        return []

    def _rust(self, path: str, imp: Import) -> list[str]:
        segments = imp.module.split("::")
        head = segments[0]
        if head == "crate":
            base, rest = self._crate_src(path), segments[1:]
        elif head in ("self", "super"):
            base, rest = self._rust_module_dir(path), segments[1:]
            if head == "super":
                base = posixpath.dirname(base)
            while rest and rest[0] == "super":
                base, rest = posixpath.dirname(base), rest[1:]
        else:
            return []
        found: list[str] = []
        for name in imp.names or ("",):
            if name in ("*", "self"):
                name = ""
            found.extend(self._rust_file(base, [*rest, *([name] if name else [])]))
        if not found and head == "self" and len(rest) == 1:  # `mod x;` next to a non-mod.rs file
            found = self._rust_file(posixpath.dirname(path), rest)
        return found
