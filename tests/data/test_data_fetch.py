"""`triforge data fetch` against a local HTTP server on 127.0.0.1 serving GitHub-shaped archives.

A good archive becomes a set selectable by name; each broken download (404, cut short, another hash, not a
zip, a damaged zip, the wrong layout, an unsafe path) ends in one line, exit 2, and nothing left behind.
"""

from __future__ import annotations

import io
import json
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from triforge.cli.app import main
from triforge.cpagent.dataset import load_dataset, load_problem
from triforge.data import get, read_text
from triforge.data.manifest import sha256_bytes

IDS = ["abbots_puzzle", "among"]


def _zip(files: dict[str, bytes], stored: bool = False) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _dcp_archive(top: str = "DCP-Bench-Open-v2", **kw) -> bytes:
    files = {f"{top}/README.md": b"upstream readme", f"{top}/LICENSE": b"Apache-2.0 text",
             f"{top}/src/tool.py": b"print('not data')"}
    with zipfile.ZipFile(get("dcp-bench-open").path()) as zf:
        for name in zf.namelist():
            if name.split("/")[1] in IDS:
                files[f"{top}/{name}"] = zf.read(name)
    return _zip(files, **kw)


def _ifbench_archive() -> bytes:
    rows = [json.loads(x) for x in read_text(get("ifbench").path()).splitlines()[:5]]
    return _zip({"IFBench-main/data/IFBench_test.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
                 "IFBench-main/LICENSE": b"Apache-2.0 text", "IFBench-main/run_eval.py": b"# code"})


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, bytes, bool]] = {}  # path -> (status, body, cut the body short)
    seen: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append(self.path)
        status, body, cut = self.routes.get(self.path, (404, b"Not Found", False))
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if cut else body)
        if cut:
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.routes, _Handler.seen = {}, []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", _Handler
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "data-home"
    monkeypatch.setenv("TRIFORGE_DATA_HOME", str(h))
    return h


