"""The sandbox the test command runs in: what a test may write, reach and leave behind.

The policy's command line is checked directly (pure functions); everything else runs for real: bubblewrap around the
repositories' real test commands, through the CLI with the scripted model. Tests that need bubblewrap fail when it is
missing (CI installs it); the paths without a sandbox point the bwrap lookup at a missing or broken executable.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import venv
from pathlib import Path

import pytest

from code_assistant.errors import ConfigError
from code_assistant.settings import SandboxMode
from code_assistant.verify.runner import RUN_TOKEN_VAR, TestRunner, reap_leftovers
from code_assistant.verify.sandbox import Backend, Policy, Sandbox, bwrap_argv, cache_dirs, resolve
from tests.repos import GO_FIX, NODE_FIX, ROOT, answer, go_repo, modify, node_repo, python_repo, run_cli, write_tree
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
NO_CHANGES = answer()
WRITE_HEADER = ("[Sandbox: write (bubblewrap): repository + /tmp writable, HOME hidden (toolchains kept), network "
                "off, N secret variables held back]")


@pytest.fixture
def bwrap() -> str:
    """bubblewrap, which CI installs: without it these tests fail rather than pass for nothing."""
    found = shutil.which("bwrap")
    if found is None:
        pytest.fail("bubblewrap is not installed (apt-get install bubblewrap): the sandbox tests need it")
    return found


def _cli(repo: Path, server: ScriptedServer, *extra: str, task: str = "fix add",
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, *extra], server_url=server.url,
                   extra_env=env)


def _header(stdout: str) -> list[str]:
    """The header's lines, their count of held-back variables as N (the machine's own environment has some)."""
    return [re.sub(r"\d+ secret variables? held back", "N secret variables held back", line)
            for line in stdout.splitlines() if line.startswith("[Sandbox: ")]


def _in(directory: Path) -> list[int]:
    """The processes working in `directory` or below (their cwd, deleted or not): what test runs there started."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(entry / "cwd")).is_relative_to(directory):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _until(condition: object, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


# ----- the policy, as a command line ------------------------------------------------------------------------------
def test_write_binds_the_tree_over_a_read_only_root_and_keeps_git_read_only() -> None:
    tree = Path("/home/me/src/proj")
    policy = Policy((tree, Path("/home/me/.cache/go-build")), (tree / ".git", Path("/home/me/.cache/ca/state")))
    argv = bwrap_argv("/usr/bin/bwrap", policy, ["pytest", "-q"], tree)
    text = " ".join(argv)
    assert argv[:5] == ["/usr/bin/bwrap", "--die-with-parent", "--cap-drop", "ALL", "--unshare-pid"], \
        "no capability left, as root too"
    assert "--unshare-net" in argv and "--new-session" not in argv, "the network is off unless asked for"
    assert text.index("--ro-bind / /") < text.index("--tmpfs /tmp") < text.index(f"--bind {tree} {tree}")
    assert text.index(f"--bind {tree} {tree}") < text.index(f"--ro-bind-try {tree}/.git {tree}/.git")
    assert "--bind /home/me/.cache/go-build /home/me/.cache/go-build" in text
    assert "/home/me/.cache/ca/state" not in text, "outside every writable path it is read-only already"
    assert argv[-8:] == ["--setenv", "TMPDIR", "/tmp", "--chdir", str(tree), "--", "pytest", "-q"]


def test_a_tree_under_tmp_gets_read_only_neighbours_not_private_ones() -> None:
    tree = Path("/tmp/work/a/proj")
    text = " ".join(bwrap_argv("bwrap", Policy((tree,)), ["true"], tree))
    assert text.index("--tmpfs /tmp") < text.index("--ro-bind /tmp/work /tmp/work") < text.index(f"--bind {tree}")
    assert "--ro-bind /tmp/x" not in " ".join(bwrap_argv("bwrap", Policy((Path("/tmp/x"),)), ["true"], tree))



