"""The read gate: every file the assistant reads for the model passes one check (code_assistant/gate.py) — inside
the tree once links are followed, not under .git, not the assistant's own index or state, not a secret file by name
or by content.

Tried as an attacker would: credentials planted in a test HOME outside the repository, and a repository whose failing
tests name them as traceback frames — by a relative path that climbs out of the tree, and through a symlink the test
run plants — while a scripted model asks its tools to read, grep and search for them; under the default sandbox. No
marker of those files may reach any request nor the run log. The gate itself is checked on a table of paths.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from code_assistant.agent.question import not_in_repository
from code_assistant.gate import Gate, Refusal, Refused, secret_file
from code_assistant.index.repo_files import list_repo_files, visible_files
from tests.repos import CALC_PY, answer, modify, python_repo, run_cli, write_tree
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
# markers no redaction pattern knows: only a read of the file could bring them to the model
DOCKER_MARKER = "docker-marker-4417"
KUBE_MARKER = "kube-marker-8812"
NETRC_MARKER = "netrc-marker-2290"


def _plant(home: Path) -> dict[str, Path]:
    files = {".docker/config.json": json.dumps({"auths": {"registry.example.com": {"auth": "bWU6cHc="}},
                                                 "note": DOCKER_MARKER}),
             ".kube/config": f"apiVersion: v1\ncurrent-context: {KUBE_MARKER}\n",
             ".netrc": f"machine example.com login me password pw\n# {NETRC_MARKER}\n"}
    for rel, text in files.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    return {rel: home / rel for rel in files}


def _hostile_tests(repo: Path, planted: dict[str, Path]) -> str:
    """A test that names HOME's files as frames by a path that climbs out of the tree, and one that plants a symlink
    to HOME's .netrc in the tree (the sandbox lets it write there) and names that as a frame."""
    climbs = [os.path.relpath(planted[name], repo) for name in (".docker/config.json", ".kube/config")]
    return (f"import os\n\n\ndef test_frames_that_climb_out():\n"
            f"    raise AssertionError('File \"{climbs[0]}\", line 1\\nFile \"{climbs[1]}\", line 2')\n\n\n"
            f"def test_a_frame_through_a_planted_link():\n"
            f"    if not os.path.islink('tests/trace_1.py'):\n"
            f"        os.symlink({str(planted['.netrc'])!r}, 'tests/trace_1.py')\n"
            f"    raise AssertionError('File \"tests/trace_1.py\", line 1')\n")


def test_frames_links_and_tools_never_bring_a_file_of_home_to_the_model(tmp_path: Path, isolated_env: Path,
                                                                       sandbox_backend: str) -> None:
    planted = _plant(isolated_env)
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": "from calc import add\n\n\n"
                                  "def test_add():\n    assert add(2, 3) == 5\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\n"})
    (repo / "tests" / "test_hostile.py").write_text(_hostile_tests(repo, planted))
    climb = os.path.relpath(planted[".docker/config.json"], repo)
    look = {"tool_calls": [{"name": "read", "arguments": {"path": "tests/trace_1.py"}},
                           {"name": "read", "arguments": {"path": climb}},
                           {"name": "grep", "arguments": {"pattern": "marker"}},
                           {"name": "search", "arguments": {"query": "marker machine login password"}}]}
    fix = answer(modify("calc.py", "    return a - b", "    return a + b"))
    with ScriptedServer([look, fix, fix, fix]) as server:  # the repeated fix is asked once more, sampled
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce",
                        "--max-iterations", "2", "--json"], server_url=server.url)
    result = json.loads(proc.stdout)
    assert result["sandbox"]["backend"] == sandbox_backend, proc.stderr
    assert (repo / "tests" / "trace_1.py").is_symlink(), "the test run planted its link"
    sent = json.dumps(server.requests)
    assert len(server.chat_requests) >= 3, "a fix request was built from the failing frames"
    assert "tests/trace_1.py" in sent and climb in sent, "the frames were seen, as names"
    assert "outside the repository" in sent and "'..' may not be used" in sent, "the tools' reads were refused"
    log = Path(result["log"]).read_text()
    for marker in (DOCKER_MARKER, KUBE_MARKER, NETRC_MARKER):
        assert marker not in sent and marker not in log and marker not in proc.stdout + proc.stderr, marker


