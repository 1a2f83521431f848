"""Run a command as an unprivileged user (default `nobody`), from root: for the tests and `.ci/run`.

The user needs a Python it may execute that sees triforge and its dependencies. The test
interpreter is used when it can; otherwise (a virtual environment whose interpreter lives under
root's home, as with pyenv) a throwaway venv is built from an interpreter of the same version the
user can run, with a .pth file pointing at this environment's packages.

    python tests/unprivileged.py [--user NAME] -- ARGS...   # runs PYTHON ARGS... as NAME
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

USER = "nobody"
_PROBE = "import triforge, ipykernel, cpmpy, pytest"


def _ids(user: str) -> tuple[int, int]:
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


def as_user(user: str, argv: list[str]) -> list[str]:
    """`argv` run as `user` (through sh, so that the user's own permissions decide what may be executed)."""
    uid, gid = _ids(user)
    return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
            "--", "sh", "-c", 'exec "$@"', "sh", *argv]


def _runs(user: str, python: str, code: str = _PROBE) -> bool:
    try:
        return subprocess.run(as_user(user, [python, "-c", code]), capture_output=True, timeout=60,
                              cwd="/").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def python_for(user: str, base: Path) -> str | None:
    """A Python `user` can run with this environment's packages; None when there is none."""
    if _runs(user, sys.executable):
        return sys.executable
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
                  shutil.which(version), f"/usr/bin/{version}", f"/usr/local/bin/{version}"]
    for exe in dict.fromkeys(c for c in candidates if c and os.path.exists(c)):
        if not _runs(user, exe, "import sys"):
            continue
        venv = base / "venv"
        shutil.rmtree(venv, ignore_errors=True)
        if subprocess.run([exe, "-m", "venv", "--without-pip", str(venv)], capture_output=True).returncode:
            continue
        [site] = list(venv.glob("lib/python*/site-packages"))
        keep = [p for p in sys.path if p and os.path.isdir(p) and not p.endswith(".zip")
                and (p.endswith("site-packages") or os.path.isdir(os.path.join(p, "triforge")))]
        (site / "triforge-parent-env.pth").write_text("\n".join(keep) + "\n")
        subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
        python = str(venv / "bin" / "python")
        if _runs(user, python):
            return python
    return None


def prepare(user: str = USER) -> tuple[str, dict[str, str], Path] | None:
    """(python, environment, scratch folder to remove) for running as `user`, with a home of its own;
    None when it cannot be done."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    try:
        uid, gid = _ids(user)
    except KeyError:
        return None
    base = Path(tempfile.mkdtemp(prefix=f"triforge-{user}-"))
    os.chmod(base, 0o755)
    python = python_for(user, base)
    if python is None:
        shutil.rmtree(base, ignore_errors=True)
        return None
    home = base / "home"
    home.mkdir()
    os.chown(home, uid, gid)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update(HOME=str(home), USER=user, PYTHONDONTWRITEBYTECODE="1")
    return python, env, base


def run(argv: list[str], user: str = USER, timeout: float | None = None, **kw) -> subprocess.CompletedProcess:
    """`python ARGV...` as `user`; raises RuntimeError when that is impossible here."""
    ready = prepare(user)
    if ready is None:
        raise RuntimeError(f"cannot run Python as {user} here")
    python, env, base = ready
    try:
        return subprocess.run(as_user(user, [python, *argv]), env=env, timeout=timeout, **kw)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    args = sys.argv[1:]
    user = USER
    if args[:1] == ["--user"]:
        user, args = args[1], args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    try:
        return run(args, user).returncode
    except RuntimeError as exc:
        print(f"unprivileged.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