def test_a_virtual_environment_under_tmp_stays_visible_read_only_over_the_private_tmp(tmp_path: Path) -> None:
    venv_bin, other_bin = tmp_path / "venv" / "bin", tmp_path / "tools" / "bin"
    venv_bin.mkdir(parents=True)
    other_bin.mkdir(parents=True)
    tree = Path("/srv/proj")
    sandbox = Sandbox(SandboxMode.WRITE, SandboxMode.WRITE, Backend.BUBBLEWRAP, "bwrap")
    by_path = sandbox.policy(tree, {"PATH": f"{other_bin}:/usr/bin"}, [str(venv_bin / "python"), "-m", "pytest"])
    assert set(by_path.kept) == {tmp_path / "venv", tmp_path / "tools"}
    text = " ".join(bwrap_argv("bwrap", by_path, ["true"], tree))
    assert text.index("--tmpfs /tmp") < text.index(f"--ro-bind-try {tmp_path / 'venv'} {tmp_path / 'venv'}")
    in_a_shell = sandbox.policy(tree, {"PATH": "/usr/bin"}, ["/bin/sh", "-c", f"{venv_bin / 'python'} -m pytest"])
    assert in_a_shell.kept == (tmp_path / "venv",)


def test_home_is_hidden_but_a_virtual_environment_in_it_that_the_test_command_names_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HOME is hidden by default, but the install prefix of the program the command names by path (the project's
    venv in HOME) stays readable over it, as a PATH entry's does."""
    monkeypatch.setattr("code_assistant.verify.sandbox.TMP", tmp_path / "elsewhere")  # this HOME is not under it
    home = tmp_path / "home"
    (home / "venvs" / "proj" / "bin").mkdir(parents=True)
    (home / "venvs" / "proj" / "pyvenv.cfg").write_text(f"home = {home / '.pyenv' / 'versions' / '3.12' / 'bin'}\n")
    (home / ".pyenv" / "versions" / "3.12" / "bin").mkdir(parents=True)
    for part in (".cargo/bin", ".cargo/registry", ".ssh", ".config/git", ".config/gh", ".local/bin", ".local/share"):
        (home / part).mkdir(parents=True)
    (home / ".cargo" / "credentials.toml").write_text("[registry]\ntoken = 'x'\n")
    (home / ".gitconfig").write_text("[user]\n")
    policy = Sandbox(SandboxMode.WRITE, SandboxMode.WRITE, Backend.BUBBLEWRAP, "bwrap").policy(
        Path("/srv/proj"), {"HOME": str(home), "PATH": f"{home / '.cargo' / 'bin'}:/usr/bin"},
        [str(home / "venvs" / "proj" / "bin" / "python"), "-m", "pytest"])
    assert policy.hidden == (home, *policy.hidden_files)  # and the machine's own secrets, as empty files
    assert set(policy.kept) == {home / "venvs" / "proj", home / ".cargo" / "bin", home / ".pyenv", home / ".local/bin",
                                home / ".gitconfig", home / ".config" / "git", home / ".pyenv" / "versions" / "3.12"}, \
        "not ~/.cargo whole, nor ~/.config/gh"
    outside = tmp_path / "checkout" / ".venv"
    (outside / "bin").mkdir(parents=True)
    (outside / "pyvenv.cfg").write_text(f"home = {home / '.pyenv' / 'versions' / '3.12' / 'bin'}\n")
    lone = Sandbox(SandboxMode.WRITE, SandboxMode.WRITE, Backend.BUBBLEWRAP, "bwrap").policy(
        Path("/srv/proj"), {"HOME": str(home), "PATH": "/usr/bin"}, [str(outside / "bin" / "python")])
    assert home / ".pyenv" / "versions" / "3.12" in lone.kept, "the Python a venv was made from, when it is hidden"


