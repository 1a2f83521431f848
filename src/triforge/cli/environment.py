"""The TRIFORGE_* environment variables the CLI reads, checked once before a command runs.

A bad value is one line naming the variable and what it takes (exit 2), never a traceback from deep
inside a run. `--help` and `--version` read no setting, so they work whatever the environment holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from triforge.core.errors import UserError


def _choice(*allowed: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value.strip().lower() in (*allowed, ""):
            return None
        return f"use {' or '.join(allowed)}"
    return check


def _number(kind: type, minimum: float) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            ok = kind(value.strip()) >= minimum
        except ValueError:
            ok = False
        noun = "a whole number" if kind is int else "a number"
        return None if ok else f"give {noun} of at least {minimum:g}, or unset it"
    return check


def _url(value: str) -> str | None:
    from triforge.core.config import check_base_url

    if not value.strip():  # empty counts as unset
        return None
    try:
        check_base_url(value, "")
    except UserError:
        return "give http(s)://HOST[:PORT]/v1, e.g. http://localhost:8000/v1"
    return None


# Variables with a fixed form: name -> a check returning what is wrong (None when the value is fine).
CHECKS: dict[str, Callable[[str], str | None]] = {
    "TRIFORGE_ISOLATION": _choice("auto", "none"),
    "TRIFORGE_LOCAL_TOOLS": _choice("text", "native"),
    "TRIFORGE_LOCAL_TIMEOUT": _number(float, 1),
    "TRIFORGE_LOCAL_MAX_TOKENS": _number(int, 1),
    "TRIFORGE_LOCAL_THREADS": _number(int, 1),
    "TRIFORGE_LOCAL_CTX": _number(int, 256),
    "TRIFORGE_CPBENCH_WORKERS": _number(int, 0),
    "TRIFORGE_CPBENCH_WARM": _choice("0", "1"),
    "TRIFORGE_BASE_URL": _url,
    "TRIFORGE_DATA_URL": _url,
    "TRIFORGE_FORKSERVER": _choice("0", "1"),
    "TRIFORGE_FORKSERVER_IDLE_S": _number(float, 0),
    "TRIFORGE_TMP_MB": _number(int, 1),
}

# Names, paths and internal markers: any text is accepted here; a path that is missing is reported where
# it is used, with the same one line.
FREE_FORM = (
    "TRIFORGE_CONFIG", "TRIFORGE_HOME", "TRIFORGE_MODEL", "TRIFORGE_API_KEY_ENV", "TRIFORGE_DEBUG",
    "TRIFORGE_ASTRA_CACHE", "TRIFORGE_CPBENCH", "TRIFORGE_IFBENCH", "TRIFORGE_HOTPOTQA",
    "TRIFORGE_HOTPOTQA_CORPUS", "TRIFORGE_DATA_HOME", "TRIFORGE_RUNTIME_DIR",
    "TRIFORGE_FLASHINFER_INCLUDE",  # a folder, checked where it is used (astra compare), in one line
    "TRIFORGE_ASTRA_WORKER", "TRIFORGE_PROC_TAG",  # set by triforge itself in the processes it starts
    "TRIFORGE_TEST_WORKERS", "TRIFORGE_NO_BROWSER",  # read by scripts/test.sh, not by the CLI
    "TRIFORGE_EXTRAS", "TRIFORGE_TORCH_INDEX",  # read by scripts/setup.sh
)


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise `UserError` (one line) for the first TRIFORGE_* variable whose value cannot work."""
    env = os.environ if environ is None else environ
    for name, check in CHECKS.items():
        value = env.get(name)
        if value is None:
            continue
        problem = check(value)
        if problem:
            raise UserError(f"{name}={value!r}: {problem}")


def check_for(args: list[str]) -> None:
    """`check_environment`, unless the command line only asks for help or the version."""
    options = args[: args.index("--")] if "--" in args else args
    if options and not {"--help", "-h", "--version"} & set(options):
        check_environment()
