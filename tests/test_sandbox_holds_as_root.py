"""The sandbox holds as root, as a user too (issue 50, item 1): a test command has no capability left, cannot unmount
what hides HOME or /proc, remount `.git`, write the kernel's settings, make or read a disk's device, or enter another
namespace, and `.git` stays byte for byte as it was.

Tried as an attacker would, under real bubblewrap and a real Landlock ruleset: nine credential files planted in
HOME, the assistant's key and a token in its own environment, a listener on 127.0.0.1 outside. The attack
(tests/attack_sandbox.py, shipped by the repository) runs from a conftest a scripted model wrote, through the CLI,
as whatever user runs this suite (root on these machines and in CI); then as uid 65534 around the sandbox alone. The
capability drop's pure parts and the Landlock plan of /dev are checked directly.
"""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from code_assistant.verify import landlock, privileges
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import Sandbox, resolve
from tests.repos import (
    CALC_PY,
    ROOT,
    TEST_CALC_PY,
    Listener,
    answer,
    create,
    git_init,
    modify,
    python_repo,
    run_cli,
    snapshot,
    write_tree,
)
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
ATTACK = (Path(__file__).parent / "attack_sandbox.py").read_text()
MARK = "sbx50"  # every secret planted starts so, and has no shape the redactor knows: a leak would show as is
KEY, TOKEN = f"{MARK}-assistant-key-31f7", f"{MARK}-service-token-88c2"
CREDENTIALS = {
    ".netrc": f"machine example.com login me password {MARK}-netrc-1\n",
    ".docker/config.json": json.dumps({"auths": {"registry.example.com": {"auth": f"{MARK}-docker-2"}}}),
    ".kube/config": f"users:\n- name: me\n  user:\n    token: {MARK}-kube-3\n",
    ".aws/credentials": f"[default]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = {MARK}-aws-4\n",
    ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{MARK}-ssh-5\n-----END OPENSSH PRIVATE KEY-----\n",
    ".config/gh/hosts.yml": f"github.com:\n    oauth_token: {MARK}-gh-6\n",
    ".git-credentials": f"https://me:{MARK}-git-7@github.com\n",
    ".npmrc": f"//registry.npmjs.org/:_authToken={MARK}-npm-8\n",
    ".pypirc": f"[pypi]\nusername = __token__\npassword = {MARK}-pypi-9\n",
}
CONFTEST = '''import json

import pytest

import attack_sandbox

REPORT = attack_sandbox.run(PORT)


@pytest.fixture(autouse=True)
def _show():
    print("ATTACK", json.dumps(REPORT), "LOOT", json.dumps(attack_sandbox.loot))
    yield
'''
NOBODY = 65534


def _plant(home: Path) -> None:
    write_tree(home, CREDENTIALS)


def _escaped(repo: Path) -> dict[str, str]:
    report = json.loads((repo / "tests" / "attack-report.json").read_text())
    assert len(report) == 13, report
    return {name: outcome for name, outcome in report.items() if not outcome.startswith("refused")}


def _backend_env(backend: str, tmp_path: Path) -> dict[str, str]:
    if backend == "bubblewrap":
        if shutil.which("bwrap") is None:
            pytest.fail("bubblewrap is not installed (apt-get install bubblewrap): the sandbox tests need it")
        return {}
    if landlock.abi_version() is None:
        pytest.skip("no Landlock in this kernel")
    return {"CODE_ASSISTANT_BWRAP": str(tmp_path / "no-bwrap")}  # bubblewrap made unavailable: Landlock stands in


# ----- the pure parts ---------------------------------------------------------------------------------------------
STATUS = """Name:\tpython3
Umask:\t0022
CapInh:\t0000000000000000
CapPrm:\t000001fffeffffff
CapEff:\t000001fffeffffff
CapBnd:\t000001ffffffffff
CapAmb:\t0000000000000000
NoNewPrivs:\t0
"""


