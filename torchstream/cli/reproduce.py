"""``torchstream reproduce NAME``: rebuild a paper's result and print ours next to the paper's.

A reproduction is a module ``torchstream.reproductions.<name>`` with a function
``reproduce(quick: bool) -> list[Comparison]``, the shared data files it reads (``DATA``) and a
``main()`` for running it directly (``scripts/reproduce_<name>.py`` calls it). The
command runs it, prints the comparison table and writes a markdown report (``--out``). In
``--quick`` mode each runs in a minute or two on a CPU; every comparison carries the tolerance
within which the quick number must agree with the paper's, with the reason, and the test suite
checks it.
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from types import ModuleType

from torchstream.cli.heartbeat import Heartbeat
from torchstream.cli.reproduce_args import PACKAGE, available
from torchstream.reproductions._comparison import Comparison, table
from torchstream.streams import data_path

__all__ = [
    "PACKAGE",
    "Comparison",
    "available",
    "load",
    "missing_data",
    "report",
    "reproduce_command",
    "run",
    "table",
]

def load(name: str) -> ModuleType:
    """Import the reproduction ``torchstream.reproductions.<name>``; an unknown name, a module
    without ``reproduce`` or a missing optional dependency is a ``ValueError``."""
    if name not in available():
        raise ValueError(f"unknown reproduction {name!r}; known: {', '.join(available())}")
    try:
        module = importlib.import_module(f"{PACKAGE}.{name}")
    except ModuleNotFoundError as e:
        if (e.name or "torchstream").split(".")[0] == "torchstream":
            raise
        raise ValueError(f"reproduction {name!r} needs the package {e.name!r}, which is not "
                         "installed (pip install 'torchstream[reproduce]')") from None
    if not callable(getattr(module, "reproduce", None)):
        raise ValueError(f"{module.__name__} has no function reproduce(quick)")
    return module


def missing_data(name: str) -> list[str]:
    """The shared data files (``DATA`` of the reproduction) that are not on this machine."""
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



def report(name: str, rows: list[Comparison], seconds: float, quick: bool) -> str:
    """The markdown report of one reproduction: its docstring, the command and the table."""
    module = load(name)
    doc = (module.__doc__ or "").strip()
    mode = "--quick" if quick else "full"
    return (f"# Reproduction: {name}\n\n{doc}\n\nCommand: `torchstream reproduce {name}"
            f"{' --quick' if quick else ''}` ({mode} mode, {seconds:.0f} s)\n\n{table(rows)}\n")


def reproduce_command(args: argparse.Namespace) -> int:
    """Run ``torchstream reproduce``; the exit status is 1 when a number is out of tolerance."""
    names = available() if args.name == "all" else [args.name]
    out = Path(args.out or Path("runs") / "reproduce")
    failed = 0
    for name in names:
        print(f"reproduce {name}{' --quick' if args.quick else ''}: running (a minute or two "
              f"on a CPU in --quick mode, longer in full; a line every 15 s while it runs)",
              flush=True)
        try:
            with Heartbeat(f"reproduce {name}"):
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
