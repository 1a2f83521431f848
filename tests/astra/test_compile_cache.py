"""The NVRTC disk cache is shared by workers on several GPUs: files appear whole, and a damaged entry is
compiled again instead of trusted."""

from __future__ import annotations

import pytest

from triforge.astra.task import get_task

pytest.importorskip("cuda.bindings.nvrtc")


def _compile(monkeypatch, tmp_path):
    from triforge.astra import compile as comp

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(comp, "_MEM", {})
    task = get_task("silu_and_mul")
    return comp, comp.nvrtc_compile(task.baseline_source(), list(task.name_expressions().values()))


def test_cache_entries_are_written_whole_and_reused(monkeypatch, tmp_path):
    comp, first = _compile(monkeypatch, tmp_path)
    assert first.ok and not first.cached
    files = sorted(p.name for p in comp.cache_dir().iterdir())
    assert len(files) == 2 and not any(f.endswith(".tmp") for f in files), files
    monkeypatch.setattr(comp, "_MEM", {})
    _, again = _compile(monkeypatch, tmp_path)
    assert again.ok and again.cached and again.cubin == first.cubin


def test_a_damaged_cache_entry_is_compiled_again(monkeypatch, tmp_path):
    comp, first = _compile(monkeypatch, tmp_path)
    (json_file,) = comp.cache_dir().glob("*.json")
    json_file.write_text('{"lowered": ')  # cut short, as a reader racing a non-atomic writer could see it
    monkeypatch.setattr(comp, "_MEM", {})
    _, again = _compile(monkeypatch, tmp_path)
    assert again.ok and not again.cached and again.cubin