def test_the_capability_sets_are_read_from_proc_status() -> None:
    assert privileges.capability_sets(STATUS) == {"CapInh": 0, "CapPrm": 0x1fffeffffff, "CapEff": 0x1fffeffffff,
                                                  "CapBnd": 0x1ffffffffff, "CapAmb": 0}
    assert privileges.capability_sets("Name:\tx\n") == {}


def test_root_empties_the_bounding_set_and_locks_the_securebits_a_user_only_clears_ambient() -> None:
    root = privileges.drop_plan(last_cap=40, effective=0x1fffeffffff)
    assert root[0] == (privileges.PR_CAP_AMBIENT, privileges.PR_CAP_AMBIENT_CLEAR_ALL)
    assert root[1:-1] == [(privileges.PR_CAPBSET_DROP, cap) for cap in range(41)]
    assert root[-1] == (privileges.PR_SET_SECUREBITS, 0xef), "noroot, no setuid fixup, no ambient raise; locked"
    assert privileges.drop_plan(last_cap=40, effective=0) == [root[0]]
    no_setpcap = 0x1fffeffffff & ~(1 << privileges.CAP_SETPCAP)  # root in a container that took CAP_SETPCAP away
    assert privileges.drop_plan(last_cap=40, effective=no_setpcap) == [root[0]]


def test_landlock_opens_only_bubblewraps_devices() -> None:
    tree = {Path("/"): ["dev", "usr"], Path("/dev"): ["null", "vda", "zram0", "loop0", "pts", "shm", "urandom"]}
    planned = dict(landlock.plan(landlock.Rules(writable=()), abi=7,
                                 entries=lambda d: [d / name for name in tree.get(d, [])]))
    assert planned[Path("/dev")] == landlock.READ_DIR, "listed, no file in it read"
    assert planned[Path("/dev/null")] == planned[Path("/dev/urandom")] == landlock.handled_fs(7)
    assert not {Path("/dev/vda"), Path("/dev/zram0"), Path("/dev/loop0")} & set(planned), "no disk, swap or loop"
    assert planned[Path("/usr")] == landlock.READ | landlock.IOCTL_DEV


SHOW_PRIVILEGES = """import ctypes, json
from code_assistant.verify import privileges
libc = ctypes.CDLL(None)
print(json.dumps({**privileges.capability_sets(open("/proc/self/status").read()),
                  "securebits": libc.prctl(privileges.PR_GET_SECUREBITS, 0, 0, 0, 0)}))
"""


@pytest.mark.skipif(landlock.abi_version() is None, reason="no Landlock in this kernel")
def test_under_landlock_the_command_keeps_no_capability_and_root_regains_none(tmp_path: Path) -> None:
    argv = landlock.landlock_argv(sys.executable, landlock.Rules(writable=(tmp_path,)),
                                  [sys.executable, "-c", SHOW_PRIVILEGES])
    done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["CapEff"] == shown["CapPrm"] == shown["CapInh"] == shown["CapAmb"] == 0
    if os.geteuid() == 0:
        assert shown["CapBnd"] == 0 and shown["securebits"] == privileges.SECUREBITS, "as root: nothing to regain"


