"""Can CUDA start under the sandbox, and if not, which step stops it? cuInit and the device count on the
host, under a bare `unshare`, and under triforge's default isolation policy with one step left out at a time.

    python benchmarks/device_cuda_confined_probe.py [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src")]

from triforge.confine.isolation import IsolationPolicy, plan  # noqa: E402
from triforge.confine.run import scrubbed_env  # noqa: E402

PROBE = ("import ctypes; c = ctypes.CDLL('libcuda.so.1'); n = ctypes.c_int(); r = c.cuInit(0); "
         "r2 = c.cuDeviceGetCount(ctypes.byref(n)); print(f'cuInit={r} cuDeviceGetCount={r2} devices={n.value}')")
LOOK = ("ls -l /dev/nvidia* /dev/dri 2>&1 | head; grep -i -E 'modify|devicefile' /proc/driver/nvidia/params; id; "
        "grep Cap /proc/self/status; findmnt -o TARGET,OPTIONS /dev /dev/shm / 2>&1 | head")


def confined(argv: list[str], *, drop: tuple[str, ...] = (), no_flags: tuple[str, ...] = (),
             rlimits: dict | None = None, rw: tuple[str, ...] = (), uncover: tuple[str, ...] = (),
             cover: tuple[str, ...] = ()) -> str:
    with tempfile.TemporaryDirectory() as d:
        launch = plan(IsolationPolicy(), Path(d) / "spec.json", writable=[d], one_shot=True)
        spec = {**launch.spec, "cgroups": [], "rlimits": rlimits or {}, "cwd": d, "exec_argv": argv}
        fs = spec["filesystem"]
        fs["keep_rw"] = sorted({*fs["keep_rw"], *rw})
        fs["keep_ro"] = [p for p in fs["keep_ro"] if p not in rw]
        fs["cover"] = {**{c: m for c, m in fs["cover"].items() if c not in uncover}, **{c: "rw" for c in cover}}
        for key in drop:
            spec[key] = None if key in ("filesystem", "seccomp_bpf") else False
        (Path(d) / "spec.json").write_text(json.dumps(spec))
        cmd = [a for a in launch.argv if a not in no_flags]
        r = subprocess.run(cmd, cwd=d, env=scrubbed_env(d), capture_output=True, text=True, timeout=60)
        return (r.stdout + r.stderr).strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    a = ap.parse_args()
    argv = [sys.executable, "-c", PROBE]
    rows: dict[str, str] = {}
    rows["host"] = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
    rows["host look"] = subprocess.run(["sh", "-c", LOOK], capture_output=True, text=True).stdout
    rows["confined look"] = confined(["sh", "-c", LOOK])
    variants = {
        "default": {},
        "RLIMIT_DATA 8 GiB": {"rlimits": {"RLIMIT_DATA": [8 << 30, 8 << 30]}},
        "without seccomp": {"drop": ("seccomp_bpf",)},
        "without dropping capabilities": {"drop": ("drop_capabilities",)},
        "without seccomp and capability drop": {"drop": ("seccomp_bpf", "drop_capabilities")},
        "without filesystem confinement": {"drop": ("filesystem",)},
        "without --net": {"no_flags": ("--net",)},
        "without --ipc": {"no_flags": ("--ipc",)},
        "without --uts": {"no_flags": ("--uts",)},
        **{f"{p} writable": {"rw": (p,)} for p in ("/dev", "/proc", "/sys", "/run", "/var", "/etc", "/usr", "/opt")},
        "home not hidden": {"uncover": tuple(c for c in ("/root", str(Path.home())) if c != "/tmp")},
        "/dev/shm not covered": {"uncover": ("/dev/shm",)},
        "private /run": {"cover": ("/run",)},
        "namespaces only": {"drop": ("filesystem", "seccomp_bpf", "drop_capabilities", "loopback_up")},
    }
    for name, kw in variants.items():
        rows[name] = confined(argv, **kw)
    import shutil
    if shutil.which("strace"):
        rows["strace default"] = confined(["strace", "-f", "-e", "trace=%file,mknod,chmod,chown,%desc", "-Z", *argv])[-6000:]
    for k, v in rows.items():
        print(f"{k}: {v}")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
