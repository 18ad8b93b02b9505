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
# Code that uses a project rather than being it, named for that role: what ranks above the core in a repository's
# own words (issue 37). By directory, any level, lowercased.
_ROLE_DIRS = {
    "demo": {"example", "examples", "_examples", "demo", "demos", "playground", "playgrounds", "sandbox",
             "sandboxes", "sample", "samples", "showcase", "docs", "doc", "website", "site", "www", "storybook",
             ".storybook", "stories", "tutorial", "tutorials", "cookbook"},
    "bench": {"bench", "benches", "benchmark", "benchmarks", "perf", "performance"},
    "fixture": {"fixture", "fixtures", "__fixtures__", "testdata", "test-data", "test_data", "mock", "mocks",
                "__mocks__", "stubs", "e2e", "cypress", "__snapshots__", "test-utils", "test_utils", "testutils",
                "test-helpers", "testhelpers", "testutil"},
    "compat": {"compat", "compatibility", "shim", "shims", "polyfill", "polyfills", "legacy", "deprecated",
               "backport", "backports"},
    "build": {"dist", "build", "out", "umd", "bundle", "bundles", "min"},
}
# ... and by file name: a debug or minified build, a story, a benchmark, an example or a compatibility layer
_ROLE_NAME_RE = re.compile(r"\.(min|debug|development|production|umd|bundle)\.[cm]?js$|\.stories\.[jt]sx?$"
                           r"|[._-](bench|benchmark)\.[\w]+$|^(example|demo)s?[._-]|[._-](compat|shim|polyfill|legacy)"
                           r"\.[\w]+$|^(compat|shim|polyfill|legacy)\.[\w]+$", re.IGNORECASE)


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


def role(path: str) -> str | None:
    """What the file is for when that is using the project rather than being it, from its path alone: `demo`
    (examples, demos, docs, playgrounds), `bench`, `fixture` (fixtures, test data, mocks), `compat` (compatibility
    layers, shims, polyfills, legacy), `build` (dist/, minified or debug builds); None for anything else."""
    parts = [p.lower() for p in path.split("/")[:-1]]
    for name, dirs in _ROLE_DIRS.items():
        if any(p in dirs for p in parts):
            return name
    match = _ROLE_NAME_RE.search(posixpath.basename(path))
    if not match:
        return None
    text = match.group(0).lower()
    return next((name for name, words in (("build", ("min", "debug", "development", "production", "umd", "bundle")),
                                          ("demo", ("stories", "example", "demo")), ("bench", ("bench",)))
                 if any(w in text for w in words)), "compat")