@pytest.mark.skipif(landlock.abi_version() is None, reason="no Landlock in this kernel")
def test_under_landlock_an_assistant_installed_where_the_ruleset_hides_still_confines_and_drops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher and privileges.py in a place the ruleset hides (a pipx or `uv tool` install in HOME, a checkout
    and its venv under /tmp): the capability drop is loaded before the ruleset applies, so the command runs, confined,
    with no capability (it used to end at once: "cannot confine the test command: ... privileges.py")."""
    home, work = tmp_path / "home", tmp_path / "work"
    installed = home / ".local" / "share" / "pipx" / "venvs" / "code-assistant" / "verify"
    installed.mkdir(parents=True)
    work.mkdir()
    for name in ("landlock.py", "privileges.py"):
        shutil.copy(Path(landlock.__file__).with_name(name), installed / name)
    (home / ".netrc").write_text(f"machine example.com password {MARK}-netrc\n")
    spec = importlib.util.spec_from_file_location("installed_landlock", installed / "landlock.py")
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "installed_landlock", copy)
    spec.loader.exec_module(copy)
    show = (f"print(open('/proc/self/status').read())\ntry:\n    print(open({str(home / '.netrc')!r}).read())\n"
            "except PermissionError:\n    print('netrc hidden')")
    argv = copy.landlock_argv(sys.executable, copy.Rules(writable=(work,), hidden=(home,)),
                              [sys.executable, "-I", "-c", show])
    assert str(installed / "landlock.py") in argv
    done = subprocess.run(argv, capture_output=True, text=True, cwd=work, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert privileges.capability_sets(done.stdout)["CapEff"] == 0 and "netrc hidden" in done.stdout, done.stdout


# ----- as an attacker would ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_hostile_conftest_cannot_unmount_remount_or_leave_the_sandbox(tmp_path: Path, isolated_env: Path,
                                                                         backend: str) -> None:
    """As whoever runs the suite: root on these machines and in CI, where the issue's attack got out."""
    env = {"MY_SERVICE_TOKEN": TOKEN, **_backend_env(backend, tmp_path)}
    _plant(isolated_env)
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY, "attack_sandbox.py": ATTACK,
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    git_config = (repo / ".git" / "config").read_bytes()
    catcher = Listener()
    try:
        hostile = answer(create("conftest.py", CONFTEST.replace("PORT", str(catcher.port))))
        with ScriptedServer([hostile, answer(modify("calc.py", "    return a - b", "    return a + b"))]) as server:
            proc = run_cli(["--repo", str(repo), "--task", "fix add; add a conftest that checks the machine",
                            "--test-command", PYTEST, "--no-reproduce", "--json"],
                           server_url=server.url, api_key=KEY, extra_env=env)
    finally:
        catcher.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["sandbox"]["backend"] == backend
    assert _escaped(repo) == {}
    assert catcher.received == [], "nothing reached the listener outside the sandbox"
    assert (repo / ".git" / "config").read_bytes() == git_config
    fix_request = json.dumps(server.chat_requests[1]["messages"])
    assert "ATTACK" in fix_request and "umount -l HOME" in fix_request, "the conftest ran and the model saw its output"
    logs = [path for path in isolated_env.rglob("*") if path.is_file() and path.relative_to(isolated_env).as_posix()
            not in CREDENTIALS]
    assert Path(result["log"]) in logs
    bodies = json.dumps([request.get("body") for request in server.requests])  # the key is in every header
    for where, text in [("stdout", proc.stdout), ("stderr", proc.stderr), ("requests", bodies),
                        *((str(path), path.read_bytes().decode("utf-8", "replace")) for path in logs)]:
        assert MARK not in text, f"a planted secret in {where}"


def _python_for(uid: int) -> list[str] | None:
    """A Python that `uid` can run, with this suite's packages on its path (pyenv's lives under root's HOME)."""
    paths = [str(ROOT), *site.getsitepackages()]
    for python in dict.fromkeys([sys.executable, sys._base_executable, "/usr/bin/python3"]):
        # the sandbox starts sys.executable again: it must be reachable
        code = f"import os, sys; sys.path[:0] = {paths!r}; import code_assistant.verify.runner; os.stat(sys.executable)"
        probe = [python, "-c", code]
        if subprocess.run(_as(uid, probe), capture_output=True, check=False).returncode == 0:
            return [python, "-c", f"import sys; sys.path[:0] = {paths!r}; exec(sys.argv[1])"]
    return None


def _as(uid: int, argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]