# ----- the gate itself, on a table of paths ------------------------------------------------------------------------
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"


@pytest.fixture()
def tree(tmp_path: Path) -> Gate:
    """A repository beside a HOME of credentials, with links out of it and into .git, and the assistant's own index
    inside it."""
    home, repo = tmp_path / "home", tmp_path / "repo"
    write_tree(home, {".netrc": "machine x password pw\n", ".docker/config.json": '{"auths": {}}', "notes.txt": "x\n"})
    write_tree(repo, {"calc.py": "x = 1\n", "pkg/mod.py": "y = 2\n", ".git/config": "[core]\n", "README.md": "hi\n",
                      ".env": "A=1\n", ".env.local": "A=1\n", ".env.example": "A=\n", "deploy/id_rsa": "k\n",
                      "certs/server.pem": "c\n", "tls.key": "k\n", ".netrc": "m\n", "home/.aws/credentials": "k\n",
                      "secrets.yaml": "a: 1\n", ".npmrc": "save-exact=true\n", "web/.npmrc": "//r/:_authToken=abc\n",
                      ".pypirc": "[pypi]\nusername = me\npassword = pw\n", "tsconfig.json": '{"strict": true}',
                      "ci/config.json": '{"auths": {"r.io": {"auth": "bWU6cHc="}}}',
                      "deploy/kubeconfig.yaml": "users:\n- user:\n    client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVk=\n",
                      "keys.py": f'KEY = """{PEM}"""\n', "aws.py": "ID = 'AKIA" + "Z7Q2M4K8W3N6P5R1'\n",
                      "blob.bin": "\0\1\2", "big.txt": "x" * 3000, "index/runs/log.jsonl": "{}\n"})
    (repo / "out.txt").symlink_to(home / "notes.txt")
    (repo / "tests").mkdir()
    (repo / "tests" / "trace_1.py").symlink_to(home / ".netrc")
    (repo / "homelink").symlink_to(home, target_is_directory=True)
    (repo / "gitlink").symlink_to(repo / ".git", target_is_directory=True)
    (repo / "alias.py").symlink_to(repo / "pkg" / "mod.py")
    (repo / "hidden.txt").symlink_to(repo / ".env")
    os.mkfifo(repo / "pipe")
    return Gate(repo, (repo / "index",))


@pytest.mark.parametrize(("path", "reason"), [
    ("calc.py", None), ("./pkg/mod.py", None), ("README.md", None), (".env.example", None), (".npmrc", None),
    ("tsconfig.json", None), ("alias.py", None),
    ("", Refusal.INVALID), ("/etc/passwd", Refusal.ABSOLUTE), ("~/.netrc", Refusal.ABSOLUTE),
    ("../home/.netrc", Refusal.PARENT), ("pkg/../../home/.netrc", Refusal.PARENT),
    ("out.txt", Refusal.OUTSIDE), ("tests/trace_1.py", Refusal.OUTSIDE), ("homelink/.docker/config.json", Refusal.OUTSIDE),
    (".git/config", Refusal.GIT), ("gitlink/config", Refusal.GIT), ("index/runs/log.jsonl", Refusal.PRIVATE),
    (".env", Refusal.SECRET), (".env.local", Refusal.SECRET), ("deploy/id_rsa", Refusal.SECRET),
    ("certs/server.pem", Refusal.SECRET), ("tls.key", Refusal.SECRET), (".netrc", Refusal.SECRET),
    ("home/.aws/credentials", Refusal.SECRET), ("secrets.yaml", Refusal.SECRET), ("hidden.txt", Refusal.SECRET),
    ("web/.npmrc", Refusal.SECRET), (".pypirc", Refusal.SECRET), ("ci/config.json", Refusal.SECRET),
    ("deploy/kubeconfig.yaml", Refusal.SECRET), ("keys.py", Refusal.SECRET), ("aws.py", Refusal.SECRET),
    ("missing.py", Refusal.MISSING), ("pkg", Refusal.DIRECTORY), ("pipe", Refusal.NOT_A_FILE),
    ("blob.bin", Refusal.BINARY),
])
def test_the_gate_reads_what_lies_in_the_tree_and_refuses_the_rest_saying_why(tree: Gate, path: str,
                                                                               reason: Refusal | None) -> None:
    if reason is None:
        assert tree.read(path) == (tree.root / path).read_text()
        return
    with pytest.raises(Refused) as refused:
        tree.read(path)
    assert refused.value.reason == reason and str(refused.value)


