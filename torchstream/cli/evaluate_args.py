"""The options of ``torchstream evaluate`` (argument definitions only;
:mod:`torchstream.cli.evaluate` runs the command)."""

from __future__ import annotations

import argparse

from torchstream.cli.names import DETECTORS
from torchstream.cli.stream_args import add_stream_args

__all__ = ["add_parser"]


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> argparse.ArgumentParser:
    """Add ``torchstream evaluate`` and its options to the sub-commands ``sub``."""
    p = sub.add_parser("evaluate", help="compare predictors and drift detectors on a stream")
    add_stream_args(p)
    p.add_argument("--models", default="mlp,probit,hoeffding_tree",
                   help="comma-separated model specs or river models (see `torchstream list`)")
    p.add_argument("--strategy", choices=["prequential", "holdout", "kfold"],
                   default="prequential")
    p.add_argument("--batch-size", type=int, default=10, help="rows per step (default 10)")
    p.add_argument("--n-pretrain", type=int, default=100,
                   help="rows learned once before evaluation (default 100)")
    p.add_argument("--label-delay", type=int, nargs=2, metavar=("MIN", "MAX"),
                   help="label delay in steps, drawn per row from [MIN, MAX)")
    p.add_argument("--test-interval", type=int, default=10, help="holdout: steps between tests")
    p.add_argument("--holdout-size", type=int, help="holdout: rows (default: one batch)")
    p.add_argument("--replace-every", type=int,
                   help="holdout: every N-th row replaces the oldest holdout row")
    p.add_argument("--k", type=int, default=5, help="kfold: instances per predictor")
    p.add_argument("--mode", choices=["cross", "split", "bootstrap"], default="cross",
                   help="kfold: validation mode")
    p.add_argument("--detectors", default="none",
                   help=f"comma-separated river detectors on the first model's errors: "
                        f"{', '.join(DETECTORS)} (default none)")
    p.add_argument("--detection-window", type=int, default=1000,
                   help="rows after a known drift in which a detection counts (default 1000)")
    p.add_argument("--window", type=int, default=1000, help="rows of the windowed metrics")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--out", help="output directory (default runs/evaluate-<stream>-<time>)")
    return p
