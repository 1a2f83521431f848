"""The run-directory guard: same settings resume, other settings are refused by name, --fresh keeps everything."""

from __future__ import annotations

import json
import os

import pytest

from triforge.core.provenance import (
    Fingerprint,
    StaleResults,
    code_version,
    commit_of,
    file_hash,
    guard_run_dir,
    refuse_stale_items,
    stale_items,
)


def fp(**over) -> Fingerprint:
    fields = {"model": {"model": "a", "base_url": "http://127.0.0.1:1/v1", "extra_body": {}}, "data": "d"}
    return Fingerprint.of(**{**fields, **over})


def test_same_settings_resume_and_other_settings_are_named(tmp_path):
    assert guard_run_dir(tmp_path / "r", fp()) is None  # a new directory
    (tmp_path / "r" / "results.json").write_text("{}")
    assert guard_run_dir(tmp_path / "r", fp()) is None  # the same settings
    other = fp(model={"model": "a", "base_url": "http://127.0.0.1:2/v1", "extra_body": {"top_k": 1}}, data="e")
    with pytest.raises(StaleResults) as e:
        guard_run_dir(tmp_path / "r", other)
    msg = str(e.value)
    assert "(data, model.base_url, model.extra_body differ); use a new --out or --fresh" in msg
    assert "\n" not in msg
    stored = json.loads((tmp_path / "r" / "provenance.json").read_text())
    assert stored["settings_hash"] == fp().hash and stored["triforge"] == code_version()["triforge"]


def test_fresh_moves_everything_aside_and_deletes_nothing(tmp_path):
    out = tmp_path / "r"
    guard_run_dir(out, fp())
    (out / "results.json").write_text('{"mine": 1}')
    (out / "problems" / "p").mkdir(parents=True)
    (out / "problems" / "p" / "solution.py").write_text("print(1)")
    first = guard_run_dir(out, fp(data="other"), fresh=True)
    assert first is not None and first.parent == out and first.name.startswith("previous-")
    assert json.loads((first / "results.json").read_text()) == {"mine": 1}
    assert (first / "problems" / "p" / "solution.py").read_text() == "print(1)"
    assert sorted(p.name for p in out.iterdir()) == sorted([first.name, "provenance.json"])
    (out / "results.json").write_text("{}")
    second = guard_run_dir(out, fp(), fresh=True)  # a second --fresh in the same second gets its own folder
    assert second != first and first.is_dir() and (second / "results.json").is_file()


def test_results_without_a_record_or_with_a_broken_one_are_refused(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "results.jsonl").write_text("{}\n")
    with pytest.raises(StaleResults, match="no record of their settings"):
        guard_run_dir(tmp_path / "old", fp())
    (tmp_path / "trace_only").mkdir()
    (tmp_path / "trace_only" / "trace.jsonl").write_text("{}\n")  # a trace is not a result
    assert guard_run_dir(tmp_path / "trace_only", fp()) is None
    guard_run_dir(tmp_path / "torn", fp())
    (tmp_path / "torn" / "provenance.json").write_text('{"fingerprint": ')
    with pytest.raises(StaleResults, match="unreadable"):
        guard_run_dir(tmp_path / "torn", fp())


def test_changed_items_and_hashes(tmp_path):
    assert stale_items({"a": "1", "b": "2", "gone": "3"}, {"a": "1", "b": "9", "new": "4"}) == ["b"]
    refuse_stale_items(tmp_path, [])
    with pytest.raises(StaleResults, match=r"\(a, b, c and 2 more\)"):
        refuse_stale_items(tmp_path, ["a", "b", "c", "d", "e"])
    f = tmp_path / "corpus.jsonl"
    f.write_text("x")
    h = file_hash(f)
    f.write_text("y")
    assert file_hash(f) != h and file_hash(None) is None and file_hash(tmp_path / "absent") is None
    assert fp().stamp()["settings_hash"] == fp().hash and "commit" in fp().stamp()


# -- the commit a result came from, also where git refuses the checkout (issue 39) ----------------------------

def _repo(tmp_path, packed: bool = False):
    import subprocess

    repo = tmp_path / "clone"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "safe.directory=*", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    if packed:
        subprocess.run([*git, "pack-refs", "--all"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, sha


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the clone to another user needs root")
def test_the_commit_is_read_from_a_clone_owned_by_another_user(tmp_path):
    import pwd
    import shutil

    repo, sha = _repo(tmp_path)
    nobody = pwd.getpwnam("nobody")
    for p in [repo, *repo.rglob("*")]:
        shutil.chown(p, nobody.pw_uid, nobody.pw_gid)
    assert commit_of(repo / "src") == sha  # git alone says "dubious ownership" here
    (repo / "src" / "a.py").write_text("x = 2\n")
    assert commit_of(repo / "src") == sha + "+dirty"


@pytest.mark.parametrize("packed", [False, True], ids=["loose-ref", "packed-refs"])
def test_the_commit_is_read_from_the_files_where_git_cannot_run(tmp_path, monkeypatch, packed):
    repo, sha = _repo(tmp_path, packed=packed)
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert commit_of(repo / "src") == sha


def test_no_checkout_no_commit(tmp_path):
    (tmp_path / "pkg").mkdir()
    assert commit_of(tmp_path / "pkg") is None
