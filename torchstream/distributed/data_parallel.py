"""One stream learned and explained by N processes: one model, one explanation.

:func:`launch` starts ``workers`` processes joined by ``torch.distributed`` (gloo, on the CPU;
``spawn``). Each reads the same stream in global batches of ``workers * batch_size`` rows and
takes its own rows of each: the global batch split into ``workers`` contiguous parts in rank
order (:func:`~torchstream.distributed.exchange.shard`: rank 0 the first ``batch_size`` rows,
rank 1 the next, ...). Every worker
runs a :class:`ParallelPrequential` — the package's prequential loop — over the global batches,
with a :class:`ShardedLearner` and its explainers joined by :func:`join_explainer`. Every
global batch, each worker

1. **tests** its rows with the current model;
2. **explains** its rows (iPFI, iSAGE), as part of the test; each explainer's storage of rows to
   draw replacements from receives every row of the global batch (a reservoir over the whole
   stream, whichever rows a worker is given — a stream partitioned by key does not bias it);
3. **computes its half of the learning step**, still as part of the test: the gradient of its
   rows' mean loss, weighted by its share of the global batch's rows, with the input (and
   target) scaler updated by the whole global batch (and put back as it was until the step);
   nothing changes the model between the test and the step, so this is the gradient the step
   takes;
4. **synchronises once**: one ``all_reduce`` of one float64 buffer holds the global batch's
   predictions and each explainer's contributions (every worker writes its own rows, zeros
   elsewhere, so the sum is every row exactly), the gradients, the worker's share of the loss
   and its request to stop. Every worker then holds every row's prediction in stream order
   (the metrics, the drift detectors and the drift report see them as one process does), folds
   every row's contributions into its explainers' averages in row order (so every worker holds
   the same explanation), and the summed gradient of the global batch's mean loss;
5. **learns**: the scalers take the global batch's statistics and the optimiser steps with the
   summed gradients. Every replica takes the same step: the model a single process trains on
   batches of ``workers * batch_size`` rows, up to float rounding; every worker stops after the
   same step.

A step thus waits for the other workers once (the synchronisation point is where the fastest
worker waits for the slowest); the waiting worker polls the collective rather than sleeping
(:meth:`~torchstream.distributed.exchange.Exchange.synchronise`).

Plug-ins other than iPFI and iSAGE (an iPDP, interactions, drift detectors, the drift report)
and the sinks run on rank 0 only, over the whole global batch and its gathered predictions.

What is exact and what is equal in distribution: the model's weights, the test metrics and the
loss equal those of one process at batch ``workers * batch_size`` (up to the rounding of a
summed gradient); an explainer's contributions depend on its random draws (replacement rows,
permutations), which each worker makes with its own generator, so the explanation is equal *in
distribution* to one process's (its differences within the explainers' confidence bounds).

Checkpoints: rank 0 writes the run's state (the model and everything one process would save)
with every worker's own explainer states and random state in it, so every worker resumes
exactly where it stopped; a checkpoint resumes only with the same number of workers. A worker
that fails or dies stops the run: the others are stopped and
:class:`~torchstream.distributed.processes.WorkerFailed` names it.

:func:`run_data_parallel` is the entry from Python (``build(rank)`` makes each worker's
:class:`WorkerSetup`); ``torchstream run --workers N`` (:mod:`torchstream.cli.run_workers`)
runs the same loop through :func:`launch`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from torchstream.base import PluginBase
from torchstream.distributed.exchange import Exchange, Explainer
from torchstream.distributed.processes import DEFAULT_TIMEOUT, launch
from torchstream.distributed.ray_workers import connected, launch_ray, ray_module
from torchstream.distributed.sharded import ShardedLearner, join_explainer
from torchstream.evaluate.prequential import Prequential
from torchstream.evaluate.result import RunResult
from torchstream.learners.online import OnlineLearner
from torchstream.learners.threads import use_threads
from torchstream.step import StepRecord
from torchstream.streams.base import Stream
from torchstream.typing import BatchView

__all__ = ["ParallelPrequential", "ParallelResult", "WorkerSetup", "cost_per_step",
           "run_data_parallel"]


class _Announce(PluginBase):
    """The first plug-in of a worker's runner: tells the learner which batch its next call
    tests (the global batch, as the runner starts the step)."""

    name = "workers"

    def __init__(self, learner: ShardedLearner) -> None:
        self._learner = learner
        self.workers = learner.workers

    def transform(self, X: torch.Tensor, step: int) -> torch.Tensor:
        self._learner.arm(X, step)
        return X

    def on_batch(self, batch: BatchView) -> None:
        return None


class ParallelPrequential(Prequential):
    """One worker's prequential loop over the global batches of ``workers * batch_size``
    rows (:class:`~torchstream.evaluate.Prequential` with a :class:`ShardedLearner`).

    ``plugins`` run in order after the runner's own announcing plug-in; joined explainers
    (:func:`join_explainer`) must be given to every worker in the same order, the others to
    rank 0 only. :meth:`state_dict` (and :meth:`save`) gathers every worker's explainer and
    random states to rank 0: every worker calls them at the same step, and rank 0 alone
    writes. :meth:`load_state_dict` gives each worker its own part back.

    Parameters
    ----------
    learner
        This worker's :class:`ShardedLearner`.
    stream
        The stream, the same rows on every worker.
    batch_size
        Rows per worker and step (``B``).
    **kwargs
        As :class:`~torchstream.evaluate.Prequential` (sinks and ``records_path`` on rank 0).

    >>> from functools import partial
    >>> from torchstream.explain import IncrementalPFI
    >>> from torchstream.learners import OnlineClassifier
    >>> from torchstream.models import MLP
    >>> from torchstream.streams import agrawal_drift
    >>> exchange = Exchange(0, 1)  # one worker, in this process
    >>> stream = agrawal_drift(n_samples=400, position=200)
    >>> replica = OnlineClassifier(partial(MLP, hidden=(8,)), scale_inputs=True, seed=0)
    >>> ipfi = join_explainer(IncrementalPFI(replica, "cross_entropy", stream.n_features,
    ...                                      seed=0), exchange)
    >>> runner = ParallelPrequential(ShardedLearner(replica, exchange), stream, batch_size=20,
    ...                              plugins=[ipfi])
    >>> result = runner.run()
    >>> result.n_rows, result.n_steps, ipfi.n_explained, runner.plugin_names
    (400, 20, 380, ['workers', 'ipfi'])
    """

    def __init__(self, learner: ShardedLearner, stream: Stream, *, batch_size: int,
                 plugins: Sequence[object] = (), **kwargs: Any) -> None:
        self.exchange = learner.exchange
        self.worker_batch = batch_size
        super().__init__(learner, stream, batch_size=batch_size * learner.workers,
                         plugins=[_Announce(learner), *plugins], **kwargs)

    def _step(self, X: torch.Tensor, y: torch.Tensor, *, last: bool) -> StepRecord:
        self.exchange.labels = (y, self.position)  # the test explains with them
        self.exchange.explained.clear()
        try:
            return super()._step(X, y, last=last)
        finally:
            self.exchange.labels = None
            self.exchange.explained.clear()

    def run(self, steps: int | None = None, *, checkpoint_every: int | None = None,
            checkpoint_path: str | os.PathLike[str] | None = None,
            should_stop: Callable[[], bool] | None = None) -> RunResult:
        """As :meth:`~torchstream.evaluate.Prequential.run`; when any worker's ``should_stop``
        answers True (or its parent process has gone) every worker stops after the same step.
        Every worker gives the same ``checkpoint_every`` (rank 0 writes the checkpoint)."""
        ex = self.exchange
        own = ex.stop

        def asked() -> bool:  # an orphaned worker stops too, at a step boundary
            return bool((should_stop is not None and should_stop())
                        or os.getppid() != ex.parent)

        first = [True]

        def agreed() -> bool:
            if first[0]:  # before the first step: agreed here; later at the end of each step
                first[0] = False
                return ex.all_sum([float(asked())], "loss")[0] > 0
            return ex.stop_agreed

        ex.stop = asked
        try:
            return super().run(steps, checkpoint_every=checkpoint_every,
                               checkpoint_path=checkpoint_path, should_stop=agreed)
        finally:
            ex.stop = own

    def state_dict(self) -> dict[str, Any]:
        """Rank 0: the run's state with every worker's own part (``"workers"``); the other
        workers send theirs and get ``{}``."""
        ex = self.exchange
        mine = {"explainers": [(type(e).__name__, e.state_dict()) for e in ex.explainers],
                "torch_rng": torch.get_rng_state()}
        parts = ex.gather_objects(mine)
        if ex.rank != 0:
            return {}
        state = super().state_dict()
        state["workers"] = {"count": ex.workers, "batch_size": self.worker_batch,
                            "ranks": parts}
        return state

    def save(self, path: str | os.PathLike[str]) -> str:
        """Rank 0 writes the checkpoint; every worker calls it (its part goes into it)."""
        if self.exchange.rank == 0:
            return super().save(path)
        self.state_dict()
        return str(path)

    def read_checkpoint(self, path: str | os.PathLike[str], *, trusted: bool = False,
                        strict: bool = True) -> dict[str, Any]:
        """Rank 0 reads and checks the checkpoint (its identity against rank 0's run) and sends
        the state to every worker; every worker calls it."""
        state: dict[str, Any] | None = None
        if self.exchange.rank == 0:
            state = super().read_checkpoint(path, trusted=trusted, strict=strict)
        out = self.exchange.broadcast(state)
        assert out is not None
        return out

    def add_sink(self, sink: object) -> None:
        """Rank 0 logs; the other workers' sinks are not used."""
        if self.exchange.rank == 0:
            super().add_sink(sink)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load rank 0's ``state`` (given to every worker) and this worker's own part."""
        ex = self.exchange
        saved = state.get("workers")
        if saved is None or saved["count"] != ex.workers:
            count = 1 if saved is None else saved["count"]
            raise ValueError(
                f"the checkpoint was written by a run with {count} worker(s) and this run has "
                f"{ex.workers}: each worker's explainers resume from their own state and the "
                f"model from batches of {count} x {self.worker_batch} rows; resume with "
                f"{count} worker(s)")
        super().load_state_dict(state)
        mine = saved["ranks"][ex.rank]
        for e, (cls, s) in zip(ex.explainers, mine["explainers"], strict=True):
            if type(e).__name__ != cls:
                raise ValueError(f"the checkpoint's worker {ex.rank} has a {cls} where this "
                                 f"run has a {type(e).__name__}")
            e.load_state_dict(s)
        torch.set_rng_state(mine["torch_rng"])


# ---------------------------------------------------------------------------------- from Python
@dataclass
class WorkerSetup:
    """What one worker runs: the ``stream`` (the same rows on every rank), the ``learner``
    (the same model on every rank: rank 0's weights are broadcast before the first step), the
    ``explainers`` (iPFI / iSAGE explaining the learner; a seed of their own per rank), and
    rank 0's other ``plugins`` and ``sinks`` (the other ranks' are not used)."""

    stream: Stream
    learner: OnlineLearner
    explainers: Sequence[Explainer] = ()
    plugins: Sequence[object] = ()
    sinks: Sequence[object] = ()


@dataclass
class ParallelResult:
    """A data-parallel run, as rank 0 saw it: ``rows`` tested and learned, ``seconds`` of the
    loop, ``metrics`` over every row (the runner's: ``accuracy``, ``log_loss``, ...), each
    explainer's importances and their half-widths (95 %), the model's parameters (``state``,
    on the CPU), ``workers``, the bytes each worker sent per step (gradients, explainer
    contributions, predictions) and the checkpoint written (None: none)."""

    rows: int
    seconds: float
    metrics: dict[str, float]
    importances: dict[str, dict[str, float]]
    half_widths: dict[str, dict[str, float]]
    state: dict[str, torch.Tensor]
    workers: int
    bytes_per_step: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    steps: int = 0

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("nan")


def _python_rank(exchange: Exchange, build: Callable[[int], WorkerSetup], batch_size: int,
                 steps: int | None, checkpoint: str | None, checkpoint_every: int | None,
                 resume: str | None, threads: int) -> ParallelResult | None:
    use_threads(threads)
    lead = exchange.rank == 0
    setup = build(exchange.rank)
    learner = ShardedLearner(setup.learner, exchange)
    explainers = [join_explainer(e, exchange) for e in setup.explainers]
    runner = ParallelPrequential(
        learner, setup.stream, batch_size=batch_size,
        plugins=[*explainers, *(setup.plugins if lead else ())],
        sinks=setup.sinks if lead else (), record_steps=lead)
    if resume is not None:
        runner.load_state_dict(runner.read_checkpoint(resume))
    try:
        result = runner.run(steps, checkpoint_every=checkpoint_every,
                            checkpoint_path=checkpoint)
    finally:
        runner.close()
    if checkpoint is not None:
        result.checkpoint = runner.save(checkpoint)
    if not lead:
        return None
    module = setup.learner.module
    assert module is not None
    n = max(exchange.steps, 1)
    return ParallelResult(
        rows=result.n_rows, seconds=result.seconds, metrics=dict(result.metrics),
        importances={e.name: e.as_dict() for e in explainers},
        half_widths={e.name: dict(zip(e.as_dict(), e.half_width(0.05).tolist()))
                     for e in explainers},
        state={k: v.detach().cpu().clone() for k, v in module.state_dict().items()},
        workers=exchange.workers,
        bytes_per_step={k: v / n for k, v in exchange.bytes.items()},
        checkpoint=result.checkpoint, steps=result.n_steps)


def run_data_parallel(build: Callable[[int], WorkerSetup], workers: int, batch_size: int, *,
                      steps: int | None = None, checkpoint: str | None = None,
                      checkpoint_every: int | None = None, resume: str | None = None,
                      threads: int = 1, timeout: float = DEFAULT_TIMEOUT,
                      on_start: Callable[[list[int]], None] | None = None,
                      pin: bool = True, ray_address: str | None = None) -> ParallelResult:
    """Learn and explain one stream with ``workers`` processes (see the module docstring):
    global batches of ``workers * batch_size`` rows, ``steps`` of them (None: the rest of the
    stream). ``build(rank)`` makes each worker's :class:`WorkerSetup` (picklable: the workers
    are started with ``spawn``). ``checkpoint``: written by rank 0 every ``checkpoint_every``
    global batches and at the end; ``resume``: a checkpoint of the same run, with the same
    ``workers``. ``threads``: torch CPU threads per worker. ``on_start`` is called with the
    workers' process ids once every worker has joined. ``timeout``: seconds a collective may
    wait for a worker. ``pin``: each worker on ``threads`` CPUs of its own (:func:`launch`).
    ``ray_address``: the workers are Ray actors of that cluster, a CPU each (``"local"``: Ray
    started on this machine; :func:`~torchstream.distributed.ray_workers.launch_ray`;
    ``on_start`` and ``pin`` do not apply); None: processes on this machine. Raises
    :class:`~torchstream.distributed.processes.WorkerFailed`, naming the worker, when one
    fails or dies (the others are stopped)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every needs a checkpoint path")
    call = _RankCall(build, batch_size, steps, checkpoint, checkpoint_every, resume, threads)
    if ray_address is None:
        result = launch(call, workers, returns=(ParallelResult,), timeout=timeout,
                        on_start=on_start, pin=pin, threads=threads)
    else:
        ray = ray_module()
        with connected(ray, ray_address):
            result = launch_ray(call, workers, ray=ray, returns=(ParallelResult,),
                                timeout=timeout)
    assert result is not None  # rank 0's
    return result


@dataclass(frozen=True)
class _RankCall:
    build: Callable[[int], WorkerSetup]
    batch_size: int
    steps: int | None
    checkpoint: str | None
    checkpoint_every: int | None
    resume: str | None
    threads: int

    def __call__(self, exchange: Exchange) -> ParallelResult | None:
        return _python_rank(exchange, self.build, self.batch_size, self.steps, self.checkpoint,
                            self.checkpoint_every, self.resume, self.threads)


# ---------------------------------------------------------------------------------- cost model
def cost_per_step(n_params: int, n_features: int, batch_size: int, workers: int,
                  explainers: int = 1, *, n_outputs: int = 2) -> dict[str, float]:
    """Bytes one worker sends per global batch in the step's one ring ``all_reduce`` of a
    float64 buffer (a ring all-reduce of ``V`` values sends ``2 (N - 1) / N x 8 V`` bytes): its
    gradients (``n_params`` values), for each explainer the global batch's contributions
    (``N x batch_size x n_features`` values: every worker's rows, its own filled in, zeros
    elsewhere) and the global batch's predictions (``N x batch_size x n_outputs``).

    >>> c = cost_per_step(n_params=30_000, n_features=100, batch_size=64, workers=2)
    >>> int(c["gradients"]), int(c["contributions"]), int(c["predictions"])
    (240000, 102400, 2048)
    """
    ring = 2 * (workers - 1) / workers if workers > 1 else 0.0
    rows = workers * batch_size
    return {"gradients": 8.0 * n_params * ring,
            "contributions": 8.0 * rows * n_features * explainers * ring,
            "predictions": 8.0 * rows * n_outputs * ring}
