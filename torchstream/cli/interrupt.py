"""Ctrl-C (SIGINT) and SIGTERM on the command line.

Outside a run's steps, SIGTERM raises :class:`~torchstream.cli.errors.CommandInterrupted` like
Ctrl-C raises ``KeyboardInterrupt`` (:func:`terminate_raises`): one line, exit 143 / 130. While a
run steps, :class:`StopRequest` turns the first SIGINT or SIGTERM into a request that the run
ends after the step in progress, so that its checkpoint is written at a step boundary and a
resume continues exactly; a second signal stops at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType, TracebackType

from torchstream.cli.errors import CommandInterrupted, signal_name

__all__ = ["StopRequest", "stopped_line", "terminate_raises"]

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise CommandInterrupted(signum, f"terminated by {signal_name(signum)}; nothing more was "
                                     "written")


@contextmanager
def terminate_raises() -> Iterator[None]:
    """While active (in the main thread), SIGTERM raises :class:`CommandInterrupted` (exit
    143) instead of ending the process without a word; the former handler comes back after."""
    if not _in_main_thread():
        yield
        return
    former = signal.signal(signal.SIGTERM, _terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if former is None else former)


class StopRequest:
    """While active (in the main thread), the first SIGINT or SIGTERM is recorded in
    :attr:`signum` and nothing else happens; calling the object answers whether one came (the
    ``stop`` callback of :meth:`~torchstream.evaluate.runner.Evaluator.run`). A second signal
    raises :class:`CommandInterrupted` at once. The former handlers come back on exit."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        #: The first signal received, or None.
        self.signum: int | None = None
        self._former: dict[int, Handler] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            return
        raise CommandInterrupted(signum, f"{signal_name(signum)} after {signal_name(self.signum)}"
                                         ": stopped at once, in the middle of a step; no "
                                         "checkpoint was written for this point")

    def __call__(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> StopRequest:
        if _in_main_thread():
            for s in self.SIGNALS:
                self._former[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        for s, former in self._former.items():
            signal.signal(s, signal.SIG_DFL if former is None else former)
        self._former = {}


def stopped_line(signum: int, row: int, total: int | None, checkpoint: str | None,
                 finished: bool) -> str:
    """The one line of a run stopped by ``signum`` after ``row`` rows: where it was, the
    checkpoint written and how to go on.

    >>> stopped_line(2, 1240, 3000, "c.pt", False)
    'interrupted by SIGINT after row 1,240 of 3,000: checkpoint written to c.pt; to go on, run the same command with --resume c.pt'
    >>> stopped_line(15, 80, None, None, False)
    'terminated by SIGTERM after row 80: no checkpoint was asked for (--checkpoint PATH), so the run cannot be resumed'
    """
    verb = "interrupted" if signum == signal.SIGINT else "terminated"
    where = f"{verb} by {signal_name(signum)} after row {row:,}"
    if total is not None:
        where += f" of {total:,}"
    if finished:
        return where + (f": the run had reached its end; checkpoint written to {checkpoint}"
                        if checkpoint else ": the run had reached its end") \
            + " (the summary and --result-json were not written)"
    if checkpoint is None:
        return where + (": no checkpoint was asked for (--checkpoint PATH), so the run cannot "
                        "be resumed")
    return (where + f": checkpoint written to {checkpoint}; to go on, run the same command "
            f"with --resume {checkpoint}")
