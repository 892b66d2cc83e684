"""The options of ``torchstream reproduce`` (:mod:`torchstream.cli.reproduce` runs the
command)."""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``torchstream reproduce`` to the sub-commands ``sub``."""
    p = sub.add_parser("reproduce", help="rebuild a paper's result next to the published number")
    p.add_argument("name", help="a reproduction name (`torchstream list` shows them), or 'all'")
    p.add_argument("--quick", action="store_true", help="a short run (a minute or two on a CPU)")
    p.add_argument("--out", help="directory of the markdown reports (default runs/reproduce)")
