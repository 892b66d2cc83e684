"""How a command fails: a one-line message on stderr and exit status 2 (argparse's
convention), never a traceback (``TORCHSTREAM_DEBUG=1`` shows one); a command stopped by SIGINT
(Ctrl-C) or SIGTERM says so in one line and exits 130 / 143 (128 + the signal's number, the
shells' convention)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable

__all__ = ["CommandError", "CommandInterrupted", "guarded", "signal_name"]


class CommandError(SystemExit):
    """A usage or data error: its one-line message went to stderr; the exit status is 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


class CommandInterrupted(SystemExit):
    """A command stopped by a signal: its one-line message goes to stderr; the exit status is
    128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int, message: str) -> None:
        super().__init__(128 + signum)
        self.signum = signum
        self.message = message
        self.said = False  # printed already (by an inner command, e.g. a sweep's run)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[CommandInterrupted], tuple[int, str], dict[str, bool]]:
        # from a sweep's worker process, which printed it already
        return CommandInterrupted, (self.signum, self.message), {"said": self.said}


def signal_name(signum: int) -> str:
    """``SIGINT``, ``SIGTERM``, ... (the number when the signal has no name)."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``command(args)``; a ``SystemExit("error: ...")``, ``ValueError`` or ``OSError`` becomes
    its message on stderr and a :class:`CommandError`; a ``KeyboardInterrupt`` (Ctrl-C outside
    a run's steps) or a :class:`CommandInterrupted` its one line and exit status 130 / 143."""
    try:
        return command(args)
    except CommandError:
        raise
    except CommandInterrupted as e:
        if not e.said:
            print(e.message, file=sys.stderr)
            e.said = True
        raise
    except KeyboardInterrupt:
        if os.environ.get("TORCHSTREAM_DEBUG"):
            raise
        stopped = CommandInterrupted(signal.SIGINT, "interrupted by SIGINT (Ctrl-C); nothing "
                                     "more was written")
        print(stopped.message, file=sys.stderr)
        stopped.said = True
        raise stopped from None
    except SystemExit as e:
        if not isinstance(e.code, str):
            raise
        message = e.code
    except (ValueError, OSError) as e:  # bad data, divergence, checkpoints, files
        if os.environ.get("TORCHSTREAM_DEBUG"):
            raise
        text = " ".join(str(e).split()) or type(e).__name__
        message = f"error: {text}"
    print(message, file=sys.stderr)
    raise CommandError(message) from None
