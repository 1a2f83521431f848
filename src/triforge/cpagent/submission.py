"""A submitted program: the instance's data put in, and why a run failed, said in the submission's own terms."""

from __future__ import annotations

import difflib
import re
import warnings
from importlib import metadata

from triforge.core.errors import UserError
from triforge.cpagent.cpmpy_legacy import with_legacy_names
from triforge.cpagent.data_block import put_instance
from triforge.cpagent.dataset import Problem, substitute_data

_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)', re.M)
_MISSING_ATTR = re.compile(r"AttributeError: module '(?P<mod>cpmpy[\w.]*)' has no attribute '(?P<name>\w+)'")
_MISSING_IMPORT = re.compile(r"ImportError: cannot import name '(?P<name>\w+)' from '(?P<mod>cpmpy[\w.]*)'")


def program_for(problem: Problem, source: str, instance: int) -> tuple[str | None, str]:
    """The submission with the instance's data put in (see `prepare`), or None and why it cannot be."""
    src, why, _ = prepare(problem, source, instance)
    return src, why


def prepare(problem: Problem, source: str, instance: int) -> tuple[str | None, str, list[str]]:
    """The program to run for one instance, or None and why it cannot be; and notes on how it was read.

    The instance goes into the program's `# Data` ... `# End of data` block(s); where the markers are
    missing or malformed, into the program's own assignments of the instance's names (data_block.py), the
    program unchanged where its values are the instance's. CPMpy names of older releases are restored.
    """
    src, why, notes = _with_instance(problem, source, instance)
    if src is None:
        return None, why, notes
    src, legacy = with_legacy_names(src)
    return src, why, notes + legacy


def _with_instance(problem: Problem, source: str, instance: int) -> tuple[str | None, str, list[str]]:
    if not problem.instances:
        return source, "", []
    data = problem.instances[instance]
    try:
        return substitute_data(source, data, where="the program"), "", []
    except UserError as e:
        msg = str(e)
        hows = {"no '# Data' block": "no '# Data' ... '# End of data' block",
                "no '# End of data' line": "a '# Data' line without '# End of data'",
                "data block is not valid Python": "'# Data' markers that do not enclose whole statements"}
        how = next((h for k, h in hows.items() if k in msg), "")
        if not how:
            return None, f"instance {instance}: {msg}", []
    out, changed, missing = put_instance(source, data)
    notes: list[str] = []
    if missing and instance != 0:
        return None, (f"instance {instance}: the program has {how} and assigns no {', '.join(missing)}: "
                      "nowhere to put the instance's data"), []
    if missing:
        notes.append(f"the program has {how} and assigns no {', '.join(missing)}; it ran on its own data")
    if changed:
        where = ", ".join(f"{s.name} (line {s.line})" for s in changed)
        notes.append(f"the program has {how}: the instance's values were put into its own assignments of {where}")
    return out, "", notes


def syntax_error(source: str) -> str | None:
    """'syntax error at line N: ...' when the submission as written is not valid Python."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "submission.py", "exec")
    except SyntaxError as e:
        code = (e.text or "").strip()
        where = f" at line {e.lineno}" if e.lineno else ""
        return f"syntax error{where} of the submission: {e.msg}" + (f": {code[:120]}" if code else "")
    return None


def _line_in_original(original: str, ran: str, line: int) -> int | None:
    """The submission's own line number for `line` of the program that ran (its data block may differ)."""
    if original == ran:
        return line
    sm = difflib.SequenceMatcher(a=ran.splitlines(), b=original.splitlines(), autojunk=False)
    for a, b, size in sm.get_matching_blocks():
        if a < line <= a + size:
            return b + line - a
    return None


def run_error(stderr: str, returncode: int, original: str, ran: str, program_file: str = "submission.py") -> str:
    """One line on why the program failed: the exception, the submission's line where it was raised, and,
    for a CPMpy name the installed CPMpy lacks, that it is such a name."""
    lines = stderr.strip().splitlines()
    last = lines[-1].strip() if lines else "(no stderr)"
    where = ""
    frames = [m for m in _FRAME.finditer(stderr) if m.group("file").endswith(program_file)]
    if frames:
        n = _line_in_original(original, ran, int(frames[-1].group("line")))
        where = f" at line {n} of the submission" if n else " in the instance's data block"
    if m := (_MISSING_ATTR.search(stderr) or _MISSING_IMPORT.search(stderr)):
        return (f"the program uses {m.group('mod')}.{m.group('name')}, an API the installed CPMpy "
                f"({_cpmpy_version()}) does not have{where}: {last[:200]}")
    return f"exit code {returncode}{where}: {last[:300]}"


def _cpmpy_version() -> str:
    try:
        return metadata.version("cpmpy")
    except metadata.PackageNotFoundError:
        return "version unknown"
