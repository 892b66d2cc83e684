"""The options that choose a stream, shared by ``run`` and ``evaluate``, and the
stream they name: a synthetic stream, a CSV file or a river data set."""

from __future__ import annotations

import argparse
from pathlib import Path

from river import datasets as river_datasets

from torchstream import streams
from torchstream.streams.base import Stream
from torchstream.streams.csv_reader import MISSING_TOKENS, read_header

__all__ = ["DEFAULT_STREAM", "add_stream_args", "make_stream"]

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


def make_stream(args: argparse.Namespace) -> Stream:
    """The stream named by ``--stream`` (synthetic name, CSV path or ``river:<Dataset>``)."""
    name: str = args.stream
    if name in streams.SYNTHETIC:
        return streams.make_synthetic(name, n_samples=args.n_samples, seed=args.seed)
    if name.startswith("river:"):
        cls = getattr(river_datasets, name.split(":", 1)[1], None)
        if cls is None:
            raise SystemExit(f"error: river has no dataset {name.split(':', 1)[1]!r}")
        try:
            return streams.from_river(cls(), task=args.task)
        except OSError as e:  # a remote data set that is not downloaded yet, while offline
            raise SystemExit(f"error: river dataset {name.split(':', 1)[1]} could not be read "
                             f"({' '.join(str(e).split())}); it may need a download, which "
                             "needs the network") from None
    path = Path(name)
    if path.suffix.lower() == ".csv" or path.exists():
        if not path.exists():
            raise SystemExit(f"error: CSV file not found: {path}")
        encoding = getattr(args, "encoding", "utf-8")
        target = args.target
        if target is None:  # the last name of the parsed header (BOM removed, quotes honoured)
            target = read_header(path, encoding=encoding)[-1]
        return streams.read_csv(path, target, drop=args.drop, categorical=args.categorical,
                                numeric=getattr(args, "numeric", []),
                                missing=(*MISSING_TOKENS, *getattr(args, "missing", [])),
                                dates=getattr(args, "dates", "parts"), encoding=encoding,
                                task=args.task)
    known = ", ".join(sorted(streams.SYNTHETIC))
    raise SystemExit(f"error: unknown stream {name!r}; use one of {known}, a CSV path or "
                     "river:<Dataset>")