def test_a_link_inside_the_tree_is_its_targets_path_and_size_is_a_limit_or_a_head(tree: Gate) -> None:
    assert tree.admit("alias.py") == "pkg/mod.py" and tree.admit("./calc.py") == "calc.py"
    with pytest.raises(Refused, match="too large") as refused:
        tree.read("big.txt", max_bytes=1000)
    assert refused.value.reason == Refusal.TOO_LARGE
    assert tree.read("big.txt", max_bytes=1000, head=True) == "x" * 1000
    assert tree.text("out.txt") is None and tree.text("calc.py") == "x = 1\n"


def test_an_edit_may_name_a_file_still_to_be_made_but_never_out_of_the_tree(tree: Gate) -> None:
    assert tree.place("pkg/new.py") == tree.root / "pkg" / "new.py"
    for path in ("homelink/new.py", "gitlink/hooks/pre-commit", "index/new.txt", "../x.py"):
        with pytest.raises(Refused):
            tree.place(path)


@pytest.mark.parametrize(("rel", "text", "secret"), [
    (".env.production", "", True), ("config/.env", "", True), (".envrc", "export A=1\n", True),
    ("a/.ssh/known_hosts", "", True), ("infra/prod.tfstate", "{}", True), (".git-credentials", "", True),
    (".npmrc", "registry=https://r.example\n", False), (".npmrc", "_auth = bWU6cHc=\n", True),
    (".yarnrc.yml", "npmAuthToken: abc\n", True), (".pypirc", "[pypi]\nusername = me\n", False),
    ("package.json", '{"name": "app"}', False), ("docker/config.json", '{"credsStore": "desktop"}', False),
    ("k8s/deploy.yaml", "kind: Deployment\n", False), ("README.md", "starts -----BEGIN PRIVATE KEY-----\n", False),
    ("notes.md", f"the deploy key:\n{PEM}", True),
])
def test_a_secret_file_by_name_or_by_what_it_holds(rel: str, text: str, secret: bool) -> None:
    assert secret_file(rel, text) == secret


def test_the_index_lists_no_file_below_a_directory_a_test_run_swapped_for_a_link(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "conf/settings.py": "DEBUG = False\n"})
    home = write_tree(tmp_path / "home", {"settings.py": "TOKEN = 'home-marker'\n"})
    shutil.rmtree(repo / "conf")
    (repo / "conf").symlink_to(home, target_is_directory=True)  # git still lists conf/settings.py: it is tracked
    assert list_repo_files(repo) == ["calc.py"] and visible_files(repo) == ["calc.py"]


def test_an_answers_citation_of_a_file_the_gate_refuses_is_flagged_as_not_in_the_repository(tree: Gate) -> None:
    answer_text = "add is at calc.py:1, the login at tests/trace_1.py:1 and the key at certs/server.pem:1"
    assert not_in_repository(answer_text, tree, ["calc.py"]) == ["tests/trace_1.py:1", "certs/server.pem:1"]
