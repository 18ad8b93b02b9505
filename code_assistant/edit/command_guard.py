"""What the test command reads, and whether a change rewrites it. Pure functions.

`make test` runs what the Makefile says, `npm run check` what package.json's scripts say, `tox` what tox.ini says:
a plan that rewrites the recipe to `true`, or adds `-k 'not add'` to it, makes the command pass without the fix.
Such a change is refused like a weakened test (pytest's own configuration and hooks are guardrails.check_test_setup's).
"""
from __future__ import annotations

import json
import logging
import posixpath
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from code_assistant.languages import is_test_file

logger = logging.getLogger(__name__)

_OPERATORS = {"&&", "||", "|", ";", "&"}
_WRAPPERS = {"env", "time", "nice", "timeout", "xvfb-run", "npx", "uvx", "command", "exec", "sudo"}
_RUNNERS = {("uv", "run"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"), ("rye", "run")}
_INTERPRETER = re.compile(r"(?:ba|z|da)?sh|python[\d.]*|node|perl|ruby|php|deno|tsx|ts-node")
_PACKAGE_MANAGERS = {"npm", "yarn", "pnpm", "bun"}
_RUN_REFERENCE = re.compile(r"\b(?:npm|pnpm|bun)\s+(?:run(?:-script)?\s+)?([\w:.-]+)|\byarn\s+(?:run\s+)?([\w:.-]+)"
                            r"|\b(?:run-s|run-p|npm-run-all)\s+((?:[\w:.-]+\s*)+)")
_NPM_BUILTIN = {"test": "test", "t": "test", "tst": "test", "start": "start", "stop": "stop", "restart": "restart"}
_CARGO_SECTIONS = re.compile(r"^(?:\[\[(?:test|bench|bin|example)\]\]|\[lib\]|\[profile\.test\]|\[profile\.bench\])$")
_CARGO_KEYS = re.compile(r"^\s*(?:autotests|autobenches|autobins|autoexamples|harness|test|doctest|bench)\s*=")
_GO_BUILD = re.compile(r"^\s*//\s*(?:go:build|\+build)\b.*$", re.MULTILINE)


@dataclass(frozen=True)
class Definition:
    """A file (or a kind of file) the test command reads, and the part of it that defines how the tests run."""

    matches: Callable[[str], bool]
    part: Callable[[str], str]
    what: str  # for the model: "the recipe make runs for `make test`"


def definitions(command: str) -> list[Definition]:
    """The files the test command reads to know what to run: the Makefile of `make`, the scripts of package.json for
    `npm run x`, tox.ini, noxfile.py, the justfile, Cargo.toml's test targets, Go's build constraints, and a script
    the command names (`./run_tests.sh`); test files themselves are guardrails.check_test_weakening's."""
    try:
        words = shlex.split(command)
    except ValueError:
        return []
    found: list[Definition] = []
    folder = ""
    for segment in _segments(words):
        if segment[:1] == ["cd"] and len(segment) > 1:
            folder = posixpath.normpath(posixpath.join(folder, segment[1])).removeprefix(".")
            continue
        found += _of_segment(_unwrapped(segment), folder)
    return found


def check_test_definition(path: str, old: str | None, new: str | None, command: str) -> str | None:
    """A reason written for the model when the change rewrites what the test command runs; None when it does not."""
    for definition in definitions(command):
        if definition.matches(path) and definition.part(old or "") != definition.part(new or ""):
            logger.info("test command definition changed in %s (%s)", path, definition.what)
            return (f"the edit to {path} changes {definition.what} — how the tests are run, not the code under test. "
                    f"A test command that no longer runs a test, or runs fewer, passes without the fix; leave {path} "
                    "as it is and change the code so the tests pass as they are run now (if the file itself is the "
                    "bug, say so in your answer: the user can allow it with --allow-test-edits).")
    return None


def _segments(words: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _unwrapped(words: list[str]) -> list[str]:
    """The command a segment runs, without variables set before it and wrappers (`env`, `timeout 60`, `uv run`)."""
    while words:
        if re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in _WRAPPERS or re.fullmatch(r"[\d.]+[smh]?", words[0]):
            words = words[1:]
        elif tuple(words[:2]) in _RUNNERS:
            words = words[2:]
        elif words[0].startswith("-") and len(words) > 1:  # a wrapper's option (`timeout -s KILL 60 make`)
            words = words[1:]
        else:
            break
    return words


def _at(folder: str, name: str) -> str:
    return posixpath.normpath(posixpath.join(folder, name)) if folder else posixpath.normpath(name)


def _is(*paths: str) -> Callable[[str], bool]:
    return lambda path: posixpath.normpath(path) in paths


def _whole(text: str) -> str:
    return text


def _option(words: list[str], *names: str) -> str | None:
    """The value of an option given as `-f x`, `-fx` or `--file=x`."""
    for n, word in enumerate(words):
        for name in names:
            if word == name and n + 1 < len(words):
                return words[n + 1]
            if name.startswith("--") and word.startswith(name + "="):
                return word[len(name) + 1:]
            if not name.startswith("--") and word.startswith(name) and len(word) > len(name):
                return word[len(name):]
    return None


def _of_segment(words: list[str], folder: str) -> list[Definition]:
    if not words:
        return []
    tool = posixpath.basename(words[0])
    script = words[0] if "/" in words[0] else words[1] if len(words) > 1 and _INTERPRETER.fullmatch(tool) else None
    found: list[Definition] = []
    if script and not script.startswith(("-", "/", "~")) and not is_test_file(posixpath.basename(script)):
        found.append(Definition(_is(_at(folder, script)), _whole, f"the script the test command runs (`{script}`)"))
    if tool in ("make", "gmake"):
        where = _at(folder, _option(words, "-C", "--directory") or ".")
        given = _option(words, "-f", "--file", "--makefile")
        names = [_at(where, given)] if given else [_at(where, n) for n in ("GNUmakefile", "makefile", "Makefile")]
        found.append(Definition(lambda path, names=tuple(names): path in names or path.endswith(".mk"), _whole,
                                f"the makefile that `{shlex.join(words)}` reads"))
    elif tool == "tox":
        ini = _at(folder, _option(words, "-c", "--conf") or "tox.ini")
        found += [Definition(_is(ini), _whole, "tox's configuration, which says what `tox` runs"),
                  Definition(_is(_at(folder, "pyproject.toml")), _sections(("tool.tox",)), "pyproject.toml's tox "
                             "settings"),
                  Definition(_is(_at(folder, "setup.cfg")), _sections(("tox:", "testenv")), "setup.cfg's tox settings")]
    elif tool == "nox":
        found.append(Definition(_is(_at(folder, _option(words, "-f", "--noxfile") or "noxfile.py")), _whole,
                                "the noxfile, which says what `nox` runs"))
    elif tool == "just":
        given = _option(words, "-f", "--justfile")
        names = (_at(folder, given),) if given else tuple(_at(folder, n) for n in ("justfile", "Justfile", ".justfile"))
        found.append(Definition(_is(*names), _whole, "the justfile, which says what `just` runs"))
    elif tool in _PACKAGE_MANAGERS:
        script = _script_name(words)
        if script:
            found.append(Definition(_is(_at(folder, "package.json")), _scripts_part(script),
                                    f"the package.json script that `{shlex.join(words)}` runs ({script!r} and "
                                    "what it calls)"))
    elif tool == "cargo" and "test" in words[1:3]:
        found.append(Definition(lambda path: posixpath.basename(path) == "Cargo.toml", _cargo_part,
                                "Cargo.toml's test targets or harness settings"))
    elif tool == "go" and words[1:2] == ["test"]:
        found.append(Definition(lambda path: path.endswith(".go"), lambda text: "\n".join(_GO_BUILD.findall(text)),
                                "a Go build constraint (which files `go test` compiles)"))
    return found


def _script_name(words: list[str]) -> str | None:
    """The package.json script a package manager's command runs (`npm test`: test; `yarn lint`: lint)."""
    rest = [w for w in words[1:] if not w.startswith("-")]
    if not rest or words[0] == "bun" and rest[0] == "test":  # `bun test` is bun's own runner
        return None
    if rest[0] in ("run", "run-script") and len(rest) > 1:
        return rest[1]
    if rest[0] in _NPM_BUILTIN:
        return _NPM_BUILTIN[rest[0]]
    return rest[0] if words[0] != "npm" else None


def _scripts_part(name: str) -> Callable[[str], str]:
    """The script, its pre/post scripts and every script they run (`npm run lint && jest`), as JSON."""
    def part(text: str) -> str:
        try:
            scripts = json.loads(text).get("scripts") if text.strip() else {}
        except (ValueError, AttributeError):
            return text  # not JSON, or not an object: any change counts
        scripts = scripts if isinstance(scripts, dict) else {}
        todo, seen = [name], {}
        while todo:
            current = todo.pop()
            for key in (current, f"pre{current}", f"post{current}"):
                if key in seen:
                    continue
                seen[key] = scripts.get(key)
                for found in _RUN_REFERENCE.finditer(str(scripts.get(key) or "")):
                    todo += (found.group(1) or found.group(2) or found.group(3) or "").split()
        return json.dumps(seen, sort_keys=True)
    return part


def _sections(prefixes: tuple[str, ...]) -> Callable[[str], str]:
    """The lines of an ini/toml file's sections whose name begins with one of `prefixes`."""
    def part(text: str) -> str:
        kept, on = [], False
        for line in text.splitlines():
            header = re.match(r"\s*\[+\s*([^\]]+?)\s*\]+\s*$", line)
            if header:
                on = header.group(1).startswith(prefixes)
            if on:
                kept.append(line.strip())
        return "\n".join(kept)
    return part


def _cargo_part(text: str) -> str:
    """Cargo.toml's test, bench, lib and bin targets and test profiles, and the keys that turn tests off."""
    kept, on = [], False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            on = bool(_CARGO_SECTIONS.match(stripped))
        if on or _CARGO_KEYS.match(line):
            kept.append(stripped)
    return "\n".join(kept)
