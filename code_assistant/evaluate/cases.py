"""A set of eval cases: one JSON object a line, read into typed records. Pure functions: a line that does not say a
case is refused with its number and what is wrong, before anything runs.

A case (SWE-bench's field names where it has one):
  id            unique in the file
  repo          where the repository comes from: a path (relative to the cases file), {"path": P},
                {"git": URL, "commit": SHA} (a local path is a URL too), {"pypi": "name==1.2.3"} (the sdist),
                {"npm": "name@1.2.3"} (the tarball); downloaded into the case's scratch directory when it runs.
                A path (a local git repository too) lies in the cases file's folder, or under a --case-root
  task          what the agent is asked, in plain words
  test_command  the command the agent runs, and the judge too unless `judge_command` says another
  FAIL_TO_PASS  test ids that must pass once the agent is done (a list, or SWE-bench's JSON text of one)
  PASS_TO_PASS  test ids that must keep passing
  test_patch    a unified diff of hidden tests, applied by the judge after the agent stops (never shown to it)
  language      for the summary; requires: what the case needs here ("network", "node", "go", "cargo", ...)
  note          where the bug comes from, for a reader
"""
from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant.errors import ConfigError

FIELDS = {"id", "repo", "task", "test_command", "judge_command", "FAIL_TO_PASS", "PASS_TO_PASS", "test_patch",
          "language", "requires", "note"}
_PYPI = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
_NPM = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*@[0-9][0-9A-Za-z.+-]*$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")
# The transports a case's git URL may name. https and http (the commit's id pins what is fetched, so plain http cannot
# be given other code), ssh (a private repository, with the user's own key; also the scp form user@host:path), file
# and a local path. Not git:// (unauthenticated, and no host that matters serves only it), and never a remote helper
# (`ext::COMMAND`, `fd::`, `transport::address`): the text after `ext::` is a command git runs.
GIT_SCHEMES = ("https", "http", "ssh", "file")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://(.*)$")
_SCP = re.compile(r"^(?:[A-Za-z0-9._-]+@)?[A-Za-z0-9][A-Za-z0-9.-]*:(?!:)")


class CaseError(ConfigError):
    """A cases file that cannot be read, or a line of it that says no case."""


class SourceKind(StrEnum):
    """Where a case's repository comes from."""

    PATH = "path"  # a directory on this machine: copied whole
    GIT = "git"  # a git URL (or a local repository) at a commit: cloned
    PYPI = "pypi"  # a package's sdist from PyPI at a version: downloaded with pip
    NPM = "npm"  # a package's tarball from the npm registry at a version: downloaded with npm


@dataclass(frozen=True)
class Source:
    kind: SourceKind
    where: str  # the path, the URL, or the package spec
    commit: str | None = None  # GIT only

    @property
    def needs_network(self) -> bool:
        return self.kind in (SourceKind.PYPI, SourceKind.NPM) or (
            self.kind == SourceKind.GIT and "://" in self.where and not self.where.startswith("file://"))

    def describe(self) -> str:
        return f"{self.where}@{self.commit[:12]}" if self.commit else self.where


@dataclass(frozen=True)
class Case:
    id: str
    source: Source
    task: str
    test_command: str
    judge_command: str | None = None
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    test_patch: str = ""
    language: str = ""
    requires: tuple[str, ...] = field(default_factory=tuple)

    @property
    def judged_by(self) -> str:
        return self.judge_command or self.test_command