DRIVER = """import sys
from pathlib import Path
from code_assistant.verify.runner import TestRunner
from code_assistant.verify.sandbox import resolve

sandbox = resolve("write", sys.argv[2])
print(TestRunner([sys.executable, "attack_sandbox.py", sys.argv[3]], cwd=Path.cwd(), sandbox=sandbox).run().output)
print(sandbox.backend)
"""


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_as_a_user_the_same_attack_gets_nowhere(tmp_path: Path, backend: str) -> None:
    """uid 65534, root's PATH kept (entries it cannot see), the assistant's key in its environment, around the
    sandbox alone."""
    if os.geteuid() != 0:
        pytest.skip("not root: the test above already ran the attack as a user")
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to run the attack as another user")
    driver = _python_for(NOBODY)
    if driver is None:
        pytest.skip("no Python uid 65534 can run with this suite's packages")
    env = _backend_env(backend, tmp_path)
    base = Path(tempfile.mkdtemp(prefix="ca-as-user-"))  # /tmp, not tmp_path: pytest's directories are root's alone
    try:
        base.chmod(0o755)
        home, repo = base / "home", base / "proj"
        _plant(home)
        write_tree(repo, {"attack_sandbox.py": ATTACK, "tests/__init__.py": ""})
        git_init(repo)
        git_config = (repo / ".git" / "config").read_bytes()
        for path in [base, *base.rglob("*")]:
            os.lchown(path, NOBODY, NOBODY)
        catcher = Listener()
        try:
            proc = subprocess.run(_as(NOBODY, [*driver, DRIVER, env.get("CODE_ASSISTANT_BWRAP", "bwrap"),
                                               str(catcher.port)]),
                                  cwd=repo, capture_output=True, text=True, timeout=120, check=False,
                                  env={"PATH": os.environ["PATH"], "HOME": str(home), "OPENAI_API_KEY": KEY,
                                       "MY_SERVICE_TOKEN": TOKEN})
        finally:
            catcher.close()
        assert proc.returncode == 0 and proc.stdout.strip().endswith(backend), proc.stdout + proc.stderr
        assert _escaped(repo) == {}
        assert catcher.received == []
        assert (repo / ".git" / "config").read_bytes() == git_config
        assert "LOOT {}" in proc.stdout and MARK not in proc.stdout + proc.stderr
    finally:
        shutil.rmtree(base)


def _without_landlock() -> None:
    """In the child before it executes: Landlock's first call answers ENOSYS, as on a kernel built without it."""
    libc = ctypes.CDLL(None, use_errno=True)
    program = [(0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7FFF0000)]
    filters = (landlock._SockFilter * len(program))(*(landlock._SockFilter(*i) for i in program))
    prog = landlock._SockFprog(len(program), ctypes.cast(filters, ctypes.POINTER(landlock._SockFilter)))
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "seccomp")


def test_with_no_sandbox_to_be_had_the_run_says_so_before_the_model_is_asked(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    before = {path: path.read_bytes() for path in repo.rglob("*") if path.is_file()}
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                               "--test-command", PYTEST], capture_output=True, text=True, timeout=120, check=False,
                              stdin=subprocess.DEVNULL, preexec_fn=_without_landlock,
                              env={**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k",
                                   "CODE_ASSISTANT_BWRAP": str(tmp_path / "no-bwrap")})
        assert server.requests == [], "nothing was asked of the model"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (f"error: no sandbox for the tests on this machine ({tmp_path / 'no-bwrap'} not "
                                   "found; Landlock: not in this kernel): install bubblewrap, or pass --sandbox off "
                                   "to run the model's code unconfined")
    assert {path: path.read_bytes() for path in repo.rglob("*") if path.is_file()} == before


# ----- issue 57: confined from the first instruction, no rule through a link, no process left, a frozen policy -----
def _sandbox(backend: str, tmp_path: Path) -> Sandbox:
    env = _backend_env(backend, tmp_path)
    sandbox = resolve("write", env.get("CODE_ASSISTANT_BWRAP", "bwrap"))
    assert sandbox.backend == backend
    return sandbox


