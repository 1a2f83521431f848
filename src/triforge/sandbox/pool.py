"""A pool of pre-started sandbox kernels, so that a new sandbox is ready in milliseconds.

One background thread keeps `size` kernels started and handshaken; `take` hands one out and the
thread starts its replacement. Kernels are never returned: a used kernel has state, so it is killed.
"""

from __future__ import annotations

import queue
import shutil
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from triforge.confine.limits import SandboxLimits
from triforge.sandbox.kernel_process import KernelProcess, SandboxError
from triforge.sandbox.kernel_sandbox import KernelSandbox


class KernelPool:
    """Keeps `size` kernels with one `SandboxLimits` started; thread-safe."""

    def __init__(self, size: int = 2, limits: SandboxLimits | None = None) -> None:
        self.size = max(size, 1)
        limits = limits or SandboxLimits()
        self.limits = replace(limits, env=tuple(sorted(limits.env)))
        self._ready: queue.Queue[KernelProcess] = queue.Queue()
        self._wanted = threading.Event()
        self._closed = False
        self._last_error: BaseException | None = None
        self._wanted.set()
        self._thread = threading.Thread(target=self._fill, name="triforge-kernel-pool", daemon=True)
        self._thread.start()

    def _fill(self) -> None:
        failures = 0
        while not self._closed:
            self._wanted.wait()
            self._wanted.clear()
            while not self._closed and self._ready.qsize() < self.size:
                workdir = Path(tempfile.mkdtemp(prefix="triforge-sandbox-"))
                kernel = None
                try:
                    kernel = KernelProcess(self.limits, workdir)
                    kernel.warm_up()  # the first cells of a kernel are slower: pay for them here
                except Exception as exc:  # keep the error for `take`, back off, try again
                    if kernel is not None:
                        kernel.kill()
                    shutil.rmtree(workdir, ignore_errors=True)
                    self._last_error = exc
                    failures += 1
                    time.sleep(min(0.1 * 2**failures, 5.0))
                    continue
                failures = 0
                if self._closed:
                    kernel.kill()
                    shutil.rmtree(workdir, ignore_errors=True)
                    return
                self._ready.put(kernel)

    @property
    def ready_count(self) -> int:
        """Kernels started and waiting to be handed out."""
        return self._ready.qsize()

    def take(self, timeout: float = 60.0) -> KernelProcess:
        """A started kernel (its working directory is `kernel.cwd`); its replacement starts at once."""
        if self._closed:
            raise SandboxError("the kernel pool is closed")
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            try:
                kernel = self._ready.get(timeout=max(left, 0.001))
            except queue.Empty:
                detail = f": {self._last_error}" if self._last_error else ""
                raise SandboxError(f"no kernel ready within {timeout:g} s{detail}") from None
            finally:
                self._wanted.set()
            if kernel.alive():
                return kernel
            kernel.kill()
            shutil.rmtree(kernel.cwd, ignore_errors=True)

    def sandbox(self, workdir: str | Path | None = None, **options: Any) -> KernelSandbox:
        """A `KernelSandbox` on a pooled kernel; `options` are KernelSandbox's non-limit keywords."""
        lim = self.limits
        return KernelSandbox(
            workdir,
            memory_mb=lim.memory_mb,
            cpu_seconds=lim.cpu_seconds,
            max_processes=lim.max_processes,
            max_file_mb=lim.max_file_mb,
            folder_mb=lim.folder_mb,
            network=lim.network,
            env=dict(lim.env),
            isolation=lim.isolation,
            pool=self,
            **options,
        )

    def close(self) -> None:
        self._closed = True
        self._wanted.set()
        self._thread.join(timeout=120)
        while True:
            try:
                kernel = self._ready.get_nowait()
            except queue.Empty:
                break
            kernel.kill()
            shutil.rmtree(kernel.cwd, ignore_errors=True)

    def __enter__(self) -> KernelPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
