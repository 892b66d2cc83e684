"""The options of ``torchstream report`` (argument definitions only; :mod:`torchstream.cli.report`
runs the command)."""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``torchstream report`` to the sub-commands ``sub``."""
    p = sub.add_parser("report", help="draw a run's drift report again from its report.json",
                       description="Write report.md and the figures in RUN_DIR/report/ from "
                                   "RUN_DIR/report.json (written by `torchstream run --report`) "
                                   "and print each report's summary.")
    p.add_argument("run_dir", help="the run directory (run's --logdir)")
    return p
