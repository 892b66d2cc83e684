"""The ``torchstream`` argument parser: every command and its options.

It is built from the commands' argument modules (``run_args``, ``evaluate_args``, ...), which
import nothing heavy, so ``torchstream --help`` and a command's usage error cost no more than
the interpreter's start; a command's implementation is imported when it runs
(:data:`torchstream.cli.COMMANDS`).
"""

from __future__ import annotations

import argparse

from torchstream.cli import evaluate_args, report_args, reproduce_args, run_args, sweep_args

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``torchstream run | evaluate | sweep | reproduce | report | list``."""
    parser = argparse.ArgumentParser(
        prog="torchstream", description="Explainable online learning on data streams."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_args.add_parser(sub)
    evaluate_args.add_parser(sub)
    sweep_args.add_parser(sub)
    reproduce_args.add_parser(sub)
    report_args.add_parser(sub)
    sub.add_parser("list", help="list the built-in streams, model specs and other learners")
    return parser
