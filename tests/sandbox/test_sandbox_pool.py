"""KernelPool: kernels are started ahead of time, handed out once, replaced, and cleaned up."""

from __future__ import annotations

import shutil

import psutil
import pytest

from sandbox_support import live_descendants, wait_until
from triforge.core.errors import UserError
from triforge.sandbox.kernel_sandbox import KernelSandbox, SandboxLimits
from triforge.sandbox.pool import KernelPool


def test_pool_hands_out_prestarted_kernels_and_refills(tmp_path):
    before = live_descendants()
    with KernelPool(size=1, limits=SandboxLimits(memory_mb=2048)) as pool:
        first = pool.take()
        assert first.alive() and psutil.pid_exists(first.kernel_pid)
        first.kill()
        shutil.rmtree(first.cwd)  # whoever takes a raw kernel owns its working directory
        with pool.sandbox() as sb:
            r = sb.execute("import os\nx = 1\nos.getcwd()")
            assert r.ok and r.result == repr(str(sb.workdir))
            assert sb.execute("_w").error.name == "NameError", "the pool's warm-up left state behind"
            assert sb.isolation.rlimits["RLIMIT_AS"] == 2048 << 20
            sb.execute("while True: pass", timeout=0.5)  # interrupted, state kept
            dead = sb.execute("import os\nos._exit(3)")
            assert dead.restarted
            assert sb.execute("import os\nos.getcwd()").result == repr(str(sb.workdir)), "restart kept the workdir"
        with pool.sandbox(tmp_path / "given") as sb2:
            sb2.execute("open('f.txt', 'w').write('x')")
            assert (tmp_path / "given" / "f.txt").exists()
        # the pool refills in the background
        assert wait_until(lambda: pool.ready_count == 1, timeout=30)
    assert wait_until(lambda: live_descendants() <= before), "pool left processes behind"


def test_pool_rejects_a_sandbox_with_other_limits():
    with KernelPool(size=1) as pool:
        with pytest.raises(UserError):
            KernelSandbox(memory_mb=123, pool=pool)


def test_take_after_close_fails():
    pool = KernelPool(size=1)
    pool.close()
    from triforge.sandbox.kernel_sandbox import SandboxError

    with pytest.raises(SandboxError):
        pool.take(timeout=1)


def test_unconfined_pooled_kernel_enters_a_given_folder_with_no_trace_of_the_setup(tmp_path, monkeypatch):
    """With isolation off a pooled kernel serves a given folder: it changes into it with a silent setup cell,
    which leaves no output, no history and no variable behind for the first real cell."""
    from triforge.confine.isolation import IsolationPolicy

    limits = SandboxLimits(isolation=IsolationPolicy(enabled=False))
    with KernelPool(size=1, limits=limits) as pool:
        assert wait_until(lambda: pool.ready_count == 1, timeout=60)
        pid = pool._ready.queue[0].kernel_pid
        with pool.sandbox(tmp_path / "given") as sb:
            assert sb.kernel_pid == pid, "not the pooled kernel"
            r = sb.execute("import os\nprint(os.getcwd())\n[k for k in globals() if k in ('_o', '_w')]")
            assert r.ok and r.stdout == f"{tmp_path / 'given'}\n" and r.result == "[]", r
            assert sb.execute("len(In)").result == "3", "setup cells entered the history"
