"""Packaging: pyproject.toml lists every module and the data the package reads, and the installed `code-assistant` script
works outside the tree.

The install test is slow-ish (~20 s): a wheel built with this environment's setuptools (declared in requirements.txt),
installed into a venv that sees this environment's packages through a .pth file and nothing of the machine's. Select it
alone with `-k installed`.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from repos import ROOT, python_repo

WEIGHTS = "code_assistant/retrieve/fusion_weights.json"  # data the ranking reads at run time


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_one_package_and_its_console_script_are_declared() -> None:
    assert _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"] == ["code_assistant", "code_assistant.*"]
    assert "py-modules" not in _pyproject()["tool"]["setuptools"]
    assert _pyproject()["project"]["scripts"] == {"code-assistant": "code_assistant.cli:entry"}
    assert _pyproject()["tool"]["setuptools"]["package-data"] == {"code_assistant.retrieve": ["fusion_weights.json"]}


def test_root_modules_are_entrances_that_only_re_export() -> None:
    """The design card's modules stay at the root for a checkout; the code lives in the package."""
    for name in ("main", "config", "indexer", "context_builder", "file_editor", "agent"):
        tree = ast.parse((ROOT / f"{name}.py").read_text(encoding="utf-8"))
        defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
        imports = [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
        assert defined == [] and imports and all(m and m.startswith("code_assistant") for m in imports), name
    assert sorted(p.stem for p in ROOT.glob("*.py")) == ["agent", "config", "context_builder", "file_editor",
                                                         "indexer", "main"]


def _requirement_names(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        spec = line.split("#", 1)[0].strip()
        if spec:
            name = spec.split(">", 1)[0].split("<", 1)[0].split("=", 1)[0].strip().lower()
            out[name] = spec.replace(" ", "")
    return out


def test_dependencies_mirror_requirements_txt_without_the_model_package() -> None:
    runtime = (ROOT / "requirements.txt").read_text(encoding="utf-8").split("# Tests")[0].splitlines()
    assert _requirement_names(_pyproject()["project"]["dependencies"]) == _requirement_names(runtime)
    model = _requirement_names((ROOT / "requirements-model.txt").read_text(encoding="utf-8").splitlines())
    assert not set(model) & set(_requirement_names(_pyproject()["project"]["dependencies"]))



def test_the_model_server_is_built_anew_with_its_own_flags_never_taken_from_pips_cache() -> None:
    """pip keys the wheels it built by URL, not by --config-settings (pypa/pip#11164): a -march=native wheel built
    earlier would be reused, and it dies of SIGILL on CPUs that report AMX the kernel cannot run (it did, in CI)."""
    setup = (ROOT / "README.md").read_text(encoding="utf-8").split("```")[1].strip().splitlines()[0]
    assert setup.startswith("./setup.sh")
    assert '--no-cache-dir -r requirements-server.txt' in (ROOT / "setup.sh").read_text(encoding="utf-8")
    server = _requirement_names((ROOT / "requirements-server.txt").read_text(encoding="utf-8").splitlines())
    assert list(server) == ["llama-cpp-python[server]"] and "-DGGML_NATIVE=OFF" in server["llama-cpp-python[server]"]
    others = (ROOT / "requirements.txt").read_text(encoding="utf-8") + (ROOT / "requirements-model.txt").read_text(
        encoding="utf-8")
    assert not any(name.startswith("llama") for name in _requirement_names(others.splitlines()))

def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INDEX="1", PYTHONDONTWRITEBYTECODE="1")
    return env


def _isolated_venv(env_dir: Path) -> Path:
    """A venv that sees no machine site-packages: only its own, then (through a .pth) the running environment's,
    so dependencies are not downloaded again but the project itself comes from what is installed into it."""
    venv.EnvBuilder(system_site_packages=False, with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    outer = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(own) / "outer_env.pth").write_text("\n".join(sorted(outer)) + "\n", encoding="utf-8")
    return python


def test_installed_console_script_runs_outside_the_tree(tmp_path: Path) -> None:
    """Slow (~20 s): builds a wheel with this environment's setuptools and installs it into a throwaway venv."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "code_assistant", src / "code_assistant", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ["pyproject.toml", "README.md", *(p.name for p in ROOT.glob("*.py"))]:
        shutil.copy2(ROOT / name, src / name)
    env = _clean_env(tmp_path / "home")
    work = tmp_path / "elsewhere"
    work.mkdir()
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(tmp_path / "dist"), str(src)],
                           capture_output=True, text=True, env=env, cwd=work, timeout=180)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        assert WEIGHTS in archive.namelist(), "the ranking's fitted weights are package data"
    env_dir = tmp_path / "venv"
    python = _isolated_venv(env_dir)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = set(os.listdir(site))
    # pip from the outer interpreter, aimed at the venv: with_pip=True would run ensurepip (slow)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              str(wheel)], capture_output=True, text=True, env=env, cwd=work, timeout=180)
    assert install.returncode == 0, install.stdout + install.stderr
    added = {name for name in set(os.listdir(site)) - before if not name.endswith(".dist-info")}
    assert added == {"code_assistant"}, "exactly one top-level name goes into site-packages"

    script = env_dir / "bin" / "code-assistant"
    where = subprocess.run([str(python), "-c", "import code_assistant.cli as cli; print(cli.__file__)"],
                           capture_output=True, text=True, env=env, cwd=work, timeout=60)
    assert where.returncode == 0, where.stderr
    assert str(env_dir) in where.stdout  # the installed copy, not the source tree
    loaded = subprocess.run([str(python), "-c", "import json; from dataclasses import asdict; "
                             "from code_assistant.retrieve import fusion; "
                             "print(json.dumps({name: asdict(fusion.shipped(name)) for name in ('fast', 'full')}))"],
                            capture_output=True, text=True, env=env, cwd=work, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == json.loads((ROOT / WEIGHTS).read_text(encoding="utf-8"))["models"]

    helped = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=env, cwd=work, timeout=60)
    assert helped.returncode == 0 and "--context-only" in helped.stdout, helped.stderr

    repo = python_repo(tmp_path)
    done = subprocess.run([str(script), "--repo", str(repo), "--task", "fix add", "--context-only", "--json",
                           "--index-path", str(tmp_path / "index")],
                          capture_output=True, text=True, env=env, cwd=work, timeout=180, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "calc.py" in json.loads(done.stdout)["files"]

    bad = subprocess.run([str(script), "--repo", str(tmp_path / "missing"), "--task", "x", "--context-only"],
                         capture_output=True, text=True, env=env, cwd=work, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1  # sys.exit(main()) keeps exit codes

    checkout = subprocess.run([sys.executable, str(ROOT / "main.py"), "--help"], capture_output=True, text=True,
                              env=env, cwd=work, timeout=60)
    same = lambda text: " ".join(text.replace("main.py", "code-assistant").split())  # noqa: E731 - wrapping differs
    assert same(checkout.stdout) == same(helped.stdout), "one CLI behind both doors"


def test_setup_without_root_or_sudo_names_the_missing_system_packages_and_does_nothing() -> None:
    """./setup.sh run by a user who can install nothing (not root, no sudo) on a machine without Go or bubblewrap:
    the `apt-get install` line to run, exit 2, and no .venv made."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the script as another user (setpriv)")
    with tempfile.TemporaryDirectory(prefix="setup-") as where:  # pytest's tmp_path is root's alone (mode 700)
        _setup_as_nobody(Path(where))


def _setup_as_nobody(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(ROOT / "setup.sh", checkout / "setup.sh")
    tools = tmp_path / "bin"  # what the machine has: a shell, Python and coreutils; no go, bwrap, sudo or apt-get
    tools.mkdir()
    for name in ("bash", "env", "id", "sort", "dirname", "git", "node", "npm", "cc", "c++", "cmake"):
        if found := shutil.which(name):
            (tools / name).symlink_to(found)
    (tools / "python3").symlink_to(sys.executable)
    os.chmod(tmp_path, 0o755)
    os.chmod(checkout, 0o777)
    done = subprocess.run([shutil.which("setpriv") or "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(tools / "bash"),
                           "setup.sh"], cwd=checkout, env={"PATH": str(tools), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "apt-get install bubblewrap golang-go" in done.stderr
    assert not (checkout / ".venv").exists()
