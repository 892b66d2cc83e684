"""How a command fails: a one-line message on stderr and exit status 2 (argparse's
convention), never a traceback (``TORCHSTREAM_DEBUG=1`` shows one)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

__all__ = ["CommandError", "guarded"]


class CommandError(SystemExit):
    """A usage or data error: its one-line message went to stderr; the exit status is 2."""

    def __init__(self, message: str) -> None:
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def guarded(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """``command(args)``; a ``SystemExit("error: ...")``, ``ValueError`` or ``OSError`` becomes
    its message on stderr and a :class:`CommandError`."""
    try:
        return command(args)
    except CommandError:
        raise
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
