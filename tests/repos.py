"""Building small real repositories for tests, running the CLI, and comparing trees byte for byte."""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import pty
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from code_assistant.index.indexer import RepoIndex

ROOT = Path(__file__).resolve().parent.parent

CALC_PY = '''"""A tiny calculator."""


def add(a, b):
    return a - b


def multiply(a, b):
    return a * b
'''

TEST_CALC_PY = '''from calc import add, multiply


def test_add():
    assert add(2, 3) == 5


def test_multiply():
    assert multiply(3, 4) == 12
'''


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def indexed_tree(root: Path, files: dict[str, str]) -> RepoIndex:
    """`files` written under `root/repo` and indexed into `root/index` with the local embedder: what retrieval reads."""
    from code_assistant.index import embeddings, store
    from code_assistant.index.indexer import Indexer

    repo = write_tree(root / "repo", files)
    embedder = embeddings.make_embedder("local")
    chunks = store.ChunkStore(store.open_client(root / "index"), store.collection_name(str(repo), embedder.name))
    return Indexer(repo, root / "index", embedder, chunks).update()[0]


def git_init(repo: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=repo, check=True, env=env)


def python_repo(root: Path, files: dict[str, str] | None = None, git: bool = True) -> Path:
    repo = root / "proj"
    repo.mkdir()
    write_tree(repo, files or {"calc.py": CALC_PY, "tests/test_calc.py": TEST_CALC_PY,
                               "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
    if git:
        git_init(repo)
    return repo


NODE_APP = {  # node's built-in runner; add() subtracts, so `npm test` fails on 'adds'
    "package.json": json.dumps({"name": "app", "version": "1.0.0", "scripts": {"test": "node --test"}}),
    "src/math.js": "function add(a, b) {\n  return a - b;\n}\nmodule.exports = { add };\n",
    "test/math.test.js": ("const test = require('node:test');\nconst assert = require('node:assert');\n"
                          "const { add } = require('../src/math.js');\n\n"
                          "test('adds', () => {\n  assert.strictEqual(add(2, 3), 5);\n});\n")}
GO_SVC = {  # a Go module whose Add subtracts, so `go test ./...` fails on TestAdd
    "go.mod": "module example.com/svc\n\ngo 1.19\n",
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
    "calc/calc_test.go": ("package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n"
                          "\tif Add(2, 3) != 5 {\n\t\tt.Errorf(\"Add(2, 3) = %d, want 5\", Add(2, 3))\n\t}\n}\n")}


def node_repo(root: Path) -> Path:
    repo = write_tree(root / "app", NODE_APP)
    git_init(repo)
    return repo


def go_repo(root: Path) -> Path:
    repo = write_tree(root / "svc", GO_SVC)
    git_init(repo)
    return repo


def snapshot(root: Path) -> dict[str, tuple[bytes, int] | str]:
    """Every path below root (except .git) with its bytes and mode: the unit of 'byte for byte'."""
    result: dict[str, tuple[bytes, int] | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir != ".":
            result[rel_dir + "/"] = "dir"
        for name in filenames:
            path = Path(dirpath) / name
            rel = os.path.relpath(path, root)
            result[rel] = (path.read_bytes(), stat.S_IMODE(path.lstat().st_mode))
    return result


def answer(*changes: dict) -> str:
    return json.dumps({"changes": list(changes)})


def modify(path: str, search: str, replace: str, description: str = "") -> dict:
    return {"file_path": path, "action": "modify", "description": description, "search": search, "replace": replace}


def create(path: str, content: str) -> dict:
    return {"file_path": path, "action": "create", "description": "new file", "content": content}


NODE_FIX = modify("src/math.js", "  return a - b;", "  return a + b;")
GO_FIX = modify("calc/calc.go", "\treturn a - b", "\treturn a + b")
INVENTORY_FIX = answer(  # what makes examples/inventory's three failing tests pass
    modify("inventory/stock.py",
           "        sku = parse_sku(sku)\n        self.quantities[sku] = self.quantities.get(sku, 0) - quantity\n",
           "        sku = parse_sku(sku)\n        if quantity > self.quantities.get(sku, 0):\n"
           "            raise ValueError(f\"only {self.quantities.get(sku, 0)} of {sku} in stock\")\n"
           "        self.quantities[sku] = self.quantities.get(sku, 0) - quantity\n"),
    modify("inventory/stock.py", "    sku = text.strip()\n", "    sku = text.strip().upper()\n"),
    modify("inventory/stock.py", "        return int(total * (1 - discount))\n",
           "        return round(total * (1 - discount))\n"))


def _cli_env(server_url: str | None, api_key: str | None, extra_env: dict[str, str] | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the repos' own pytest runs: no stray plugin folders
    if server_url:
        env["OPENAI_BASE_URL"] = server_url
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    env.update(extra_env or {})
    return env


def run_cli(args: list[str], *, server_url: str | None = None, api_key: str | None = "test-key",
            timeout: float = 180, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                          env=_cli_env(server_url, api_key, extra_env), timeout=timeout, stdin=subprocess.DEVNULL)


def read_until_closed(fd: int) -> bytes:
    """Everything a pseudo-terminal's other side writes, until it closes (EIO) or ends."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def run_cli_on_a_terminal(args: list[str], *, server_url: str | None = None, api_key: str | None = "test-key",
                          timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """run_cli with stdout on a pseudo-terminal, as a person runs it: a run's answers stream to stderr (captured),
    --ask's to the terminal."""
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args], stdout=child, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=_cli_env(server_url, api_key, {"TERM": "dumb"}))
    os.close(child)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(read_until_closed(main)), daemon=True)
    reader.start()
    try:
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        reader.join(10)
        os.close(main)
    stdout = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr.decode("utf-8", "replace"))