# A module of the standard library's name, shipped by the repository: what it can do when it is imported (write
# outside, read the environment of the process that runs the tests), recorded in the tree's tests/shadowed/; it then
# hands the real module over, so the test command still works.
def test_a_rule_goes_to_the_planned_path_itself_never_through_a_link(tmp_path: Path) -> None:
    """Hole 6's cause: O_PATH followed `.rootfs -> /`. At or under a place a test may write, the rule's path is
    opened as planned, no link followed on the way or at its end; elsewhere (the system's /bin -> usr/bin) links
    are followed."""
    tree, elsewhere = tmp_path / "tree", tmp_path / "elsewhere"
    (tree / "src").mkdir(parents=True)
    (elsewhere / "x").mkdir(parents=True)
    (tree / ".rootfs").symlink_to("/")
    (tree / "lib").symlink_to(elsewhere)
    (tmp_path / "bin").symlink_to(elsewhere)
    assert not landlock.follows_links(tree / ".rootfs", [tree]) and landlock.follows_links(tmp_path / "bin", [tree])
    assert landlock.open_rule_path(tree / ".rootfs") is None
    assert landlock.open_rule_path(tree / "lib") is None and landlock.open_rule_path(tree / "lib" / "x") is None
    for fd in (landlock.open_rule_path(tree / "src"), landlock.open_rule_path(tmp_path / "bin", follow=True)):
        assert fd is not None
        os.close(fd)


SHADOW = '''import os, sys
_name = __name__
_seen = []
try:
    with open(os.path.join(OUTSIDE, _name), "w") as _out:
        _out.write("written before the ruleset")
    _seen.append("escaped: wrote outside")
except OSError as exc:
    _seen.append(f"refused: write outside: {exc.strerror}")
try:
    with open(f"/proc/{RUNNER}/environ", "rb") as _environ:
        _seen.append(f"escaped: read the runner's environment ({len(_environ.read())} bytes)")
except OSError as exc:
    _seen.append(f"refused: the runner's environment: {exc.strerror}")
try:
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "shadowed", f"{_name}-{os.getpid()}"),
              "w") as _report:
        _report.write("\\n".join(_seen))
except OSError:
    pass
_here, _path = os.path.dirname(os.path.abspath(__file__)), list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
del sys.modules[_name]
_real = __import__(_name)
sys.modules[_name] = _real
sys.path[:] = _path
globals().update({k: v for k, v in vars(_real).items() if k not in ("__file__", "__name__", "__spec__")})
'''
SHADOWED = ("json", "platform", "struct", "sitecustomize", "usercustomize")


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_tree_that_shadows_the_standard_library_gets_nothing_before_the_ruleset(tmp_path: Path,
                                                                                    backend: str) -> None:
    """Hole 5: the Landlock launcher imported `json` (and more) with the tree on sys.path before confining itself.
    Now it runs isolated (-I -S, by its path): a json.py, platform.py, struct.py, sitecustomize.py or usercustomize.py
    in the tree, and PYTHONPATH pointing at it, run nothing before the ruleset; what the test command imports runs
    confined (it cannot write outside or read the runner's environment: the launcher's parent, the assistant)."""
    sandbox = _sandbox(backend, tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY, "tests/shadowed/.keep": "",
                                  "pytest.ini": "[pytest]\npythonpath = .\n",
                                  **{f"{name}.py": SHADOW.replace("OUTSIDE", repr(str(outside))).replace("RUNNER", str(os.getpid()))
                                     for name in SHADOWED}})
    result = TestRunner(PYTEST, cwd=repo, sandbox=sandbox, env={"PYTHONPATH": str(repo)}).run()
    assert result.exit_code == 1 and result.failed_count == 1, result.output  # the suite ran, add still subtracts
    assert sorted(outside.iterdir()) == []
    reports = {path.name: path.read_text() for path in (repo / "tests" / "shadowed").iterdir() if path.name != ".keep"}
    assert reports, "the test command imported the shadows (confined)"
    assert [text for text in reports.values() if "escaped" in text] == []


