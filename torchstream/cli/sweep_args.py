"""The options of ``torchstream sweep`` (argument definitions only; :mod:`torchstream.cli.sweep`
runs the command)."""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``torchstream sweep`` to the sub-commands ``sub``."""
    p = sub.add_parser("sweep", help="run a grid of `torchstream run` jobs from a TOML config")
    p.add_argument("config", help="sweep config (TOML)")
    p.add_argument("--executor", choices=["local", "ray"],
                   help="override the config's executor")
    p.add_argument("--workers", type=int, help="override the config's number of workers")
    p.add_argument("--out", help="override the config's output directory")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing results.csv in the output directory that is not "
                        "a sweep's results table (an input is never replaced)")