def read_cases(path: Path, roots: Sequence[Path] = ()) -> list[Case]:
    """Every case of a cases file, in order; paths in it are relative to the file, and a case's local repository
    (a path, a local git repository) lies in the file's folder or in one of `roots` (--case-root)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CaseError(f"eval: cannot read the cases file {path}: {exc.strerror or exc}") from None
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("//"):
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise CaseError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
        case = parse_case(record, where=f"{path}:{number}", base=path.parent, roots=roots)
        if case.id in seen:
            raise CaseError(f"{path}:{number}: the id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise CaseError(f"eval: {path} holds no case (one JSON object a line)")
    return cases


def parse_case(record: Any, *, where: str, base: Path, roots: Sequence[Path] = ()) -> Case:
    """One line's object as a Case; `base`: what a relative path is relative to, and with `roots` where a local
    repository may lie (local_source)."""
    if not isinstance(record, dict):
        raise CaseError(f"{where}: a case is a JSON object")
    unknown = sorted(set(record) - FIELDS)
    if unknown:
        raise CaseError(f"{where}: unknown field {unknown[0]!r} (the fields: {', '.join(sorted(FIELDS))})")
    for name in ("id", "repo", "task", "test_command"):
        if not record.get(name):
            raise CaseError(f"{where}: the case has no {name}")
    text = {name: record[name] for name in ("id", "task", "test_command", "judge_command", "test_patch", "language")
            if record.get(name) is not None}
    for name, value in text.items():
        if not isinstance(value, str):
            raise CaseError(f"{where}: {name} must be a string")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text["id"]):
        raise CaseError(f"{where}: the id {text['id']!r} may hold only letters, digits, '.', '_' and '-'")
    return Case(id=text["id"], source=parse_source(record["repo"], where=where, base=base, roots=roots),
                task=text["task"], test_command=text["test_command"], judge_command=text.get("judge_command"),
                fail_to_pass=_ids(record.get("FAIL_TO_PASS"), "FAIL_TO_PASS", where),
                pass_to_pass=_ids(record.get("PASS_TO_PASS"), "PASS_TO_PASS", where),
                test_patch=text.get("test_patch", ""), language=text.get("language", ""),
                requires=_ids(record.get("requires"), "requires", where))


def parse_source(repo: Any, *, where: str, base: Path, roots: Sequence[Path] = ()) -> Source:
    if isinstance(repo, str):
        repo = {"path": repo}
    if not isinstance(repo, dict) or len(set(repo) & {"path", "git", "pypi", "npm"}) != 1:
        raise CaseError(f'{where}: repo is a path, {{"git": URL, "commit": SHA}}, {{"pypi": "name==1.2.3"}} or '
                        '{"npm": "name@1.2.3"}')
    kind = SourceKind(next(iter(set(repo) & {"path", "git", "pypi", "npm"})))
    value = repo[kind.value]
    extra = set(repo) - {kind.value} - ({"commit"} if kind == SourceKind.GIT else set())
    if not isinstance(value, str) or not value or extra:
        raise CaseError(f"{where}: repo {kind.value} must be one non-empty string" +
                        (f" (unknown key {min(extra)!r})" if extra else ""))
    for name, given in ((kind.value, value), ("commit", repo.get("commit"))):
        if isinstance(given, str) and given.startswith("-"):  # what a command would read as an option
            raise CaseError(f"{where}: repo {name} may not start with '-': {given!r}")
    if kind == SourceKind.PATH:
        return Source(kind, local_source(base / Path(value).expanduser(), where=where, base=base, roots=roots))
    if kind == SourceKind.PYPI and not _PYPI.match(value):
        raise CaseError(f"{where}: a PyPI repo names one version: {{\"pypi\": \"name==1.2.3\"}}, not {value!r}")
    if kind == SourceKind.NPM and not _NPM.match(value):
        raise CaseError(f"{where}: an npm repo names one version: {{\"npm\": \"name@1.2.3\"}}, not {value!r}")
    if kind != SourceKind.GIT:
        return Source(kind, value)
    commit = repo.get("commit")
    if not isinstance(commit, str) or not _SHA.match(commit):
        raise CaseError(f"{where}: a git repo needs the commit to check out, as a hex SHA")
    return Source(kind, git_url(value, where=where, base=base, roots=roots), commit)


def local_source(path: Path, *, where: str, base: Path, roots: Sequence[Path] = ()) -> str:
    """A case's local repository, its links resolved, when it lies in the cases file's folder or in one of `roots`.
    A cases file is someone else's words: what it names is copied into the case's scratch tree, indexed and shown to
    the model, so it may not name the rest of the disk (`~`, another project, `/`) unless the person running the eval
    says so (--case-root)."""
    resolved = path.resolve()
    allowed = [base.resolve(), *(root.resolve() for root in roots)]
    if not any(resolved.is_relative_to(root) for root in allowed):  # the folder itself too
        raise CaseError(f"{where}: the case's repository {resolved} is outside the cases file's folder ({allowed[0]}); "
                        "a case names only what lies beside it (--case-root DIR allows another folder)")
    return str(resolved)


def git_url(url: str, *, where: str, base: Path, roots: Sequence[Path] = ()) -> str:
    """A case's git URL as it is fetched, when its transport is one of GIT_SCHEMES: a local path made absolute
    (relative to the cases file). A value that git would read as an option, a remote helper or another transport is
    refused."""
    if url.startswith("-") or any(ord(c) < 32 for c in url):
        raise CaseError(f"{where}: a git repo is a URL or a path, not an option or control characters: {url!r}")
    scheme = _SCHEME.match(url)
    if scheme:
        if scheme[1].lower() not in GIT_SCHEMES or re.match(r"(?:[^/@]*@)?-", scheme[2]):  # no host "-oOPTION"
            raise CaseError(f"{where}: a git repo's URL is {', '.join(s + '://' for s in GIT_SCHEMES)}, "
                            f"user@host:path or a path, not {url!r}")
        if scheme[1].lower() == "file":  # a repository on this disk: as a path
            local_source(Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)), where=where, base=base,
                         roots=roots)
        return url
    if "::" in url.split("/")[0]:
        raise CaseError(f"{where}: a git repo's URL names no remote helper (transport::address): {url!r}")
    if _SCP.match(url):
        return url
    if ":" in url.split("/")[0]:
        raise CaseError(f"{where}: a git repo's URL is {', '.join(s + '://' for s in GIT_SCHEMES)}, user@host:path "
                        f"or a path, not {url!r}")
    return local_source(base / Path(url).expanduser(), where=where, base=base, roots=roots)  # relative to the file


def _ids(value: Any, name: str, where: str) -> tuple[str, ...]:
    """A list of strings, or SWE-bench's JSON text of one."""
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise CaseError(f"{where}: {name} must be a list of strings") from None
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise CaseError(f"{where}: {name} must be a list of strings")
    return tuple(value)
