"""What a file is for, from its path alone, in every language: a module entry named by its directory (`index.js`,
`mod.rs`, `__init__.py`), a type declaration (`.d.ts`), a build or tool config, a vendored copy, generated code.
The ranking's features (fusion.py) say so; which of them matter, and how much, is fitted."""
from __future__ import annotations

import posixpath
import re

from code_assistant import languages

# A module whose file is named for its role, not its content: the directory names it (src/plugin/utc/index.js is
# the `utc` plugin, tracing-attributes/src/lib.rs the `tracing-attributes` crate, cmd/helm/main.go `helm`).
_ENTRY_STEMS = {"index": ("javascript", "typescript", "tsx"), "__init__": ("python",), "mod": ("rust",),
                "lib": ("rust",), "main": ("rust", "go")}
_SOURCE_DIRS = {"src", "lib"}  # a crate's or package's source root: the directory above it is the name
_DECLARATION_RE = re.compile(r"\.d\.[cm]?ts$")
# Build, bundler, test-runner and linter configs, task runners: code that configures the project, rarely the fix.
_CONFIG_RE = re.compile(
    r"[.-](config|conf)\.[cm]?[jt]s$|^\.[\w-]+rc\.[cm]?[jt]s$|^(gulpfile|gruntfile|jakefile)\.[cm]?[jt]s$"
    r"|^(webpack|rollup|vite|vitest|jest|babel|karma|eslint|prettier|postcss|tsup|esbuild)[\w.-]*\.[cm]?[jt]s$"
    r"|^(build\.rs|setup\.py|noxfile\.py|tasks\.py|magefile\.go)$", re.IGNORECASE)
# Copies of other projects kept in the tree (requests/packages/urllib3, a Go vendor/ directory, pip/_vendor)
_VENDOR_DIRS = {"vendor", "vendored", "_vendor", "third_party", "thirdparty", "third-party", "extern", "external",
                "deps"}
_GENERATED_RE = re.compile(r"(\.pb(\.gw)?\.go|_pb2(_grpc)?\.py|_gen\.go|\.gen\.[jt]sx?|\.generated\.[\w]+"
                           r"|^zz_generated[\w.]*|_string\.go)$")
_GENERATED_DIRS = {"generated", "__generated__", "gen"}


def module_stem(path: str) -> str:
    """The name a task uses for the file's module: its stem, or for an entry file its directory's name (above a
    `src/` or `lib/` root: the package's or crate's)."""
    name = posixpath.basename(path)
    stem = _DECLARATION_RE.sub("", name)
    stem = stem.rsplit(".", 1)[0] if "." in stem else stem
    wanted = _ENTRY_STEMS.get(stem)
    if wanted and languages.language_for(path) in wanted:
        parts = path.split("/")[:-1]
        while parts and parts[-1] in _SOURCE_DIRS and len(parts) > 1:
            parts.pop()
        if parts and parts[-1] not in _SOURCE_DIRS:
            return parts[-1].replace("-", "_")  # a crate `tracing-attributes` is `tracing_attributes` in code
    return stem


def is_entry(path: str) -> bool:
    """A module entry named for its role (index.*, __init__.py, mod.rs, lib.rs, main.rs, main.go)."""
    name = _DECLARATION_RE.sub("", posixpath.basename(path))
    wanted = _ENTRY_STEMS.get(name.rsplit(".", 1)[0] if "." in name else name)
    return bool(wanted) and languages.language_for(path) in wanted


def is_declaration(path: str) -> bool:
    """A TypeScript declaration file: types for code that lives elsewhere."""
    return bool(_DECLARATION_RE.search(path))


def is_config(path: str) -> bool:
    """A build, bundler, runner or linter config (webpack.config.js, .eslintrc.js, build.rs, setup.py, ...)."""
    return bool(_CONFIG_RE.search(posixpath.basename(path)))


def is_vendored(path: str) -> bool:
    """A vendored copy: under vendor/, third_party/, _vendor/ ..., or a Python package's own `packages/`
    (requests/packages/urllib3; a top-level packages/ is a monorepo's workspaces, not a copy)."""
    parts = path.split("/")[:-1]
    return any(p.lower() in _VENDOR_DIRS for p in parts) or (
        path.endswith(".py") and "packages" in parts[1:])


def is_generated(path: str) -> bool:
    """Generated code by its name or directory (protobuf stubs, *_gen.go, stringer output, __generated__/)."""
    parts = path.split("/")
    return bool(_GENERATED_RE.search(parts[-1])) or any(p in _GENERATED_DIRS for p in parts[:-1])
