"""On the GPU: a candidate that names a host file gets none of its content back through the lab; a compile
bomb ends in a bounded worker, not the host. (NVRTC inside the worker without the directive guard: the
CPU test in test_worker_isolation.py.)
"""

from __future__ import annotations

import json
import resource
import uuid
from pathlib import Path

import pytest

from triforge.astra.check_host import check
from triforge.astra.evaluate import EvalOptions
from triforge.astra.task import get_task
from triforge.astra.worker import Worker

pytestmark = pytest.mark.gpu
TASK = "silu_and_mul"
SECRET = "HOST-SECRET-5e2b9d"


@pytest.fixture(scope="module")
def home_secret():
    path = Path.home() / f".triforge-astra-secret-{uuid.uuid4().hex[:8]}.h"
    path.write_text(f"int {SECRET.replace('-', '_')} = 1;\n{SECRET} is not C++\n")
    path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


def _spellings(path: str) -> dict[str, str]:
    return {
        "direct": f'#include "{path}"\n',
        "angle": f"#include <{path}>\n",
        "macro": f'#define HDR "{path}"\n#include HDR\n',
        "stringized-macro": f"#define STR(x) #x\n#define HDR(x) STR(x)\n#include HDR({path})\n",
        "line-directive": f'#line 1 "{path}"\nint broken = ;\n',
        "file-macro-after-line": f'#line 1 "{path}"\nstatic const char* where = __FILE__;\nint broken = ;\n',
        "has-include": f'#if __has_include("{path}")\n#error found\n#endif\n',
        "include-next": f'#include_next "{path}"\n',
        "embed": f'static const char data[] = {{\n#embed "{path}"\n}};\n',
    }


def _host_files(home_secret: Path) -> list[tuple[str, str]]:
    out = [(str(home_secret), SECRET)]
    passwd = Path("/etc/passwd")
    if passwd.is_file():
        out.append((str(passwd), passwd.read_text().splitlines()[0]))
    return out


def test_a_candidate_naming_a_host_file_gets_none_of_it_back(gpu_worker, home_secret):
    base = get_task(TASK).baseline_source()
    for path, content in _host_files(home_secret):
        for name, spelling in _spellings(path).items():
            res = check(TASK, spelling + base, EvalOptions(timing=False), gpu_worker, timeout=300)
            assert res["verdict"] in ("compile_error", "hack"), (name, res["verdict"], res.get("reasons"))
            assert content not in json.dumps(res), (name, path)


BOMB = "__device__ int triforge_bomb[1 << 28] = {1};\n"


def test_a_compile_bomb_ends_in_the_bounded_worker_and_the_next_check_runs():
    """The worker's own compile, past the harness's precheck (which flags this spelling's file-scope
    variable and compiles it only in its own bounded process): sent to the worker as it stands."""
    from astra.conftest import HAS_CUDA

    if not HAS_CUDA:
        pytest.skip("needs an NVIDIA GPU with torch and cuda-python")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    base = get_task(TASK).baseline_source()
    with Worker(timeout=600, memory_mb=8192) as w:
        res = w.call({"kind": "evaluate", "task": TASK, "source": BOMB + base, "options": {"timing": False}},
                     timeout=600)
        assert res["verdict"] in ("crash", "compile_error"), res
        after = check(TASK, base, EvalOptions(timing=False, shapes="fuzz"), w, timeout=300)
        assert after["verdict"] == "correct", after
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 1 << 20  # KiB: under 1 GiB grew here
