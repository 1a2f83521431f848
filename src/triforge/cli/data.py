"""`triforge data`: the benchmarks' data sets (bundled, or fetched from upstream), by name."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from triforge.cli.common import console
from triforge.core.errors import UserError

app = typer.Typer(help="The benchmarks' data sets: list, locate, verify, fetch newer upstream versions.",
                  no_args_is_help=True)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def _items(items: dict[str, int]) -> str:
    return ", ".join(f"{v:,} {k}" for k, v in items.items())


@app.command("list")
def list_sets(as_json: bool = typer.Option(False, "--json", help="One JSON object per set.")) -> None:
    """Every data set: bundled with triforge, then those fetched into the data folder."""
    from triforge.data import all_sets, data_home

    sets = all_sets()
    if as_json:
        for ds in sets:
            typer.echo(json.dumps({"name": ds.name, "kind": ds.kind, "version": ds.version, "licence": ds.licence,
                                   "bytes": ds.size_bytes, "items": ds.items, "bundled": ds.bundled,
                                   "path": str(ds.root)}))
        return
    rows = [(ds.name, ds.kind, ds.version, ds.licence, _size(ds.size_bytes), _items(ds.items),
             ("bundled " if ds.bundled else "fetched ") + str(ds.root)) for ds in sets]
    head = ("name", "for", "version", "licence", "size", "items", "where")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head) - 1)]
    for r in [head, *rows]:
        console.print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1],
                      highlight=False, soft_wrap=True, markup=False)
    console.print(f"fetched sets live in {data_home()} (`triforge data fetch NAME --ref REF`)", highlight=False,
                  soft_wrap=True, markup=False)


@app.command("path")
def path(name: str = typer.Argument(..., help="A data set's name."),
         role: str = typer.Option("data", "--part", help="data, or a set's other part (corpus, verdicts).")) -> None:
    """Print the path that `--data NAME` reads (a folder, a file or a zip)."""
    from triforge.data import get

    typer.echo(str(get(name).path(role, verify=False)))


@app.command("verify")
def verify(names: list[str] = typer.Argument(None, help="Sets to check (default: all), or folders holding one.")
           ) -> None:
    """Check every file of each set against the SHA-256 in its manifest; exit 1 if any differs."""
    from triforge.data import all_sets, data_home, get
    from triforge.data.manifest import MANIFEST
    from triforge.data.registry import open_set

    failed = 0
    if names:
        sets = [open_set(Path(n)) if (Path(n) / MANIFEST).is_file() else get(n) for n in names]
    else:
        sets = all_sets()
        home = data_home()
        known = {ds.root for ds in sets}
        for d in sorted(home.iterdir()) if home.is_dir() else []:
            if d.is_dir() and not d.name.startswith(".") and d not in known:
                failed += 1
                console.print(f"[red]FAILED[/] {escape(str(d))}: no readable {MANIFEST}", highlight=False,
                              soft_wrap=True)
    for ds in sets:
        assert ds is not None
        problems = ds.check()
        files = ds.manifest["files"]
        inner = sum(len(f.get("content", {})) for f in files.values())
        if problems:
            failed += 1
            console.print(f"[red]FAILED[/] {escape(ds.name)} ({escape(str(ds.root))}): {len(problems)} problem(s)",
                          highlight=False, soft_wrap=True)
            for p in problems[:20]:
                console.print(f"  - {escape(p)}", highlight=False, soft_wrap=True)
        else:
            console.print(f"ok  {escape(ds.name)}: {len(files)} files"
                          + (f" and {inner} inside them" if inner else "") + " match their SHA-256",
                          highlight=False, soft_wrap=True)
    if failed:
        raise typer.Exit(1)


@app.command("fetch")
def fetch(
    name: str = typer.Argument(..., help="dcp-bench-open or ifbench."),
    ref: str = typer.Option("main", "--ref", help="Branch, tag or commit of the upstream repository."),
    to: Path = typer.Option(None, "--to", help="Folder to put the set in (default: the data folder, as NAME@REF, "
                                                "selectable by that name)."),
    base_url: str = typer.Option(None, "--mirror", help="Download from this server instead of https://github.com "
                                                        "(or $TRIFORGE_DATA_URL)."),
    sha256: str = typer.Option(None, "--sha256", help="The archive's published SHA-256, checked before use."),
    force: bool = typer.Option(False, "--force", help="Replace a set already there."),
) -> None:
    """Download a newer upstream version (GitHub's archive at --ref), check it, and add it by name."""
    from triforge.data.fetch import fetch as do_fetch

    if "@" in name:
        raise UserError(f"give the set's name without a ref ({name.split('@')[0]}) and the ref with --ref")
    ds = do_fetch(name, ref, to=to, base_url=base_url, sha256=sha256, force=force)
    use = f"--data {ds.name}" if to is None else f"--data {ds.root}"
    console.print(f"fetched {escape(ds.name)} ({_items(ds.items)}, {_size(ds.size_bytes)}) into "
                  f"{escape(str(ds.root))}; use it with {escape(use)}", highlight=False, soft_wrap=True)
