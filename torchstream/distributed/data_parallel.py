"""One stream learned and explained by N processes: one model, one explanation.

:func:`run_data_parallel` starts ``workers`` processes joined by ``torch.distributed`` (gloo on
the CPU). Each reads the same seeded stream in global batches of ``workers * batch_size`` rows
and takes its own rows of each: the global batch split into ``workers`` contiguous parts in rank
order (``torch.tensor_split``: rank 0 the first ``batch_size`` rows, rank 1 the next, ...). Every
global batch, each worker

1. **tests** its rows with the current model (the prequential metrics, summed over the workers
   at the end: accuracy and log loss over every row, as one process counts them);
2. **explains** its rows: each explainer's per-row contributions of the batch are gathered from
   every worker (``all_gather``) and folded into its average in the global batch's row order,
   so every worker holds the same explanation; its storage of rows to draw replacements from
   receives every row of the global batch (a reservoir over the whole stream, whichever rows a
   worker is given — a stream partitioned by key does not bias it);
3. **learns** its rows: the gradient of its rows' mean loss, weighted by its share of the
   global batch's rows, is summed over the workers (one ``all_reduce`` of every gradient in one
   buffer, in an optimiser step pre-hook) before the optimiser's step, and the input scaler
   takes the statistics of the whole global batch. Every replica takes the same step: the model
   a single process trains on batches of ``workers * batch_size`` rows, up to float rounding.

What is exact and what is equal in distribution: the model's weights and the test metrics equal
those of one process at batch ``workers * batch_size`` (up to the rounding of a summed gradient);
an explainer's contributions depend on its random draws (replacement rows, permutations), which
each worker makes with its own generator, so the explanation is equal *in distribution* to one
process's (its differences within the explainers' confidence bounds).

Every worker builds its stream, learner and explainers with ``build(rank)`` (a picklable
function: the same stream and learner on every rank; explainers seeded per rank). Rank 0 returns
the run's :class:`ParallelResult`. A worker that fails or dies stops the run: the others are
stopped and the error names the worker.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import queue
import signal
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.process import BaseProcess
from typing import Any

import torch
import torch.distributed as dist

from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.learners.online import OnlineLearner
from torchstream.learners.scaling import RunningStandardizer
from torchstream.learners.threads import use_threads
from torchstream.streams.base import Stream

__all__ = ["ParallelResult", "WorkerFailed", "WorkerSetup", "cost_per_step", "run_data_parallel",
           "shard"]

Explainer = IncrementalPFI | IncrementalSAGE


@dataclass
class WorkerSetup:
    """What one worker runs: the ``stream`` (the same rows on every rank), the ``learner``
    (the same model on every rank: rank 0's weights are broadcast before the first step) and
    the ``explainers`` (built with ``model_fn`` the learner; a seed of their own per rank)."""

    stream: Stream
    learner: OnlineLearner
    explainers: Sequence[Explainer] = ()


@dataclass
class ParallelResult:
    """A data-parallel run, as rank 0 saw it: ``rows`` tested and learned, ``seconds`` of the
    loop, ``metrics`` over every row (``accuracy``, ``log_loss``), each explainer's importances
    and their half-widths (95 %), the model's parameters (``state``, on the CPU), ``workers``
    and the bytes each worker sent per step (gradients and explainer contributions)."""

    rows: int
    seconds: float
    metrics: dict[str, float]
    importances: dict[str, dict[str, float]]
    half_widths: dict[str, dict[str, float]]
    state: dict[str, torch.Tensor]
    workers: int
    bytes_per_step: dict[str, float] = field(default_factory=dict)

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


class WorkerFailed(RuntimeError):
    """A worker of a data-parallel run failed or died; the message names it."""


def shard(n: int, workers: int, rank: int) -> slice:
    """The rows of a global batch of ``n`` rows that worker ``rank`` takes: the ``rank``-th of
    ``workers`` contiguous parts whose sizes differ by at most one (``torch.tensor_split``).

    >>> [shard(8, 2, r) for r in (0, 1)], [shard(5, 2, r) for r in (0, 1)]
    ([slice(0, 4, None), slice(4, 8, None)], [slice(0, 3, None), slice(3, 5, None)])
    """
    base, extra = divmod(n, workers)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


class _Exchange:
    """The collectives of one worker's loop, and the global batch they refer to."""

    def __init__(self, rank: int, workers: int) -> None:
        self.rank, self.workers = rank, workers
        self.X: torch.Tensor | None = None  # the global batch
        self.n = 0
        self.local_n = 0
        self.bytes: dict[str, float] = {"gradients": 0.0, "contributions": 0.0}
        self.steps = 0

    def start(self, X: torch.Tensor) -> slice:
        self.X, self.n = X, X.shape[0]
        rows = shard(self.n, self.workers, self.rank)
        self.local_n = rows.stop - rows.start
        self.steps += 1
        return rows

    def sizes(self) -> list[int]:
        return [shard(self.n, self.workers, r).stop - shard(self.n, self.workers, r).start
                for r in range(self.workers)]

    def gather_rows(self, values: torch.Tensor) -> torch.Tensor:
        """Every worker's ``values [b_r, ...]`` concatenated in rank order (the global batch's
        row order)."""
        sizes = self.sizes()
        top = max(sizes)
        padded = values.new_zeros((top, *values.shape[1:]))
        padded[: values.shape[0]] = values
        parts = [torch.empty_like(padded) for _ in range(self.workers)]
        dist.all_gather(parts, padded.contiguous())
        self.bytes["contributions"] += padded.numel() * padded.element_size()
        return torch.cat([p[:s] for p, s in zip(parts, sizes)])

    def average_gradients(self, params: Sequence[torch.Tensor]) -> None:
        """Each gradient (its rows' mean) weighted by the worker's share of the rows, summed
        over the workers: the gradient of the global batch's mean loss."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]) * (self.local_n / self.n)
        dist.all_reduce(flat)
        self.bytes["gradients"] += flat.numel() * flat.element_size()
        offset = 0
        for p, g in zip(params, grads):
            size = g.numel()
            p.grad = flat[offset : offset + size].view_as(g).clone()
            offset += size


def _join_learner(learner: OnlineLearner, exchange: _Exchange) -> None:
    """Rank 0's weights to every worker, then: each optimiser step first sums the weighted
    gradients, and the input scaler learns from the global batch (the loop updates it)."""
    assert learner.module is not None and learner.optimizer is not None
    with torch.no_grad():
        for t in [*learner.module.parameters(), *learner.module.buffers()]:
            dist.broadcast(t, 0)
    params = [p for g in learner.optimizer.param_groups for p in g["params"]]
    learner.optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: exchange.average_gradients(params))
    scaler = learner.input_scaler
    if scaler is not None:  # updated by the loop with every row; the learner's own is off
        scaler.update = lambda X: None  # type: ignore[method-assign]


def _join_explainer(explainer: Explainer, exchange: _Exchange) -> None:
    """The explainer folds every worker's contributions in row order, and its storage takes
    every row of the global batch."""
    smoother = explainer.smoother
    fold = smoother.update
    smoother.update = lambda values: fold(exchange.gather_rows(values))  # type: ignore[method-assign]
    storage = explainer.storage
    for name in ("update", "_update_finite"):
        own = getattr(storage, name, None)
        if own is not None:
            setattr(storage, name, _global_rows(own, exchange))


def _global_rows(update: Callable[[torch.Tensor], None], exchange: _Exchange
                 ) -> Callable[[torch.Tensor], None]:
    def rows(X: torch.Tensor) -> None:
        assert exchange.X is not None
        update(exchange.X.to(X.device, X.dtype))
    return rows


def _loop(setup: WorkerSetup, exchange: _Exchange, batch_size: int, steps: int | None,
          ) -> tuple[int, float, torch.Tensor]:
    stream, learner = setup.stream, setup.learner
    if stream.classes is not None:
        learner.register_classes(stream.classes)
    joined = False
    sums = torch.zeros(3, dtype=torch.float64)  # correct, log loss, rows
    rows = 0
    t0 = time.perf_counter()
    for step, (X, y) in enumerate(stream.batches(batch_size * exchange.workers)):
        if steps is not None and step >= steps:
            break
        mine = exchange.start(X)
        Xl, yl = X[mine], y[mine]
        with torch.no_grad():
            proba = learner(Xl)  # class probabilities; builds the model at the first batch
        if not joined:
            _join_learner(learner, exchange)
            for e in setup.explainers:
                _join_explainer(e, exchange)
            joined = True
            with torch.no_grad():  # rank 0's weights now: test again
                proba = learner(Xl)
        if len(yl):
            p = proba.gather(1, yl.view(-1, 1).long()).clamp_min(1e-15).view(-1)
            sums += torch.tensor([float((proba.argmax(1) == yl).sum()),
                                  float(-p.log().sum()), float(len(yl))], dtype=torch.float64)
        for e in setup.explainers:
            e.explain(Xl, yl)
        if learner.input_scaler is not None:
            RunningStandardizer.update(learner.input_scaler, X)
        learner.learn(Xl, yl)
        rows += X.shape[0]
    seconds = time.perf_counter() - t0
    dist.all_reduce(sums)
    return rows, seconds, sums


def _worker(rank: int, workers: int, address: str, build: Callable[[int], WorkerSetup],
            batch_size: int, steps: int | None, results: Any, timeout: float) -> None:
    try:
        use_threads(1)
        dist.init_process_group("gloo", init_method=address, rank=rank, world_size=workers,
                                timeout=timedelta(seconds=timeout))
        setup = build(rank)
        exchange = _Exchange(rank, workers)
        results.put(("running", rank, os.getpid()))
        rows, seconds, sums = _loop(setup, exchange, batch_size, steps)
        if rank == 0:
            module = setup.learner.module
            assert module is not None
            n = max(exchange.steps, 1)
            # plain pickle: the tensors' bytes travel in the message (the queue's own pickler
            # would share their memory, gone when this process ends)
            results.put(("ok", rank, pickle.dumps(ParallelResult(
                rows=rows, seconds=seconds,
                metrics={"accuracy": float(sums[0] / sums[2]),
                         "log_loss": float(sums[1] / sums[2])},
                importances={_name(e): e.as_dict() for e in setup.explainers},
                half_widths={_name(e): dict(zip(e.as_dict(), e.half_width(0.05).tolist()))
                             for e in setup.explainers},
                state={k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
                workers=workers,
                bytes_per_step={k: v / n for k, v in exchange.bytes.items()}))))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 (reported to the parent, which stops the run)
        results.put(("failed", rank, f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
        raise SystemExit(1) from None


def _name(explainer: Explainer) -> str:
    return str(getattr(explainer, "name", type(explainer).__name__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_data_parallel(build: Callable[[int], WorkerSetup], workers: int, batch_size: int, *,
                      steps: int | None = None, timeout: float = 120.0,
                      on_start: Callable[[list[int]], None] | None = None) -> ParallelResult:
    """Learn and explain one stream with ``workers`` processes (see the module docstring):
    global batches of ``workers * batch_size`` rows, ``steps`` of them (None: the whole
    stream). ``build(rank)`` makes each worker's :class:`WorkerSetup` (picklable: the workers
    are started with ``spawn``). ``on_start`` is called with the workers' process ids once
    every worker has joined and built its setup.
    ``timeout``: seconds a collective may wait for a worker. Raises :class:`WorkerFailed`,
    naming the worker, when one fails or dies (the others are stopped)."""
    if not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs: list[BaseProcess] = [
        ctx.Process(target=_worker, args=(r, workers, address, build, batch_size, steps,
                                          results, timeout), name=f"torchstream-worker-{r}")
        for r in range(workers)]
    for p in procs:
        p.start()
    try:
        return _wait(procs, results, on_start)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGKILL)
                p.join()


def _wait(procs: list[BaseProcess], results: Any,
          on_start: Callable[[list[int]], None] | None) -> ParallelResult:
    """Rank 0's result; a :class:`WorkerFailed` naming the worker that died or failed first (a
    worker that died is named before the errors its peers then met in a collective)."""
    running: dict[int, int] = {}
    while True:
        try:
            status, rank, payload = results.get(timeout=0.2)
        except queue.Empty:
            dead = _dead(procs)
            if dead:
                raise WorkerFailed(dead) from None
            continue
        if status == "running":
            running[rank] = int(payload)
            if len(running) == len(procs) and on_start is not None:
                on_start([running[r] for r in range(len(procs))])
        elif status == "ok":
            result: ParallelResult = pickle.loads(payload)
            return result
        else:
            deadline = time.monotonic() + 2.0  # a peer's death makes the others' errors
            while time.monotonic() < deadline:
                dead = _dead(procs, signalled=True)
                if dead:
                    raise WorkerFailed(dead) from None
                time.sleep(0.05)
            first = str(payload).splitlines()[0]
            raise WorkerFailed(f"worker {rank} failed: {first}; the run is stopped")


def _dead(procs: list[BaseProcess], *, signalled: bool = False) -> str | None:
    """A message naming the first worker that ended with an error (``signalled``: killed by a
    signal), or None."""
    for rank, p in enumerate(procs):
        code = p.exitcode
        if code is not None and (code < 0 if signalled else code != 0):
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            return f"worker {rank} (pid {p.pid}) died ({how}); the run is stopped"
    return None


def cost_per_step(n_params: int, n_features: int, batch_size: int, workers: int,
                  explainers: int = 1, *, contribution_bytes: int = 8) -> dict[str, float]:
    """Bytes one worker sends per global batch: its float32 gradients (a ring ``all_reduce`` of
    ``n_params`` values sends ``2 (N - 1) / N`` of them) and, for each explainer, its rows'
    contributions (``all_gather`` of ``batch_size x n_features`` values of
    ``contribution_bytes``, 8: the explainers accumulate in float64) to
    each of the ``N - 1`` others.

    >>> c = cost_per_step(n_params=30_000, n_features=100, batch_size=64, workers=2)
    >>> int(c["gradients"]), int(c["contributions"])
    (120000, 51200)
    """
    ring = 2 * (workers - 1) / workers if workers > 1 else 0.0
    return {"gradients": 4.0 * n_params * ring,
            "contributions": float(contribution_bytes * batch_size * n_features * explainers
                                   * (workers - 1))}
