"""A line on standard error every few seconds while long work runs silently (a reproduction,
a first compile): the user sees that it is alive and how long it has taken."""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["Heartbeat"]


class Heartbeat:
    """Context manager: prints ``"<what>: still running (<s> s)"`` to ``stream`` every
    ``every`` seconds until the block ends (nothing for a block shorter than ``every``).

    >>> import io
    >>> out = io.StringIO()
    >>> with Heartbeat("demo", every=0.05, stream=out):
    ...     time.sleep(0.12)
    >>> out.getvalue().splitlines()[0]
    'demo: still running (0 s)'
    """

    def __init__(self, what: str, *, every: float = 15.0, stream: TextIO | None = None) -> None:
        if every <= 0:
            raise ValueError(f"every must be > 0 seconds, got {every!r}")
        self.what = what
        self.every = every
        self.stream = stream
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._began = 0.0

    def _beat(self) -> None:
        out = self.stream or sys.stderr
        while not self._done.wait(self.every):
            print(f"{self.what}: still running ({time.perf_counter() - self._began:.0f} s)",
                  file=out, flush=True)

    def __enter__(self) -> Heartbeat:
        self._began = time.perf_counter()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
