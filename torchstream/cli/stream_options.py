"""The stream that the options of :mod:`torchstream.cli.stream_args` name: a synthetic
stream, a CSV file or a river data set."""

from __future__ import annotations

import argparse
from pathlib import Path

from river import datasets as river_datasets

from torchstream import streams
from torchstream.streams.base import Stream
from torchstream.streams.csv_reader import MISSING_TOKENS, read_header

__all__ = ["make_stream"]

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
