"""``torchstream reproduce NAME``: rebuild a paper's result and print ours next to the paper's.

A reproduction is a script ``scripts/reproduce_<name>.py`` with a function
``reproduce(quick: bool) -> list[Comparison]`` (and a ``main()`` for running it directly). The
command runs it, prints the comparison table and writes a markdown report (``--out``). In
``--quick`` mode each runs in a minute or two on a CPU; every comparison carries the tolerance
within which the quick number must agree with the paper's, with the reason, and the test suite
checks it.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["Comparison", "available", "load", "missing_data", "report", "run"]

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


@dataclass(frozen=True)
class Comparison:
    """One number of a reproduction: ours, the paper's, and the accepted difference.

    ``tolerance`` is an absolute bound on ``|ours - paper|`` in quick mode (None: reported
    only, e.g. a number whose setting differs from the paper's); ``why`` justifies it.
    """

    measure: str
    ours: float
    paper: float
    tolerance: float | None = None
    why: str = ""

    @property
    def within(self) -> bool | None:
        if self.tolerance is None:
            return None
        return bool(math.isfinite(self.ours) and abs(self.ours - self.paper) <= self.tolerance)


def available() -> list[str]:
    """The names of the reproductions (``scripts/reproduce_<name>.py`` with ``reproduce``)."""
    if not SCRIPTS.is_dir():
        return []
    names = []
    for path in sorted(SCRIPTS.glob("reproduce_*.py")):
        if "def reproduce(" in path.read_text():
            names.append(path.stem.removeprefix("reproduce_"))
    return names


def load(name: str) -> ModuleType:
    """Import ``scripts/reproduce_<name>.py``."""
    path = SCRIPTS / f"reproduce_{name}.py"
    if name not in available():
        known = ", ".join(available()) or "none (the scripts/ folder is not next to the package)"
        raise ValueError(f"unknown reproduction {name!r}; known: {known}")
    spec = importlib.util.spec_from_file_location(f"_reproduce_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def missing_data(name: str) -> list[str]:
    """The shared data files (``DATA`` of the script) that are not on this machine."""
    from torchstream.streams import data_path

    return [f for f in getattr(load(name), "DATA", ()) if not data_path(f).exists()]


def run(name: str, *, quick: bool) -> tuple[list[Comparison], float]:
    """Run one reproduction; returns its comparisons and the wall time in seconds."""
    module = load(name)
    missing = missing_data(name)
    if missing:
        raise ValueError(f"reproduction {name!r} needs the data files {missing} "
                         "(in $TORCHSTREAM_DATA or ../shared/data)")
    t0 = time.perf_counter()
    rows = list(module.reproduce(quick=quick))
    return rows, time.perf_counter() - t0


def table(rows: list[Comparison]) -> str:
    """A markdown table of the comparisons."""
    lines = ["| measure | torchstream | paper | tolerance | within |", "|---|---|---|---|---|"]
    for r in rows:
        tol = "—" if r.tolerance is None else f"±{r.tolerance:g}"
        ok = {True: "yes", False: "**no**", None: "—"}[r.within]
        lines.append(f"| {r.measure} | {r.ours:.4f} | {r.paper:.4f} | {tol} | {ok} |")
    notes = [f"- {r.measure}: {r.why}" for r in rows if r.why]
    return "\n".join(lines + ([""] + notes if notes else []))


def report(name: str, rows: list[Comparison], seconds: float, quick: bool) -> str:
    module = load(name)
    doc = (module.__doc__ or "").strip()
    mode = "--quick" if quick else "full"
    return (f"# Reproduction: {name}\n\n{doc}\n\nCommand: `torchstream reproduce {name}"
            f"{' --quick' if quick else ''}` ({mode} mode, {seconds:.0f} s)\n\n{table(rows)}\n")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("reproduce", help="rebuild a paper's result next to the published number")
    p.add_argument("name", help="a reproduction name, or 'all' (see --list)")
    p.add_argument("--quick", action="store_true", help="a short run (a minute or two on a CPU)")
    p.add_argument("--out", help="directory of the markdown reports (default runs/reproduce)")


def reproduce_command(args: argparse.Namespace) -> int:
    names = available() if args.name == "all" else [args.name]
    out = Path(args.out or Path("runs") / "reproduce")
    failed = 0
    for name in names:
        try:
            rows, seconds = run(name, quick=args.quick)
        except ValueError as e:
            raise SystemExit(f"error: {e}") from None
        text = report(name, rows, seconds, args.quick)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{name}{'-quick' if args.quick else ''}.md"
        path.write_text(text)
        print(f"== {name} ({seconds:.0f} s) ==\n{table(rows)}\nreport: {path}\n")
        failed += sum(r.within is False for r in rows)
    return 1 if failed else 0