def test_the_policy_is_decided_at_the_first_run_in_a_tree_and_frozen(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """What a test writes after the first run (a `home =` line naming HOME in the activated venv's pyvenv.cfg) keeps
    nothing more readable later, for the tests or for a read-only `run` (the tree made read-only, nothing else); the
    pyvenv.cfg the policy read is read-only to the tests. A sandbox made anew (dataclasses.replace) decides anew."""
    monkeypatch.setattr("code_assistant.verify.sandbox.TMP", tmp_path / "elsewhere")
    home, tree = tmp_path / "home", tmp_path / "proj"
    (home / ".ssh").mkdir(parents=True)
    (tree / ".venv" / "bin").mkdir(parents=True)
    config = tree / ".venv" / "pyvenv.cfg"
    config.write_text("home = /usr/bin\n")
    env = {"HOME": str(home), "PATH": f"{tree / '.venv' / 'bin'}:/usr/bin"}
    sandbox = Sandbox(SandboxMode.WRITE, SandboxMode.WRITE, Backend.BUBBLEWRAP, "bwrap")
    first = sandbox.freeze(tree, env, ["pytest"])
    assert home not in first.kept and config in first.protected
    config.write_text(f"home = /usr/bin\nhome = {home}\n")
    assert home in sandbox.policy(tree, env, ["pytest"]).kept, "what an unfrozen policy would have kept"
    assert sandbox.frozen_policy(tree, env, ["/bin/sh", "-c", "cat x"]) == first
    looking = sandbox.frozen_policy(tree, env, ["/bin/sh", "-c", "cat x"], read_only=True)
    assert tree not in looking.writable and looking.kept == (*first.kept, tree) and home not in looking.kept
    assert home in dataclasses.replace(sandbox, network=True).freeze(tree, env, ["pytest"]).kept


def test_strict_takes_the_network_and_hides_home_but_not_what_may_be_written() -> None:
    home, tree = Path("/home/me"), Path("/home/me/src/proj")
    policy = Policy((tree, home / ".npm"), network=False, hidden=(home, Path("/run/user/1000")),
                    kept=(home / ".local",))
    text = " ".join(bwrap_argv("bwrap", policy, ["npm", "test"], tree))
    assert "--unshare-net" in text
    assert (text.index("--tmpfs /home/me ") < text.index("--ro-bind-try /home/me/.local /home/me/.local")
            < text.index(f"--bind {tree} {tree}"))
    assert "--bind /home/me/.npm /home/me/.npm" in text and "--tmpfs /run/user/1000" in text
    over_tree = Policy((tree,), hidden=(tree, tree / "sub"))  # HOME as the repository: hiding it would cover it
    assert "--tmpfs" not in " ".join(bwrap_argv("bwrap", over_tree, ["true"], tree)).replace("--tmpfs /tmp", "")


def test_caches_follow_their_tools_variables_else_the_defaults() -> None:
    home = {"HOME": "/home/me"}
    defaults = {cache.name: str(path) for cache, path in cache_dirs(home)}
    assert defaults["Go build cache"] == "/home/me/.cache/go-build"
    assert defaults["Go module cache"] == "/home/me/go/pkg/mod"
    assert defaults["npm cache"] == "/home/me/.npm" and defaults["pip cache"] == "/home/me/.cache/pip"
    assert defaults["cargo registry"] == "/home/me/.cargo/registry" and "cargo target" not in defaults
    moved = {cache.name: str(path) for cache, path in cache_dirs({
        **home, "XDG_CACHE_HOME": "/x", "GOCACHE": "/g", "GOPATH": "/p1:/p2", "CARGO_HOME": "/c",
        "CARGO_TARGET_DIR": "/t", "npm_config_cache": "/n", "PIP_CACHE_DIR": "relative/pip"})}
    assert moved["Go build cache"] == "/g" and moved["Go module cache"] == "/p1/pkg/mod"
    assert moved["cargo git"] == "/c/git" and moved["cargo target"] == "/t" and moved["npm cache"] == "/n"
    assert moved["uv cache"] == "/x/uv" and "pip cache" not in moved, "a relative path is no place to bind"
    assert "Go build cache" not in {c.name for c, _ in cache_dirs({**home, "GOCACHE": "off"})}


def test_the_header_and_the_record_say_what_is_in_force() -> None:
    write = Sandbox(requested=SandboxMode.WRITE, mode=SandboxMode.WRITE, backend=Backend.BUBBLEWRAP,
                    executable="/usr/bin/bwrap", held_back=("A_TOKEN", "B_KEY"))
    assert write.describe() == ("write (bubblewrap): repository + /tmp writable, HOME hidden (toolchains kept), "
                                "network off, 2 secret variables held back")
    assert write.record() == {"requested": "write", "mode": "write", "backend": "bubblewrap", "network": False,
                              "home_hidden": True, "unavailable": None, "held_back": ["A_TOKEN", "B_KEY"]}
    networked = Sandbox(SandboxMode.STRICT, SandboxMode.WRITE, Backend.BUBBLEWRAP, "/usr/bin/bwrap", network=True)
    assert networked.describe().endswith("network on, 0 secret variables held back")
    lock = Sandbox(requested=SandboxMode.WRITE, mode=SandboxMode.WRITE, backend=Backend.LANDLOCK,
                   executable=sys.executable, unavailable="bwrap not found", landlock_abi=7, held_back=("X_TOKEN",))
    assert lock.describe() == ("write (landlock ABI 7, no bubblewrap: bwrap not found): repository + a private "
                               "TMPDIR writable, HOME hidden (toolchains kept), network off (loopback too), "
                               "1 secret variable held back")
    off = Sandbox(SandboxMode.OFF, SandboxMode.OFF, network=True)
    assert off.describe() == "off; tests run unconfined (HOME readable, network on), 0 secret variables held back"
    with off.confined(["x"], Path("/"), {"A": "1"}) as (argv, env):
        assert (argv, env) == (["x"], {"A": "1"})


def test_with_neither_bubblewrap_nor_landlock_only_sandbox_off_runs_the_tests(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as refused:
        resolve("write", str(tmp_path / "no-bwrap"), landlock_allowed=False)
    assert str(refused.value) == (f"no sandbox for the tests on this machine ({tmp_path / 'no-bwrap'} not found; "
                                  "Landlock: not in this kernel): install bubblewrap, or pass --sandbox off to run "
                                  "the model's code unconfined")
    assert resolve("off", str(tmp_path / "no-bwrap"), landlock_allowed=False).mode == SandboxMode.OFF


# ----- the runner inside the sandbox ------------------------------------------------------------------------------
def test_the_parsers_see_the_same_output_inside(tmp_path: Path, bwrap: str) -> None:
    write_tree(tmp_path, {"tests/test_a.py": "def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 + 1 == 3\n"})
    outside = TestRunner(PYTEST, cwd=tmp_path).run()
    inside = TestRunner(PYTEST, cwd=tmp_path, sandbox=resolve("write")).run()
    assert inside.failed_ids == outside.failed_ids == ["tests/test_a.py::test_bad"]
    assert [(f.file, f.line, f.message) for f in inside.failures] == [(f.file, f.line, f.message)
                                                                      for f in outside.failures]
    assert (inside.passed_count, inside.exit_code, inside.runner) == (outside.passed_count, 1, "pytest")



def test_a_test_command_whose_python_lives_under_tmp_runs_in_the_sandbox(tmp_path: Path, bwrap: str) -> None:
    """A checkout in /tmp with its .venv (CI's clean clone was one): the private /tmp must not hide the
    interpreter, or every run fails its baseline and no fix can ever pass."""
    home = Path(tempfile.mkdtemp(prefix="ca-venv-", dir="/tmp"))  # not beside the repository: another /tmp entry
    try:
        venv.EnvBuilder(with_pip=False, symlinks=True).create(home / ".venv")
        python = home / ".venv" / "bin" / "python"
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        Path(purelib, "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # pytest from this env
        write_tree(tmp_path, {"tests/test_a.py": "def test_ok():\n    pass\n"})
        on_path = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', os.defpath)}"}
        result = TestRunner(f"{python} -m pytest -q -p no:cacheprovider", cwd=tmp_path, env=on_path,
                            sandbox=resolve("write")).run()
        assert result.passed and result.passed_count == 1, result.output
    finally:
        shutil.rmtree(home)

def test_a_timeout_kills_everything_the_sandboxed_command_started(tmp_path: Path, bwrap: str) -> None:
    script = ("import subprocess, sys, time\n"
              "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
              "open('STARTED', 'w').close()\ntime.sleep(300)\n")
    write_tree(tmp_path, {"hang.py": script})
    result = TestRunner([sys.executable, "hang.py"], cwd=tmp_path, timeout=3, sandbox=resolve("write")).run()
    assert result.timed_out and (tmp_path / "STARTED").exists()
    _until(lambda: not _in(tmp_path), "a process of the timed-out run is still alive", seconds=10)


def test_the_session_runtime_directory_is_hidden_and_tmp_is_private(tmp_path: Path, bwrap: str) -> None:
    runtime, tree = tmp_path / "run", tmp_path / "tree"
    runtime.mkdir()
    (runtime / "bus").write_text("the session's D-Bus stands here")
    tree.mkdir()
    script = ("import os, tempfile\nprint(sorted(os.listdir(os.environ['XDG_RUNTIME_DIR'])), tempfile.gettempdir())\n"
              "open('/tmp/left-behind', 'w').close()\n")
    result = TestRunner([sys.executable, "-c", script], cwd=tree, env={"XDG_RUNTIME_DIR": str(runtime)},
                        sandbox=resolve("write")).run()
    assert result.passed and result.output == "[] /tmp\n", result.output
    assert not Path("/tmp/left-behind").exists()


def test_leftovers_of_a_sandboxed_run_are_reaped_through_its_token(tmp_path: Path, bwrap: str) -> None:
    running = tmp_path / "running-tests"
    running.write_text("cafe")
    work = tmp_path / "work"
    work.mkdir()
    with resolve("write").confined([sys.executable, "-c", "import time; time.sleep(300)"], work,
                                   dict(os.environ)) as (argv, env):
        leftover = subprocess.Popen(argv, cwd=work, env={**env, RUN_TOKEN_VAR: "cafe"}, start_new_session=True)
    try:
        _until(lambda: len(_in(work)) >= 3, "bwrap, its pid 1 and the sleeping command")
        assert reap_leftovers(running) >= 1  # the rest may die with bwrap before the scan reaches them
        assert leftover.wait(timeout=10) != 0
        _until(lambda: not _in(work), "a process of the reaped run is still alive", seconds=10)
    finally:
        leftover.kill()


# ----- through the CLI -------------------------------------------------------------------------------------------
HOSTILE = '''import os

_refused = []
for _target in (os.path.expanduser("~/pwned"),
                os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sibling", "pwned")):
    try:
        with open(_target, "w") as _out:
            _out.write("written by the model's code")
    except OSError as exc:
        _refused.append(f"{_target}: {exc.strerror}")
if _refused:
    raise OSError("refused: " + "; ".join(_refused))
'''
HOSTILE_FIX = answer(modify("calc.py", '"""A tiny calculator."""\n', '"""A tiny calculator."""\n' + HOSTILE),
                     modify("calc.py", "    return a - b", "    return a + b"))
CLEAN_UP = answer(modify("calc.py", HOSTILE, ""))


def test_a_test_cannot_write_home_or_beside_the_repository_and_the_model_hears_of_it(
        tmp_path: Path, isolated_env: Path, bwrap: str) -> None:
    repo = python_repo(tmp_path)
    (tmp_path / "sibling").mkdir()
    with ScriptedServer([HOSTILE_FIX, CLEAN_UP]) as server:
        proc = _cli(repo, server, "--sandbox", "write")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _header(proc.stdout) == [WRITE_HEADER]
    assert not (isolated_env / "pwned").exists() and not (tmp_path / "sibling" / "pwned").exists()
    fix_request = server.chat_requests[1]["messages"][-1]["content"]
    assert f"{isolated_env}/pwned" not in fix_request, "HOME was an empty private directory: the write vanished"
    assert f"{tmp_path}/sibling/pwned: Read-only file system" in fix_request, "the test saw its write fail"
    assert "[Tests passed on iteration 2]" in proc.stdout, "the run went on as for any failure"


def test_sandbox_off_runs_the_tests_as_before(tmp_path: Path, isolated_env: Path) -> None:
    repo = python_repo(tmp_path)
    (tmp_path / "sibling").mkdir()
    with ScriptedServer([HOSTILE_FIX]) as server:
        proc = _cli(repo, server, "--sandbox", "off")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _header(proc.stdout) == [("[Sandbox: off; tests run unconfined (HOME readable, network on), N secret "
                                     "variables held back]")]
    assert (isolated_env / "pwned").exists() and (tmp_path / "sibling" / "pwned").exists()


@pytest.mark.skipif(shutil.which("go") is None, reason="go not installed")
def test_a_go_suite_passes_under_write_with_its_build_cache_writable(tmp_path: Path, isolated_env: Path,
                                                                      bwrap: str) -> None:
    repo = go_repo(tmp_path)
    env = {"GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local", "GOPROXY": "off"}  # GOCACHE: the default, in HOME
    with ScriptedServer([answer(GO_FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix Add", "--test-command", "go test ./...", "--sandbox",
                        "write"], server_url=server.url, extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _header(proc.stdout) == [WRITE_HEADER]
    assert "TestAdd" in server.chat_requests[0]["messages"][-1]["content"]
    assert any((isolated_env / ".cache" / "go-build").iterdir()), "go wrote its build cache"


@pytest.mark.skipif(shutil.which("npm") is None, reason="node/npm not installed")
def test_a_node_suite_passes_under_write(tmp_path: Path, bwrap: str) -> None:
    repo = node_repo(tmp_path)
    with ScriptedServer([answer(NODE_FIX)]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", "npm test", "--sandbox", "write"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _header(proc.stdout) == [WRITE_HEADER]
    assert "adds" in server.chat_requests[0]["messages"][-1]["content"]


def test_a_candidate_cannot_write_the_repository_from_its_scratch_copy(tmp_path: Path, bwrap: str) -> None:
    repo = python_repo(tmp_path)
    escape = (f"import os\n\ntry:\n    open({str(repo / 'escaped')!r}, 'w').close()\nexcept OSError as exc:\n"
              "    raise OSError(f'the repository: {exc.strerror}')\n")
    hostile = answer(modify("calc.py", '"""A tiny calculator."""\n', '"""A tiny calculator."""\n' + escape),
                     modify("calc.py", "    return a - b", "    return a + b"))
    clean = answer(modify("calc.py", escape, ""))
    with ScriptedServer(by_seed={1: [hostile, clean], 2: [NO_CHANGES]}) as server:
        proc = _cli(repo, server, "--candidates", "2", "--json", env={"TMPDIR": str(tmp_path)})
        first = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")
                 and r["body"].get("seed") == 1]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (repo / "escaped").exists()
    assert "the repository: Read-only file system" in first[1]["messages"][-1]["content"]
    assert "return a + b" in (repo / "calc.py").read_text() and "escaped" not in (repo / "calc.py").read_text()


SLOW_TEST = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": ("import os, subprocess, sys, time\nfrom calc import add\n\n\ndef test_add():\n"
                           "    if os.path.exists('STARTED'):\n"
                           "        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
                           "        open('SLEEPING', 'w').close()\n        time.sleep(300)\n"
                           "    open('STARTED', 'w').close()\n    assert add(2, 3) == 5\n"),
    "pytest.ini": "[pytest]\npythonpath = .\n", ".gitignore": "STARTED\nSLEEPING\n"}


def _start_hanging(repo: Path, server: ScriptedServer) -> subprocess.Popen[str]:
    """A run whose test of iteration 1 hangs, with a child of its own; returned once both are running."""
    env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                             "--test-command", PYTEST, "--sandbox", "write"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[Testing (iteration 1)"):
            break
    _until(lambda: (repo / "SLEEPING").exists(), "the slow test never started")
    _until(lambda: len(_in(repo)) >= 4, "bwrap, its pid 1, pytest and the test's child")
    return proc


def test_ctrl_c_during_a_sandboxed_hanging_test_leaves_no_process_behind(tmp_path: Path, bwrap: str) -> None:
    repo = python_repo(tmp_path, SLOW_TEST)
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        proc = _start_hanging(repo, server)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert _in(repo) == [], "every process of the sandboxed test is gone"
    assert "return a - b" in (repo / "calc.py").read_text()


def test_kill_9_of_the_assistant_takes_its_sandboxed_test_along(tmp_path: Path, bwrap: str) -> None:
    repo = python_repo(tmp_path, SLOW_TEST)
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        proc = _start_hanging(repo, server)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    _until(lambda: not _in(repo), "the test outlived the assistant", seconds=10)
    recovered = run_cli(["--repo", str(repo), "--recover"])
    assert recovered.returncode == 0, recovered.stderr
    assert "leftover" not in recovered.stdout and "[Recovered: restored 1 file(s)" in recovered.stdout
    assert "return a - b" in (repo / "calc.py").read_text()


def test_ctrl_c_while_sandboxed_candidates_hang_leaves_no_process_behind(tmp_path: Path, bwrap: str) -> None:
    marks, scratch = tmp_path / "marks", tmp_path / "tmp"
    marks.mkdir()
    scratch.mkdir()
    repo = python_repo(tmp_path, {**SLOW_TEST, "tests/test_calc.py": (
        "import os, time\nfrom calc import add\n\n\ndef test_add():\n"
        "    if 'ca-candidate-' in os.getcwd():  # only in a candidate's copy: hang, saying which\n"
        f"        open(os.path.join({str(marks)!r}, os.path.basename(os.path.dirname(os.getcwd()))), 'w').close()\n"
        "        time.sleep(300)\n    assert add(2, 3) == 5\n")})
    fix = answer(modify("calc.py", "return a - b", "return a + b"))
    with ScriptedServer(by_seed={1: [fix], 2: [fix]}) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "TMPDIR": str(scratch),
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "CODE_ASSISTANT_SANDBOX_WRITABLE": str(marks)}
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                                 "--test-command", PYTEST, "--candidates", "2", "--sandbox", "write"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        _until(lambda: len(list(marks.iterdir())) == 2 or proc.poll() is not None, "the candidates' tests hang")
        assert len(list(marks.iterdir())) == 2, "both wrote their mark: a path made writable by the setting"
        _until(lambda: len(_in(scratch)) >= 6, "bwrap, its pid 1 and pytest, for each candidate")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert _in(scratch) == [] and not list(scratch.glob("ca-candidate-*"))


def test_the_run_log_records_the_sandbox_and_the_repositorys_env_file_cannot_turn_it_off(tmp_path: Path,
                                                                                           bwrap: str) -> None:
    repo = python_repo(tmp_path)
    (repo / ".env").write_text("CODE_ASSISTANT_SANDBOX=off\nCODE_ASSISTANT_BWRAP=/bin/true\n")  # a test can write it
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        proc = _cli(repo, server, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["sandbox"] == {"requested": "write", "mode": "write", "backend": "bubblewrap", "network": False,
                                 "home_hidden": True, "unavailable": None, "held_back": result["sandbox"]["held_back"]}
    assert {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(result["sandbox"]["held_back"]), "write is the default"
    final = json.loads(Path(result["log"]).read_text().splitlines()[-1])
    assert final["kind"] == "final" and final["sandbox"] == result["sandbox"]


# ----- no sandbox to be had ---------------------------------------------------------------------------------------
def test_without_bubblewrap_landlock_confines_the_tests_and_says_so_once(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    missing = tmp_path / "no-bwrap"
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        proc = _cli(repo, server, "--json", env={"CODE_ASSISTANT_BWRAP": str(missing)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sandbox = json.loads(proc.stdout)["sandbox"]
    assert (sandbox["mode"], sandbox["backend"], sandbox["network"]) == ("write", "landlock", False)
    assert sandbox["unavailable"] == f"{missing} not found" and "bubblewrap" not in proc.stderr, "said once"


@pytest.mark.parametrize("how", [["--sandbox", "tight"], ["--sandbox"]])
def test_a_bad_sandbox_mode_is_a_usage_error(tmp_path: Path, how: list[str]) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "--task", "x", *how])
    assert proc.returncode == 2 and "--sandbox" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_bad_sandbox_mode_in_the_environment_is_a_one_line_error(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "--task", "x"], extra_env={"CODE_ASSISTANT_SANDBOX": "tight"})
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --sandbox (CODE_ASSISTANT_SANDBOX) must be off, write or strict, not 'tight'"


@pytest.mark.parametrize("backend", [Backend.BUBBLEWRAP, Backend.LANDLOCK])
def test_a_test_in_a_tree_with_no_git_cannot_make_one(tmp_path: Path, backend: Backend) -> None:
    """A repository that is no git repository (or a folder of one): its tests may not create `.git` — a .git/config
    with core.fsmonitor would run at the user's next `git status`, or at a shell prompt that shows the branch. The
    tree is as it was after the run: no .git, not even the empty directory bubblewrap mounts over it."""
    write_tree(tmp_path, {"tests/test_a.py": (
        "import os, subprocess\n\n\ndef test_plant():\n"
        "    for make in (lambda: os.makedirs('.git/hooks'), lambda: open('.git', 'w').write('gitdir: /tmp/x\\n')):\n"
        "        try:\n            make()\n        except OSError as exc:\n            print('refused', exc)\n"
        "    subprocess.run(['git', 'init', '-q'], check=False)\n"
        "    subprocess.run(['git', 'config', 'core.fsmonitor', 'touch /tmp/pwned-by-fsmonitor'], check=False)\n")})
    if backend == Backend.BUBBLEWRAP:
        sandbox = resolve("write")
    else:
        sandbox = resolve("write", executable=str(tmp_path / "no-bwrap"))
        if sandbox.backend != Backend.LANDLOCK:
            pytest.skip("no Landlock in this kernel")
    result = TestRunner(PYTEST + " -s", cwd=tmp_path, sandbox=sandbox).run()
    assert result.passed and "refused" in result.output
    assert not os.path.lexists(tmp_path / ".git"), "no .git was made, and no empty mount point is left behind"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tests"]


@pytest.mark.parametrize("backend", [Backend.BUBBLEWRAP, Backend.LANDLOCK])
def test_a_test_run_as_root_cannot_read_the_machines_password_hashes(tmp_path: Path, backend: Backend) -> None:
    """Root reads /etc/shadow without any capability: a hostile test would print the hashes into the output a fix
    request shows the model. Each of the machine's own secrets is an empty file in the sandbox."""
    shadow = Path("/etc/shadow")
    if os.geteuid() != 0 or not shadow.is_file():
        pytest.skip("needs root and an /etc/shadow")
    entries = [line.split(":")[1] for line in shadow.read_text().splitlines() if line.count(":") > 2]
    write_tree(tmp_path, {"tests/test_a.py": "def test_print():\n    print(open('/etc/shadow').read() or 'EMPTY')\n"})
    sandbox = resolve("write") if backend == Backend.BUBBLEWRAP else resolve("write", str(tmp_path / "no-bwrap"))
    if sandbox.backend != backend:
        pytest.skip(f"no {backend} here")
    result = TestRunner(PYTEST + " -s", cwd=tmp_path, sandbox=sandbox).run()
    shown = [entry for entry in entries if len(entry) > 1 and entry in result.output]
    assert shown == [] and ("EMPTY" in result.output or "Permission denied" in result.output), result.output
