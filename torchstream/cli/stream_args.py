"""The options that choose a stream, shared by the commands (argument definitions only;
:mod:`torchstream.cli.stream_options` builds the stream they name)."""

from __future__ import annotations

import argparse

__all__ = ["DEFAULT_STREAM", "add_stream_args"]

DEFAULT_STREAM = "agrawal-drift"


def add_stream_args(p: argparse.ArgumentParser) -> None:
    """The options that choose a stream (shared by the commands)."""
    p.add_argument("--stream", default=DEFAULT_STREAM,
                   help="a synthetic stream name (see `torchstream list`), a CSV path, or "
                        "river:<Dataset> (default: %(default)s)")
    p.add_argument("--target", help="target column of a CSV stream (default: the last column)")
    p.add_argument("--drop", nargs="*", default=[], help="CSV columns to ignore")
    p.add_argument("--categorical", nargs="*", default=[],
                   help="CSV columns to treat as categorical")
    p.add_argument("--numeric", nargs="*", default=[],
                   help="CSV columns to treat as numeric (every value must be a number)")
    p.add_argument("--missing", nargs="*", default=[],
                   help="CSV values that mean 'missing', besides '', ?, NA, N/A, NaN, nan, null, "
                        "None")
    p.add_argument("--dates", choices=["parts", "drop"], default="parts",
                   help="CSV date columns: numeric parts (year, month, day, weekday, hour, "
                        "minute) or left out (default: %(default)s)")
    p.add_argument("--encoding", default="utf-8",
                   help="text encoding of a CSV file (default: %(default)s)")
    p.add_argument("--task", choices=["classification", "regression"],
                   help="override the task inferred from the target")
    p.add_argument("--n-samples", type=int, default=10_000,
                   help="rows of a synthetic stream (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stream and the models")