def progress_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[")]


# ----- a run caught in the middle: its test of iteration 1 sleeps, so that something can happen meanwhile -----------
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
SLOW_SECOND_RUN = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": ("import os, time\nfrom calc import add\n\n\ndef test_add():\n"
                           "    if os.path.exists('STARTED'):\n"
                           "        open('SLEEPING', 'w').write(str(os.getpid()))\n        time.sleep(120)\n"
                           "    open('STARTED', 'w').close()\n    assert add(2, 3) == 5\n"),
    "pytest.ini": "[pytest]\npythonpath = .\n", ".gitignore": "STARTED\nSLEEPING\n",
}


# a plan that changes calc.py and creates a file in a new directory: what a rollback must put back and take away
FIX_AND_NEW_MODULE = answer(modify("calc.py", "    return a - b", "    return a + b"),
                            create("pkg/new_module.py", "X = 1\n"))


def start_run(repo: Path, server_url: str, *more: str, task: str = "fix add") -> subprocess.Popen[str]:
    """The CLI in a session of its own (so a kill reaches it alone), its test command unconfined: a sandboxed test
    dies with the assistant (tests/test_sandbox.py), this one is left behind for --recover to find."""
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", task,
                             "--test-command", PYTEST, "--sandbox", "off", *more], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_cli_env(server_url, "k", None),
                            start_new_session=True)


def wait_for_tests(proc: subprocess.Popen[str]) -> list[str]:
    """Read the run's lines up to its first test iteration; returns them."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("[Testing (iteration 1)"):
            return seen
    raise AssertionError("the run never reached its first test iteration: " + "".join(seen))


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def sleeping_test(repo: Path) -> int:
    """The pid of the run's test of iteration 1, once it sleeps (it writes its marker first)."""
    deadline = time.monotonic() + 60
    while not (repo / "SLEEPING").exists() or not (repo / "SLEEPING").read_text():
        assert time.monotonic() < deadline, "the slow test never started"
        time.sleep(0.05)
    return int((repo / "SLEEPING").read_text())


def orphan(repo: Path, pid: int) -> int:
    """The killed run's test, still sleeping: the assistant died, its test command did not. Its markers go."""
    (repo / "SLEEPING").unlink()
    (repo / "STARTED").unlink()
    assert alive(pid)
    return pid


# ----- a real terminal ---------------------------------------------------------------------------------------------
_ANSI = __import__("re").compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][A-Z0-9]|\x1b[=>]|\r|\x08")


class Terminal:
    """The CLI on a pseudo-terminal of its own (its controlling terminal: Ctrl-C there is a real SIGINT), as a person
    runs it; `expect` reads until a pattern shows, `send` types."""

    def __init__(self, args: list[str], *, server_url: str | None = None, extra_env: dict[str, str] | None = None):
        env = _cli_env(server_url, "test-key", {"TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "COLUMNS": "200",
                                                 "LINES": "50", **(extra_env or {})})
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the CLI, nothing else
            os.execve(sys.executable, [sys.executable, str(ROOT / "main.py"), *args], env)
        self.seen = ""
        self.raw = ""  # everything shown, control sequences and all
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")  # a character across reads
        self.status: int | None = None

    def expect(self, pattern: str, timeout: float = 120) -> str:
        """Read until `pattern` (a regex) appears in what was shown since the last match; returns that text."""
        import re
        import select

        deadline = time.monotonic() + timeout
        while not (match := re.search(pattern, self.seen)):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"waited {timeout} s for {pattern!r}; the terminal shows:\n{self.seen[-3000:]}")
            if select.select([self.fd], [], [], min(left, 0.5))[0]:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    raise AssertionError(f"the CLI ended before {pattern!r}:\n{self.seen[-3000:]}")
                self._add(data)
        shown, self.seen = self.seen[:match.end()], self.seen[match.end():]
        return shown

    def _add(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        self.raw += text
        self.seen += _ANSI.sub("", text)

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout: float = 60) -> int:
        """The CLI's exit code, reading what it shows meanwhile; an AssertionError after `timeout` seconds (a CLI
        that waits for an answer writes nothing: the terminal is read only when it has something)."""
        import select

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if select.select([self.fd], [], [], 0.05)[0]:
                    self._add(os.read(self.fd, 65536))
            except OSError:
                pass
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                with contextlib.suppress(OSError):
                    while select.select([self.fd], [], [], 0)[0] and (data := os.read(self.fd, 65536)):
                        self._add(data)
                self.status = os.waitstatus_to_exitcode(status)
                return self.status
        raise AssertionError("the CLI did not end:\n" + self.seen[-3000:])

    def close(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


class Listener:
    """A server on 127.0.0.1, outside every sandbox, that keeps whatever reaches it: where an attack would send what
    it stole (a hostile repository's key address, a test's loot). `url` as an OpenAI-compatible base URL."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(5)
                try:
                    self.received.append(connection.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.socket.close()

    def __enter__(self) -> Listener:  # noqa: PYI034 - as the other context managers of the tests say it
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