def triforge(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def _everything(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.exists() else []


def test_a_fetched_version_is_verified_listed_and_selectable_by_name(server, home, capsys):
    base, h = server
    h.routes["/DCP-Bench/DCP-Bench-Open/archive/v2.zip"] = (200, _dcp_archive(), False)
    code, out, err = triforge(capsys, "data", "fetch", "dcp-bench-open", "--ref", "v2", "--mirror", base)
    assert code == 0, err
    assert "dcp-bench-open@v2" in out and "2 problems" in out and "--data dcp-bench-open@v2" in out
    root = home / "dcp-bench-open@v2"
    assert _everything(home) == ["dcp-bench-open@v2", *(f"dcp-bench-open@v2/{p}" for p in _everything(root))]
    assert not (root / "README.md").exists() and not (root / "src").exists()  # only the data and its licence
    assert load_dataset("dcp-bench-open@v2") == [load_problem(None, pid) for pid in IDS]
    code, out, _ = triforge(capsys, "data", "list", "--json")
    rows = {r["name"]: r for r in map(json.loads, out.splitlines())}
    assert rows["dcp-bench-open@v2"]["items"] == {"problems": 2} and not rows["dcp-bench-open@v2"]["bundled"]
    assert rows["dcp-bench-open"]["bundled"]  # the bundled set keeps its name
    code, out, _ = triforge(capsys, "data", "path", "dcp-bench-open@v2")
    assert (code, out.strip()) == (0, str(root))
    code, out, _ = triforge(capsys, "data", "verify")
    assert code == 0 and "ok  dcp-bench-open@v2" in out
    (root / "dataset" / "among" / "among.json").write_text("[]")  # damaged after the fetch
    code, out, _ = triforge(capsys, "data", "verify", "dcp-bench-open@v2")
    assert code == 1 and "FAILED dcp-bench-open@v2" in out and "among.json" in out
    code, _, err = triforge(capsys, "cpagent", "refs", "--data", "dcp-bench-open@v2")
    assert code == 2 and "does not match its manifest" in err and "--force" in err
    code, _, err = triforge(capsys, "data", "fetch", "dcp-bench-open", "--ref", "v2", "--mirror", base)
    assert code == 2 and "already exists" in err and "--force" in err
    code, _, err = triforge(capsys, "data", "fetch", "dcp-bench-open", "--ref", "v2", "--mirror", base, "--force")
    assert code == 0, err
    assert triforge(capsys, "data", "verify", "dcp-bench-open@v2")[0] == 0
    assert [p for p in home.iterdir() if p.name.startswith(".")] == []


def test_ifbench_from_an_environment_base_url_and_into_a_chosen_folder(server, home, capsys, monkeypatch, tmp_path):
    from triforge.maestro.benchmarks.ifbench import load_ifbench

    base, h = server
    h.routes["/allenai/IFBench/archive/main.zip"] = (200, _ifbench_archive(), False)
    monkeypatch.setenv("TRIFORGE_DATA_URL", base)
    code, out, err = triforge(capsys, "data", "fetch", "ifbench")
    assert code == 0, err
    assert [e.prompt for e in load_ifbench("ifbench@main")] == [e.prompt for e in load_ifbench()[:5]]
    to = tmp_path / "mine"
    code, out, err = triforge(capsys, "data", "fetch", "ifbench", "--to", str(to))
    assert code == 0 and f"--data {to}" in out, err
    assert sorted(p.name for p in to.iterdir()) == ["IFBench_test.jsonl", "LICENSE", "manifest.json"]
    assert len(load_ifbench(str(to))) == 5
    assert triforge(capsys, "data", "verify", str(to))[0] == 0


ARCHIVE = "/DCP-Bench/DCP-Bench-Open/archive/v3.zip"


def _crc_damaged() -> bytes:
    data = bytearray(_dcp_archive(stored=True))
    at = data.index(b"Category")  # inside a stored (uncompressed) model file
    data[at] ^= 0x20
    return bytes(data)


def _unsafe() -> bytes:
    return _zip({"DCP-Bench-Open-v3/dataset/../../escaped.txt": b"x", "DCP-Bench-Open-v3/LICENSE": b"l"})


FAILURES = {
    "404": (None, [], "HTTP 404"),
    "cut short": ((200, "good", True), [], "cut short"),
    "another hash": ((200, "good", False), ["--sha256", "0" * 64], "differs from the published"),
    "not a zip": ((200, b"<html>rate limited</html>", False), [], "not a readable zip archive"),
    "a damaged zip": ((200, "crc", False), [], "fails its CRC check"),
    "the wrong layout": ((200, _zip({"x-v3/README.md": b"hi", "x-v3/LICENSE": b"l"}), False), [],
                         "not the DCP-Bench-Open layout"),
    "an unsafe path": ((200, "unsafe", False), [], "unsafe path"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_a_failed_fetch_says_why_in_one_line_and_leaves_nothing(server, home, capsys, tmp_path, case):
    base, h = server
    route, extra, message = FAILURES[case]
    if route is not None:
        status, body, cut = route
        body = {"good": _dcp_archive, "crc": _crc_damaged, "unsafe": _unsafe}.get(body, lambda: body)()
        h.routes[ARCHIVE] = (status, body, cut)
    code, out, err = triforge(capsys, "data", "fetch", "dcp-bench-open", "--ref", "v3", "--mirror", base, *extra)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in err, err
    assert h.seen == [ARCHIVE]
    assert _everything(home) == []  # no set, no temporary folder, no partial archive
    assert not (tmp_path / "escaped.txt").exists() and not (home.parent / "escaped.txt").exists()
    code, out, _ = triforge(capsys, "data", "list", "--json")
    assert code == 0 and "dcp-bench-open@v3" not in out


@pytest.mark.parametrize("args, message", [
    (["hotpotqa-hard-500"], "cannot be fetched"),
    (["dcp-bench-open", "--ref", "../x"], "--ref"),
    (["dcp-bench-open@v2"], "without a ref"),
    (["ifbench", "--sha256", "abc"], "64 hex digits"),
])
def test_bad_requests_are_refused_before_any_download(server, home, capsys, args, message):
    base, h = server
    code, _, err = triforge(capsys, "data", "fetch", *args, "--mirror", base)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert h.seen == [] and _everything(home) == []


def test_an_archive_hash_that_matches_is_accepted(server, home, capsys):
    base, h = server
    body = _dcp_archive()
    h.routes["/DCP-Bench/DCP-Bench-Open/archive/v2.zip"] = (200, body, False)
    code, _, err = triforge(capsys, "data", "fetch", "dcp-bench-open", "--ref", "v2", "--mirror", base,
                            "--sha256", sha256_bytes(body).upper())
    assert code == 0, err
    assert json.loads((home / "dcp-bench-open@v2" / "manifest.json").read_text())["archive_sha256"] == \
        sha256_bytes(body)


def test_a_folder_with_a_broken_manifest_is_named_by_verify_and_blocks_nothing_else(home, capsys):
    (home / "junk@x").mkdir(parents=True)
    (home / "junk@x" / "manifest.json").write_text("{not json")
    (home / ".dcp-bench-open@v9.abc.partial").mkdir()  # what a killed fetch leaves: hidden, ignored
    code, out, _ = triforge(capsys, "data", "list", "--json")
    assert code == 0 and {json.loads(x)["name"] for x in out.splitlines()} == {
        "dcp-bench-open", "hotpotqa-hard-500", "hotpotqa-mini", "ifbench"}
    assert len(load_dataset()) == 101
    code, out, _ = triforge(capsys, "data", "verify")
    assert code == 1 and "FAILED" in out and "junk@x" in out and ".partial" not in out
    assert out.count("ok  ") == 4