@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_link_to_the_root_in_the_tree_widens_no_rule(tmp_path: Path, isolated_env: Path, backend: str) -> None:
    """Hole 6: a committed `.rootfs -> /` at the tree's top level made Landlock's rule for the tree's entries cover
    the whole file system. Through it, HOME's files stay unreadable, and nothing outside the tree or in .git is
    written."""
    sandbox = _sandbox(backend, tmp_path)
    _plant(isolated_env)
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = python_repo(tmp_path)
    (repo / ".rootfs").symlink_to("/")
    subprocess.run(["git", "add", ".rootfs"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a link to the root"],
                   cwd=repo, check=True)
    git_config = (repo / ".git" / "config").read_bytes()
    via = f"{repo}/.rootfs"
    script = (
        "import os\n"
        f"for name in {sorted(CREDENTIALS)!r}:\n"
        "    try:\n"
        f"        print('READ', open({via!r} + {str(isolated_env)!r} + '/' + name).read())\n"
        "    except OSError as exc:\n"
        "        print('refused', name, exc.strerror)\n"
        f"for target in ({via!r} + {str(outside / 'pwned')!r}, {via!r} + {str(repo / '.git' / 'config')!r},\n"
        f"               {via!r} + {str(repo / 'calc.py')!r}):\n"
        "    try:\n"
        "        open(target, 'a').write('\\n# written through the link\\n')\n"
        "        print('WROTE', target)\n"
        "    except OSError as exc:\n"
        "        print('refused', target, exc.strerror)\n")
    result = TestRunner([sys.executable, "-c", script], cwd=repo, sandbox=sandbox).run()
    assert "READ" not in result.output and MARK not in result.output, result.output
    assert [line for line in result.output.splitlines() if line.startswith("WROTE")] == [
        f"WROTE {via}{repo / 'calc.py'}"], "through the link only the tree itself is written"
    assert sorted(outside.iterdir()) == []
    assert (repo / ".git" / "config").read_bytes() == git_config


DAEMON = '''import os, sys, time
TOKEN, TARGET, DELAY = sys.argv[1], sys.argv[2], float(sys.argv[3])
if os.fork():
    sys.exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.chdir("/")
os.execve(sys.executable, [sys.executable, "-c", f"""import time
time.sleep({DELAY})
open({TARGET!r}, "a").write("# changed by a daemon of the run\\\\n")
# {TOKEN}
"""], {})
'''


def _processes_with(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if token.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("read_only", [False, True], ids=["tests", "run-tool"])
@pytest.mark.parametrize("backend", ["bubblewrap", "landlock"])
def test_a_setsid_daemon_of_the_run_does_not_outlive_it(tmp_path: Path, backend: str, read_only: bool) -> None:
    """Hole 7: a double-forked, `setsid` child with an emptied environment, which changes the tree 3 s later, ends
    with the command that started it: the tree is as it was 5 s after the run, no process of the run is left. The
    model's `run` tool (a read-only run) goes through the same launcher."""
    sandbox = _sandbox(backend, tmp_path)
    repo = python_repo(tmp_path)
    target = tmp_path / "outside-target" if read_only else repo / "calc.py"  # a read-only run writes no tree
    token = f"daemon-{os.getpid()}-{backend}-{read_only}"
    before = snapshot(repo)
    result = TestRunner([sys.executable, "-c", DAEMON, token, str(target), "3"], cwd=repo, sandbox=sandbox,
                        read_only=read_only).run()
    assert result.passed, result.output
    deadline = time.monotonic() + 5.5
    while time.monotonic() < deadline:
        assert _processes_with(token) == [], "a process of the run is still alive after it ended"
        time.sleep(0.25)
    assert snapshot(repo) == before and not (tmp_path / "outside-target").exists()


def test_the_landlock_supervisor_ends_what_it_adopted_when_the_runner_kills_it(tmp_path: Path) -> None:
    """The runner's timeout kills the launcher's process group: the supervisor, in a group of its own, hears of it
    through its parent-death signal and ends the run's daemons too."""
    sandbox = _sandbox("landlock", tmp_path)
    repo = python_repo(tmp_path)
    token = f"daemon-{os.getpid()}-timeout"
    script = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {DAEMON!r}, {token!r}, " \
             f"{str(repo / 'calc.py')!r}, '3'])\ntime.sleep(300)\n"
    result = TestRunner([sys.executable, "-c", script], cwd=repo, sandbox=sandbox, timeout=1.5, kill_grace=0).run()
    assert result.timed_out
    time.sleep(4)
    assert _processes_with(token) == [] and (repo / "calc.py").read_text() == CALC_PY


