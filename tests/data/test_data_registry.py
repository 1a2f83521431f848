"""The bundled data sets: every file checked against its manifest, names resolved in one place, paths still
work (a checkout of the upstream layout, GitHub's zip of it), and damaged copies caught by class."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from triforge.core.errors import UserError
from triforge.cpagent.dataset import DatasetError, load_dataset, load_problem
from triforge.data import bundled_sets, ensure_verified, get, lookup, resolve_path
from triforge.data import registry as reg
from triforge.data.manifest import MANIFEST, write_manifest
from triforge.data.registry import open_set

EXPECTED_ITEMS = {
    "dcp-bench-open": {"problems": 101, "instances": 269},
    "ifbench": {"prompts": 300, "verdicts": 147},
    "hotpotqa-hard-500": {"questions": 500, "paragraphs": 4960},
    "hotpotqa-mini": {"questions": 20, "abstracts": 60},
}
HOTPOTQA_SHA = "d2d566c667d789508aa3511d89cfcc3480fc9d62e556a09331be9376be42c075"  # published in PROVENANCE.md


def test_every_bundled_set_is_listed_licensed_and_matches_its_manifest():
    sets = {ds.name: ds for ds in bundled_sets()}
    assert set(sets) == set(EXPECTED_ITEMS)
    for name, ds in sets.items():
        assert ds.items == EXPECTED_ITEMS[name]
        assert (ds.root / "LICENSE").is_file() and (ds.root / "PROVENANCE.md").is_file(), name
        assert set(ds.manifest["files"]) >= {"LICENSE", "PROVENANCE.md"}, name
        listed = {p.relative_to(ds.root).as_posix() for p in ds.root.rglob("*") if p.is_file()} - {MANIFEST}
        assert listed == set(ds.manifest["files"]), name  # every file shipped is hashed
        assert ds.check() == [], name
    assert sets["hotpotqa-hard-500"].manifest["files"]["hotpotqa_hard_500.jsonl.gz"]["content"] == {
        "hotpotqa_hard_500.jsonl": HOTPOTQA_SHA}
    assert "CC BY-SA 4.0" in (sets["hotpotqa-hard-500"].root / "LICENSE").read_text()
    assert len(sets["dcp-bench-open"].manifest["files"]["dcp-bench-open.zip"]["content"]) == 202


def test_the_loaders_read_the_bundled_sets_by_default():
    from triforge.maestro.benchmarks.hotpotqa import load_hotpotqa
    from triforge.maestro.benchmarks.ifbench import load_ifbench

    assert len(load_dataset()) == 101 and load_problem(None, "abbots_puzzle").id == "abbots_puzzle"
    assert len(load_ifbench()) == 300
    assert len(load_hotpotqa()[0]) == 20  # hotpotqa-mini stays the default: the fast set
    questions, paragraphs = load_hotpotqa("hotpotqa-hard-500")
    assert len(questions) == 500 and len(paragraphs) == 4920  # distinct titles among the 4,960 paragraphs


def test_names_aliases_variables_and_kinds_resolve_in_one_place(tmp_path, monkeypatch):
    assert resolve_path(None, "cpbench") == get("dcp-bench-open").path()
    assert lookup("mini", "hotpotqa").name == "hotpotqa-mini"
    with pytest.raises(UserError, match="holds ifbench data, not cpbench"):
        resolve_path("ifbench", "cpbench")
    with pytest.raises(UserError, match="no cpbench data set named 'dcp-bench'.*dcp-bench-open"):
        resolve_path("dcp-bench", "cpbench")
    monkeypatch.setenv("TRIFORGE_IFBENCH", str(tmp_path))  # the variable may hold a path ...
    assert resolve_path(None, "ifbench") == tmp_path
    monkeypatch.setenv("TRIFORGE_IFBENCH", "ifbench")  # ... or a name
    assert resolve_path(None, "ifbench") == get("ifbench").path()
    # a path is a path, and a name wins over a folder of that name (./NAME reaches the folder)
    (tmp_path / "ifbench").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_path("ifbench", "ifbench") == get("ifbench").path()
    assert resolve_path("./ifbench", "ifbench") == Path("ifbench")


def _upstream_checkout(root: Path, ids: list[str]) -> Path:
    """A folder in the upstream DCP-Bench-Open layout, with these problems of the bundled set."""
    with zipfile.ZipFile(get("dcp-bench-open").path()) as zf:
        for name in zf.namelist():
            if name.split("/")[1] in ids:
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_bytes(zf.read(name))
    return root


def test_a_checkout_its_dataset_folder_and_githubs_zip_of_it_read_as_the_bundled_set(tmp_path):
    ids = ["abbots_puzzle", "among", "cmo_2012"]
    bundled = [load_problem(None, pid) for pid in ids]
    checkout = _upstream_checkout(tmp_path / "DCP-Bench-Open", ids)
    (checkout / "README.md").write_text("upstream files beside dataset/ are ignored")
    assert load_dataset(checkout) == bundled == load_dataset(checkout / "dataset")
    archive = tmp_path / "DCP-Bench-Open-main.zip"  # GitHub: every path under <repo>-<ref>/
    with zipfile.ZipFile(archive, "w") as zf:
        for p in sorted(checkout.rglob("*")):
            if p.is_file():
                zf.write(p, "DCP-Bench-Open-main/" + p.relative_to(checkout).as_posix())
    assert load_dataset(archive) == bundled
    assert str(load_problem(archive, "among").path).startswith(str(archive))
    with pytest.raises(UserError, match="closest: abbots_puzzle"):
        load_problem(archive, "abbot_puzzle")
    not_a_set = tmp_path / "other.zip"
    with zipfile.ZipFile(not_a_set, "w") as zf:
        zf.writestr("top/readme.txt", "no dataset here")
    with pytest.raises(DatasetError, match="holds no dataset/"):
        load_dataset(not_a_set)
    broken = tmp_path / "broken.zip"
    broken.write_bytes(archive.read_bytes()[:100])
    with pytest.raises(DatasetError, match="not a readable zip"):
        load_dataset(broken)


# ---- damaged copies: each class of damage is named; an untouched copy passes ----


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(get(name).root, dst)
    for p in dst.rglob("*"):
        p.chmod(0o644)
    return dst


def _rezip(path: Path, change) -> None:
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    change(members)
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_member_and_reseal(root: Path) -> None:
    """A problem's reference changed inside the zip, the zip's own hash updated to hide it."""
    zp = root / "dcp-bench-open.zip"
    _rezip(zp, lambda m: m.__setitem__("dataset/among/among.json", b"[]"))
    manifest = json.loads((root / MANIFEST).read_text())
    meta = {k: v for k, v in manifest.items() if k != "files"}
    content = manifest["files"]["dcp-bench-open.zip"]["content"]
    fresh = write_manifest(root, meta)
    fresh["files"]["dcp-bench-open.zip"]["content"] = content  # the upstream hashes stay the published ones
    (root / MANIFEST).write_text(json.dumps(fresh))


DAMAGE = {
    "a flipped byte in a licence": ("dcp-bench-open", lambda r: _flip_byte(r / "LICENSE"), "LICENSE: SHA-256"),
    "a truncated data file": ("ifbench", lambda r: (r / "IFBench_test.jsonl.gz").write_bytes(
        (r / "IFBench_test.jsonl.gz").read_bytes()[:-10]), "IFBench_test.jsonl.gz:"),
    "a missing file": ("hotpotqa-mini", lambda r: (r / "corpus.jsonl").unlink(), "corpus.jsonl: missing"),
    "an edited member resealed": ("dcp-bench-open", _edit_member_and_reseal, "among.json: SHA-256 differs"),
    "a member added and resealed": ("dcp-bench-open", lambda r: (_rezip(
        r / "dcp-bench-open.zip", lambda m: m.__setitem__("dataset/extra/extra.json", b"[]")),
        _reseal(r)), "extra.json: not in the manifest"),
    "an edit that keeps the size": ("hotpotqa-mini", lambda r: (r / "questions.jsonl").write_text(
        (r / "questions.jsonl").read_text().replace("mini-01", "mini-99")), "questions.jsonl: SHA-256"),
}


def _reseal(root: Path) -> None:
    manifest = json.loads((root / MANIFEST).read_text())
    zp = manifest["files"]["dcp-bench-open.zip"]
    zp["bytes"] = (root / "dcp-bench-open.zip").stat().st_size
    from triforge.data.manifest import sha256_file

    zp["sha256"] = sha256_file(root / "dcp-bench-open.zip")
    (root / MANIFEST).write_text(json.dumps(manifest))


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damage_is_caught_and_named(tmp_path, case):
    name, damage, message = DAMAGE[case]
    root = _copy(name, tmp_path)
    ds = open_set(root)
    assert ds.check() == []  # the honest copy passes
    damage(root)
    ds = open_set(root)
    problems = ds.check()
    assert problems and any(message in p for p in problems), problems
    with pytest.raises(UserError, match=f"data set {name} .* does not match its manifest"):
        ensure_verified(ds)


def test_a_damaged_fetched_set_is_refused_when_named(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TRIFORGE_DATA_HOME", str(home))
    root = _copy("hotpotqa-mini", home)
    manifest = json.loads((root / MANIFEST).read_text())
    manifest["name"] = "hotpotqa-mini@test"
    (root / MANIFEST).write_text(json.dumps(manifest))
    from triforge.maestro.benchmarks.hotpotqa import load_hotpotqa

    assert len(load_hotpotqa("hotpotqa-mini@test")[0]) == 20
    (root / "questions.jsonl").write_text('{"_id": "x", "question": "q", "answer": "a"}\n')
    with pytest.raises(UserError, match="does not match its manifest.*data fetch hotpotqa-mini --force"):
        load_hotpotqa("hotpotqa-mini@test")


def test_hashes_are_checked_once_per_process_and_again_when_a_file_changes(tmp_path, monkeypatch):
    root = _copy("hotpotqa-mini", tmp_path)
    ds = open_set(root)
    calls = []
    real = reg.DataSet.check

    def counting(self):
        calls.append(self.name)
        return real(self)

    monkeypatch.setattr(reg.DataSet, "check", counting)
    ensure_verified(ds)
    ensure_verified(ds)
    assert calls == ["hotpotqa-mini"]
    (root / "corpus.jsonl").write_text((root / "corpus.jsonl").read_text() + "\n")
    with pytest.raises(UserError, match="corpus.jsonl"):
        ensure_verified(ds)
    assert len(calls) == 2
