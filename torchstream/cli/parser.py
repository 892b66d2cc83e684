"""The ``torchstream`` argument parser: every command and its options."""

from __future__ import annotations

import argparse

from torchstream.cli import evaluate, report, reproduce, run, sweep

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``torchstream run | evaluate | sweep | reproduce | report | list``."""
    parser = argparse.ArgumentParser(
        prog="torchstream", description="Explainable online learning on data streams."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run.add_parser(sub)
    evaluate.add_parser(sub)
    sweep.add_parser(sub)
    reproduce.add_parser(sub)
    report.add_parser(sub)
    sub.add_parser("list", help="list the built-in streams, model specs and other learners")
    return parser
