"""How many CPU threads torch uses: one policy for the library and the command line.

torch splits each CPU operation over a pool of threads, by default one per physical core. An
online learner's steps are small (one row, or a small batch, through a small network): split
over threads, each operation spends longer waiting for the other threads than it saves. Hence
the policy, :func:`use_threads`:

* ``use_threads(n)`` (the command line's ``--threads``, default 1): torch uses ``n`` threads,
  and the policy never changes that count again;
* ``use_threads()`` (called by every :class:`~torchstream.learners.OnlineLearner` when it is
  built or unpickled): one thread, unless the process has chosen a count already
  (``use_threads(n)``, ``torch.set_num_threads(n)`` with ``n`` other than torch's count at
  import, or the ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS`` variables); applied at most once per
  process, and stated once (a :class:`ThreadsNotice`) when it changes torch's count.

The count is process-wide: torch has one pool of intra-op threads.

>>> use_threads(1)
1
>>> torch.get_num_threads()
1
"""

from __future__ import annotations

import os
import warnings

import torch

__all__ = ["ONLINE_THREADS", "ThreadsNotice", "use_threads"]

ONLINE_THREADS = 1
"""The thread count of the policy."""

_ENV_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


class ThreadsNotice(UserWarning):
    """The policy changed torch's CPU thread count (said once per process)."""


class _State:
    """torch's count when this module was imported, and whether a count is settled: chosen
    through :func:`use_threads` or already set by the policy."""

    initial = torch.get_num_threads()
    settled = False


def use_threads(threads: int | None = None) -> int:
    """Set torch's CPU thread count by the package's policy (module docstring); returns the
    count in use.

    Parameters
    ----------
    threads
        A count: torch uses exactly that many threads from now on (process-wide), and later
        ``use_threads()`` calls keep it. ``None``: :data:`ONLINE_THREADS`, unless a count was
        chosen already; a change of torch's count is stated once (:class:`ThreadsNotice`).
    """
    if threads is not None:
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be a positive integer, got {threads!r}")
        torch.set_num_threads(threads)
        _State.settled = True
        return threads
    current = torch.get_num_threads()
    chosen = current != _State.initial or any(os.environ.get(v) for v in _ENV_VARIABLES)
    if _State.settled or chosen or current == ONLINE_THREADS:
        _State.settled = True
        return current
    torch.set_num_threads(ONLINE_THREADS)
    _State.settled = True
    warnings.warn(
        f"torch now runs on {ONLINE_THREADS} CPU thread (it had {current}): an online "
        f"learner's steps are small, and more threads only add waiting (the README's example "
        f"runs faster on one thread, by far when other work shares the cores). For another "
        f"count call torchstream.learners.use_threads(n) before building the learner",
        ThreadsNotice,
        stacklevel=3,
    )
    return ONLINE_THREADS
