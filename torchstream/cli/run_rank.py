"""What each worker of ``torchstream run --workers N`` runs (:mod:`torchstream.cli.run_workers`
starts them): ``torchstream run`` itself (:func:`torchstream.cli.run.run_command`), with a
worker's runner (:func:`worker_runner`) in place of the single process's.

Every worker builds the same stream, model and explainers from the same options and steps
through the same global batches. Worker 0 is the run as one process would see it: it prints,
writes the run directory, the checkpoint and ``--result-json``, and runs every plug-in. The
other workers run only iPFI and iSAGE (their own rows of each batch, combined every step),
print nothing, and keep their run directory and checkpoint in a temporary folder that is
removed at their end (their checkpoint is never written: worker 0's holds every worker's
part).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
from contextlib import ExitStack, redirect_stdout
from functools import partial
from pathlib import Path
from typing import Any

from torchstream.cli.errors import CommandInterrupted
from torchstream.cli.run import run_command
from torchstream.cli.run_workers import Outcome
from torchstream.distributed.data_parallel import ParallelPrequential
from torchstream.distributed.exchange import Exchange
from torchstream.distributed.sharded import ShardedLearner, join_explainer
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.learners.online import OnlineLearner
from torchstream.streams.base import Stream

__all__ = ["run_rank", "worker_runner"]


def run_rank(exchange: Exchange, args: argparse.Namespace, capture: bool = False
             ) -> Outcome | None:
    """One worker's ``torchstream run``: worker 0's :class:`Outcome`, None on the others.
    ``capture``: worker 0's printed lines come back in the outcome (``printed``) instead of
    going to its own standard output (a Ray actor's, which the caller does not see)."""
    lead = exchange.rank == 0
    printed = io.StringIO()
    with ExitStack() as stack:
        if lead:
            if capture:
                stack.enter_context(redirect_stdout(printed))
            elif hasattr(sys.stdout, "reconfigure"):  # each line as it comes, as the parent's
                sys.stdout.reconfigure(line_buffering=True)
            print(workers_line(exchange, args.batch_size))
        else:
            scratch = Path(stack.enter_context(
                tempfile.TemporaryDirectory(prefix=f"torchstream-worker-{exchange.rank}-")))
            stack.enter_context(redirect_stdout(
                stack.enter_context(open(os.devnull, "w", encoding="utf-8"))))
        try:
            code = run_command(worker_args(args, exchange.rank, None if lead else scratch),
                               make_runner=partial(worker_runner, exchange))
        except CommandInterrupted as e:
            return Outcome(e.code if isinstance(e.code, int) else 1, e.signum, e.message,
                           printed.getvalue()) if lead else None
    return Outcome(code, printed=printed.getvalue()) if lead else None


def workers_line(exchange: Exchange, batch_size: int) -> str:
    """The printed line that says how the run is split."""
    n = exchange.workers
    pids = ", ".join(str(p) for p in exchange.pids)
    return (f"workers: {n} processes (pids {pids}) on the CPU (gloo), each tests, explains and "
            f"learns {batch_size} rows of every global batch of {n} x {batch_size} = "
            f"{n * batch_size} rows; one model (gradients combined every step), iPFI and iSAGE "
            "combined every step; the iPDP, interactions, detectors and drift report run on "
            "worker 0 over every row, and worker 0 writes every output")


def worker_args(args: argparse.Namespace, rank: int, scratch: Path | None
                ) -> argparse.Namespace:
    """A worker's options: the run's, on the CPU; a worker other than 0 writes its run
    directory and checkpoint to ``scratch`` and no ``--result-json``."""
    out = argparse.Namespace(**vars(args))
    out.device = "cpu"
    if rank == 0:
        return out
    assert scratch is not None
    out.logdir = str(scratch / "run")
    out.checkpoint = str(scratch / "checkpoint.pt") if args.checkpoint else None
    out.result_json = None
    out.no_progress = True
    return out


def worker_runner(exchange: Exchange, learner: object, stream: Stream, *, batch_size: int,
                  plugins: list[object], config: dict[str, Any],
                  **kwargs: Any) -> ParallelPrequential:
    """The runner ``torchstream run`` builds, for one worker: the learner as a
    :class:`~torchstream.distributed.sharded.ShardedLearner`, iPFI and iSAGE joined (each
    worker's drawing from generators of its own), and ``"workers"`` in the run's identity;
    worker 0 keeps every plug-in and the sinks, records and figures, the others only the joined
    explainers."""
    if not isinstance(learner, OnlineLearner):
        raise SystemExit(f"error: --workers trains a torch model (a model spec); this learner "
                         f"is a {type(learner).__name__}, whose steps cannot be combined")
    sharded = ShardedLearner(learner, exchange)
    joined = [join_explainer(p, exchange, reseed=True) for p in plugins
              if isinstance(p, (IncrementalPFI, IncrementalSAGE))]
    if exchange.rank > 0:
        plugins = list(joined)
        kwargs.update(records_path=None, record_steps=False, figure_every=None, progress=False)
    return ParallelPrequential(sharded, stream, batch_size=batch_size, plugins=plugins,
                               config={**config, "workers": exchange.workers}, **kwargs)