FREEZE_TEST = '''import os

from calc import add


def test_add():
    home = os.environ["HOME"]
    try:
        with open(os.path.join(os.path.dirname(__file__), "..", ".venv", "pyvenv.cfg"), "a") as cfg:
            cfg.write(f"home = {home}\\n")
        print("appended home to pyvenv.cfg")
    except OSError as exc:
        print("refused: pyvenv.cfg", exc.strerror)
    try:
        print("NOTES", open(os.path.join(home, "notes.txt")).read())
    except OSError as exc:
        print("refused: notes.txt", exc.strerror)
    assert add(2, 3) == 5
'''


def test_a_test_cannot_widen_the_next_iterations_sandbox_through_pyvenv_cfg(tmp_path: Path, isolated_env: Path,
                                                                             sandbox_backend: str) -> None:
    """Hole 9: a test appended `home = $HOME` to the activated venv's pyvenv.cfg, and the next iteration's sandbox
    kept HOME. The policy is decided before the first test run and frozen; the pyvenv.cfg it read is read-only to
    the tests: HOME's planted secret (of no shape the redactor knows) reaches no request, and the file is as it
    was."""
    write_tree(isolated_env, {"notes.txt": f"{MARK}-notes-10\n"})
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": FREEZE_TEST, ".gitignore": ".venv/\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    (repo / ".venv" / "bin").mkdir(parents=True)
    config = repo / ".venv" / "pyvenv.cfg"
    config.write_text("home = /usr/bin\ninclude-system-site-packages = false\n")
    no_fix = answer(modify("calc.py", '"""A tiny calculator."""', '"""A tiny calculator, to be fixed."""'))
    fix = answer(modify("calc.py", "    return a - b", "    return a + b"))
    with ScriptedServer([no_fix, fix]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", f"{PYTEST} -rA",
                        "--no-reproduce", "--json"], server_url=server.url,
                       extra_env={"PATH": f"{repo / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    requests = json.dumps([request.get("body") for request in server.requests])
    assert "refused: notes.txt" in requests, "the test ran and its output reached the model"
    assert MARK not in requests
    assert config.read_text() == "home = /usr/bin\ninclude-system-site-packages = false\n"


HANGING_WITH_A_DAEMON = '''import os, subprocess, sys, time

DAEMON = DAEMON_SOURCE


def test_hangs():
    subprocess.run([sys.executable, "-c", DAEMON, THE_TOKEN, os.path.abspath("calc.py"), "4"], check=True)
    with open(os.path.join("tests", "SLEEPING"), "w") as marker:
        marker.write(str(os.getpid()))
    time.sleep(300)
'''


def test_kill_9_of_the_assistant_takes_the_runs_daemon_along(tmp_path: Path, sandbox_backend: str) -> None:
    """Hole 7, the second half: the assistant killed with -9 while its test hangs, after the test started a setsid
    daemon that changes calc.py 4 s later. Nothing of the run lives on (bubblewrap: --die-with-parent and its PID
    namespace; Landlock: the launcher's and the supervisor's parent-death signals, then the supervisor's sweep)."""
    token = f"daemon-{os.getpid()}-kill9-{sandbox_backend}"
    test = HANGING_WITH_A_DAEMON.replace("THE_TOKEN", repr(token)).replace("DAEMON_SOURCE", repr(DAEMON))
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": test,
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    with ScriptedServer([answer(modify("calc.py", "return a - b", "return a + b"))]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                                 "--test-command", PYTEST, "--no-reproduce"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not (repo / "tests" / "SLEEPING").exists():
                assert time.monotonic() < deadline and proc.poll() is None, "the hanging test never started"
                time.sleep(0.05)
            assert _processes_with(token), "the daemon runs"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    gone = time.monotonic() + 30  # an anti-hang guard: the daemon would change calc.py 4 s in, which is asserted
    while _processes_with(token):
        assert time.monotonic() < gone, "a process of the run outlived the assistant"
        time.sleep(0.05)
    time.sleep(5)  # past the daemon's 4 s
    assert _processes_with(token) == [] and (repo / "calc.py").read_text() == CALC_PY
