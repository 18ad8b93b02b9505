"""Which of a repository's MCP servers a person approved, and for what. An approval covers what the server runs: its
command line and address, the value of every variable and header as the server gets it (after `${VAR}` expansion;
kept as hashes, like the whole approval: approvals.py), and the bytes of each file of the repository it starts from
(its command, or an argument naming a script or a module there), of each file of the repository those import, and
of every module an import of any name could find first in the folders Python or Node search before the standard
library or the installed packages: the script's folder as sys.path[0] (the repository for `-m`), PYTHONPATH's
entries in it, `node_modules` on the way up (tools/mcp/reached.py). A plan or a test that changes any of them makes its
next start ask again, and with nobody to ask it does not start. The user's own servers need none; --trust-mcp starts
the repository's without asking."""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any

from code_assistant.approvals import Approval, Approvals, digest
from code_assistant.tools.mcp import reached
from code_assistant.tools.mcp.config import Origin, ServerConfig, Transport

APPROVALS = "mcp-approved.json"  # in the repository's state


def identity(server: ServerConfig, environ: dict[str, str], repo: Path) -> dict[str, Any]:
    """What an approval of `server` covers, as it would start now."""
    return {"name": server.name, "transport": server.transport, "command": server.command, "args": list(server.args),
            "url": server.url, "env": _values(server.env, server.env_values(environ)),
            "headers": _values(server.headers, server.header_values(environ)),
            "files": files_run(server, repo, environ)}


def _values(written: dict[str, str], sent: dict[str, str]) -> dict[str, list[str]]:
    return {name: [written[name], digest(sent[name])] for name in sorted(written)}


def files_run(server: ServerConfig, repo: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The files of the repository a stdio server starts from, each with its content's hash (a link: where it leads,
    and the hash of what it leads to): its command, and every argument — or `--option=value`'s value, or `-m`'s
    module — that names a file there; every module in the folders Python searches first (the script's, the
    repository for `-m`, PYTHONPATH's as the server gets it from `environ`), whatever imports it; then the files of
    the repository those import (reached.py)."""
    root = repo.resolve()
    found: dict[str, str] = {}
    if server.transport != Transport.STDIO:
        return found
    named = [path for path in _named(server, root) if _inside(path, root)]
    python_path = ({**(environ or {}), **server.env_values(environ or {})}.get("PYTHONPATH") or "").split(os.pathsep)
    searched = [root / entry for entry in python_path if entry and _inside(root / entry, root)]
    shadows = reached.python_shadows([*searched, *(p.parent for p in named if _python_script(p)),
                                      *([root] if "-m" in server.args else [])])
    imported = reached.reached(root, [*(p for p in named if p.is_file()), *shadows], searched)
    for path in [*named, *shadows, *imported]:
        try:
            real = path.resolve()
            if not path.is_file():
                continue
            found[str(real.relative_to(root)) if real.is_relative_to(root) else str(real)] = digest(real.read_bytes())
        except (OSError, ValueError):
            continue
    return found


def _python_script(path: Path) -> bool:
    """A file Python runs as a script (its folder is first on sys.path): a .py, or a file whose #! names python."""
    if path.suffix == ".py":
        return path.is_file()
    try:
        with path.open("rb") as file:
            return file.read(2) == b"#!" and b"python" in file.readline()
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    """Whether a path lies in the repository, as written or where its links lead."""
    try:
        return Path(os.path.normpath(path)).is_relative_to(root) or path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):
        return False


def _named(server: ServerConfig, root: Path) -> Iterator[Path]:
    """Every path a stdio server's command line may start from, relative to its working directory (the repository)."""
    command = server.command
    if "/" in command:
        yield root / command
    elif on_path := shutil.which(command):
        yield Path(on_path)
    module = False
    for arg in server.args:
        if module:
            base = root / arg.replace(".", "/")
            yield from (base.with_name(base.name + ".py"), base / "__main__.py", base / "__init__.py")
        module = arg == "-m"
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value:
            yield root / value


class Start(StrEnum):
    """Whether a configured server starts in a run, and why: the one rule `startable` and `mcp list` both follow."""

    YOURS = "yes (yours)"  # the user's own config
    TRUSTED = "yes (--trust-mcp)"  # a repository's, with --trust-mcp
    APPROVED = "yes (approved)"  # a repository's, approved for what it would run now
    ASKED = "when approved"  # a repository's otherwise: asked on a terminal, else not started


def start_rule(server: ServerConfig, *, repo: Path, state_dir: Path, environ: dict[str, str],
               trust_all: bool) -> Start:
    if server.origin == Origin.USER:
        return Start.YOURS
    if trust_all:
        return Start.TRUSTED
    approvals = Approvals(state_dir / APPROVALS)
    return Start.APPROVED if approvals.approved(identity(server, environ, repo)) else Start.ASKED


def startable(servers: list[ServerConfig], *, repo: Path, state_dir: Path, environ: dict[str, str],
              trust_all: bool, confirm: Callable[[str], bool] | None,
              say: Callable[[str], None]) -> list[ServerConfig]:
    """The servers to start (start_rule): the user's own; a repository's once approved for what it would run now —
    asked with `confirm` (None: nobody to ask) and kept — or every one with `trust_all`; each other one is named, not
    started."""
    approvals = Approvals(state_dir / APPROVALS)
    started = []
    for server in servers:
        if start_rule(server, repo=repo, state_dir=state_dir, environ=environ, trust_all=trust_all) != Start.ASKED:
            started.append(server)
            continue
        covered = identity(server, environ, repo)
        verdict = approvals.ask(covered, f"The repository's .mcp.json asks to start the MCP server {server.name!r}: "
                                         f"{server.command_line()} ({_what(server, covered['files'])}). Start it?",
                                confirm)
        if verdict.granted:
            started.append(server)
        else:
            why = "not approved" if verdict == Approval.REFUSED else \
                "not approved (no terminal to ask: --trust-mcp starts the repository's servers)"
            say(f"[MCP: {server.name} (.mcp.json: {server.command_line()}) not started: {why}]")
    return started


def _what(server: ServerConfig, files: Iterable[str]) -> str:
    """What starting a repository's server means, as its question says it: where it runs, the variables of yours it
    is given or sends where (a token in a header goes to that address), the files its approval covers."""
    names = ", ".join(f"${name}" for name in server.variables())
    if server.transport == Transport.HTTP:
        what = "reached from here" + (f", sent {names} from your environment in its headers" if names else "")
    else:
        what = "it runs as you, outside the sandbox" + (f", given {names} from your environment" if names else "")
    files = list(files)
    return what + (f"; {_some(files)} as they are now" if files else "")


def _some(files: list[str], shown: int = 4) -> str:
    """The files an approval covers, as a question names them: the first few, and how many more."""
    more = len(files) - shown
    return ", ".join(files[:shown]) + (f" and {more} more file{'s' if more > 1 else ''} it imports" if more > 0 else "")
