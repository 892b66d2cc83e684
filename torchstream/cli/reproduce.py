"""``torchstream reproduce NAME``: rebuild a paper's result and print ours next to the paper's.

The command runs :func:`torchstream.reproductions.run` (the same run from Python), prints the
comparison table and writes a markdown report (``--out``). In ``--quick`` mode each runs in a
minute or two on a CPU; every comparison carries the tolerance within which the quick number
must agree with the paper's, with the reason, and the test suite checks it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from torchstream.cli.heartbeat import Heartbeat
from torchstream.reproductions import Comparison, available, load, run, table

__all__ = ["report", "reproduce_command"]


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
                t0 = time.perf_counter()
                rows = run(name, quick=args.quick)
                seconds = time.perf_counter() - t0
        except ValueError as e:
            raise SystemExit(f"error: {e}") from None
        text = report(name, rows, seconds, args.quick)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{name}{'-quick' if args.quick else ''}.md"
        path.write_text(text)
        print(f"== {name} ({seconds:.0f} s) ==\n{table(rows)}\nreport: {path}\n")
        failed += sum(r.within is False for r in rows)
    return 1 if failed else 0
