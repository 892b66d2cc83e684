"""The command line: ``torchstream run | evaluate | sweep | reproduce | report | list``.

``run`` trains one model prequentially on a stream, explains it and logs to TensorBoard
(:mod:`~torchstream.cli.run`); ``evaluate`` compares predictors and drift detectors
(:mod:`~torchstream.cli.evaluate`); ``sweep`` runs a grid of ``run`` jobs
(:mod:`~torchstream.cli.sweep`); ``reproduce`` rebuilds a paper's result
(:mod:`~torchstream.cli.reproduce`); ``report`` draws a run's drift report again
(:mod:`~torchstream.cli.report`); ``list`` names the streams, model specs, learners and
reproductions (:mod:`~torchstream.cli.listing`).

The parser is built from the commands' argument modules, which import nothing heavy; a
command's module (and with it torch, river, matplotlib or TensorBoard) is imported only when
that command runs (:data:`COMMANDS`), so ``torchstream --help`` starts at once.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names
from torchstream.cli.errors import CommandError, guarded
from torchstream.cli.interrupt import terminate_raises
from torchstream.cli.parser import build_parser

if TYPE_CHECKING:
    from torchstream.cli.stream_options import make_stream

__all__ = ["COMMANDS", "CommandError", "build_parser", "main", "make_stream"]

#: Each command's module and function, imported when the command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("torchstream.cli.run", "run_command"),
    "evaluate": ("torchstream.cli.evaluate", "evaluate"),
    "sweep": ("torchstream.cli.sweep", "sweep_command"),
    "reproduce": ("torchstream.cli.reproduce", "reproduce_command"),
    "report": ("torchstream.cli.report", "report_command"),
    "list": ("torchstream.cli.listing", "list_command"),
}

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.cli.stream_options": ("make_stream",),
})


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; errors are one line on stderr and exit status 2 (argparse's convention),
    never a traceback (set ``TORCHSTREAM_DEBUG=1`` to see one); SIGINT / SIGTERM one line and
    exit status 130 / 143."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unknown_options(parser, args, unknown)
    with terminate_raises():  # SIGTERM: one line and exit 143, like Ctrl-C's 130
        return guarded(_dispatch, args)


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     unknown: list[str]) -> None:
    """Exit 2 with the command's own usage, naming each unknown argument and the closest
    known option (``--steam`` -> ``--stream``)."""
    command = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            command = action.choices.get(args.command, parser)
    known = [s for a in command._actions for s in a.option_strings]
    hints = []
    for arg in unknown:
        close = difflib.get_close_matches(arg.split("=")[0], known, n=1, cutoff=0.6)
        hints.append(f"{arg} (did you mean {close[0]}?)" if close else arg)
    command.error("unrecognized arguments: " + ", ".join(hints))


def _dispatch(args: argparse.Namespace) -> int:
    module, name = COMMANDS[args.command]
    command: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
    return command(args)
