"""One stream learned and explained by N processes: one model, one explanation.

:func:`launch` starts ``workers`` processes joined by ``torch.distributed`` (gloo, on the CPU;
``spawn``). Each reads the same stream in global batches of ``workers * batch_size`` rows and
takes its own rows of each: the global batch split into ``workers`` contiguous parts in rank
order (:func:`shard`: rank 0 the first ``batch_size`` rows, rank 1 the next, ...). Every worker
runs a :class:`ParallelPrequential` — the package's prequential loop — over the global batches,
with a :class:`ShardedLearner` and its explainers joined by :func:`join_explainer`. Every
global batch, each worker

1. **tests** its rows with the current model; the predictions are gathered from every worker
   (``all_gather``) in the global batch's row order, so the metrics, the drift detectors and
   the drift report see every row's prediction in stream order, as one process sees them;
2. **explains** its rows (iPFI, iSAGE), as part of the test: each explainer's per-row
   contributions of the batch are gathered from every worker and folded into its average in
   row order, so every worker holds the same explanation — the first explainer's contributions
   and the predictions travel in one ``all_gather`` (one flat buffer); its storage of rows to
   draw replacements from receives every row of the global batch (a reservoir over the whole
   stream, whichever rows a worker is given — a stream partitioned by key does not bias it);
3. **learns** its rows: the gradient of its rows' mean loss, weighted by its share of the global
   batch's rows, is summed over the workers (one ``all_reduce`` of every gradient in one
   buffer, in an optimiser step pre-hook) before the optimiser's step, and the input (and
   target) scaler takes the statistics of the whole global batch. Every replica takes the same
   step: the model a single process trains on batches of ``workers * batch_size`` rows, up to
   float rounding. The step's loss (the global batch's mean) and a request to stop (so that
   every worker stops after the same step) are summed in the same ``all_reduce``.

A step thus waits for the other workers twice (each collective is a point where the fastest
worker waits for the slowest); a second explainer adds one ``all_gather``.

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
that fails or dies stops the run: the others are stopped and :class:`WorkerFailed` names it.

:func:`run_data_parallel` is the entry from Python (``build(rank)`` makes each worker's
:class:`WorkerSetup`); ``torchstream run --workers N`` (:mod:`torchstream.cli.run_workers`)
runs the same loop through :func:`launch`.
"""

from __future__ import annotations

import importlib
import io
import math
import multiprocessing as mp
import os
import queue
import signal
import socket
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from multiprocessing.process import BaseProcess
from typing import Any, Generic, TypeVar

import torch
import torch.distributed as dist

from torchstream.base import PluginBase
from torchstream.evaluate.identity import settings
from torchstream.evaluate.prequential import Prequential
from torchstream.evaluate.result import RunResult
from torchstream.evaluate.strategies import derived_seed
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.learners.online import OnlineLearner
from torchstream.learners.scaling import RunningStandardizer
from torchstream.learners.threads import use_threads
from torchstream.step import Batch, StepRecord
from torchstream.streams.base import Stream
from torchstream.typing import BatchView

__all__ = ["Exchange", "Named", "ParallelPrequential", "ParallelResult", "ShardedLearner",
           "WorkerFailed", "WorkerSetup", "cost_per_step", "join_explainer", "launch",
           "read_result", "run_data_parallel", "shard", "worker_cpus"]

Explainer = IncrementalPFI | IncrementalSAGE
T = TypeVar("T")

#: Seconds a collective waits for the other workers (a worker that dies is noticed at once by
#: the parent; this bounds a worker that hangs, e.g. rank 0 writing a long drift report).
DEFAULT_TIMEOUT = 1800.0


class WorkerFailed(RuntimeError):
    """A worker of a data-parallel run failed or died; the message names it, ``details`` holds
    the failed worker's traceback (empty for a worker that died)."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details


def shard(n: int, workers: int, rank: int) -> slice:
    """The rows of a global batch of ``n`` rows that worker ``rank`` takes: the ``rank``-th of
    ``workers`` contiguous parts whose sizes differ by at most one (``torch.tensor_split``).

    >>> [shard(8, 2, r) for r in (0, 1)], [shard(5, 2, r) for r in (0, 1)]
    ([slice(0, 4, None), slice(4, 8, None)], [slice(0, 3, None), slice(3, 5, None)])
    """
    base, extra = divmod(n, workers)
    start = rank * base + min(rank, extra)
    return slice(start, start + base + (1 if rank < extra else 0))


@dataclass(frozen=True)
class _Rows(Batch):
    """A worker's rows of a global batch, as its explainers see them (told apart from the
    runner's global :class:`~torchstream.step.Batch` by its type)."""


class Exchange:
    """One worker's side of the run: its ``rank`` among ``workers``, the global batch of the
    current step and the collectives that refer to it, and the bytes it sent per kind.

    While a run steps, ``stop`` answers whether this worker was asked to stop (its
    ``should_stop``, or the parent process gone); every worker stops after the same step
    (:meth:`ShardedLearner.learn` agrees on it). With one worker nothing is exchanged (no
    process group is needed).

    >>> ex = Exchange(rank=1, workers=2)
    >>> ex.start(torch.zeros(5, 3)), ex.local_n, ex.sizes()
    (slice(3, 5, None), 2, [3, 2])
    """

    def __init__(self, rank: int, workers: int) -> None:
        self.rank, self.workers = rank, workers
        self.stop: Callable[[], bool] | None = None
        self.parent = os.getppid()
        self.X: torch.Tensor | None = None  # the global batch
        self.n = 0
        self.rows = slice(0, 0)
        self.local_n = 0
        self.steps = 0
        self.bytes: dict[str, float] = {"gradients": 0.0, "contributions": 0.0,
                                        "predictions": 0.0, "loss": 0.0}
        #: The joined explainers, in the order every worker runs them.
        self.explainers: list[Explainer] = []
        self.stop_agreed = False
        self.pids: list[int] = []
        #: The current global batch's labels and first row's stream position (the test of a
        #: global batch explains this worker's rows with them).
        self.labels: tuple[torch.Tensor, int] | None = None
        #: This worker's predictions of the batch, waiting to travel with the first
        #: explainer's contributions (one ``all_gather`` for both); then every worker's.
        self.carry: torch.Tensor | None = None
        self.carried: torch.Tensor | None = None
        #: What each joined explainer's plug-in call answers this step (it explained during
        #: the test, so that its contributions carried the predictions).
        self.explained: dict[int, object] = {}

    def start(self, X: torch.Tensor) -> slice:
        """A new global batch ``X``: this worker's rows of it."""
        self.X, self.n = X, X.shape[0]
        self.rows = shard(self.n, self.workers, self.rank)
        self.local_n = self.rows.stop - self.rows.start
        self.steps += 1
        return self.rows

    def own_rows(self) -> slice:
        """The rows this worker computes with: its own, or (a worker without rows in a short
        last batch) the batch's first row, computed and then given no weight, so that it takes
        part in every collective."""
        return self.rows if self.local_n else slice(0, 1)

    def local(self, batch: BatchView) -> _Rows:
        """This worker's rows of a plug-in's global ``batch``."""
        rows = self.own_rows()
        return _Rows(batch.step, batch.start + rows.start, batch.X[rows], batch.y[rows],
                     batch.y_pred[rows], batch.learner)

    def sizes(self) -> list[int]:
        return [shard(self.n, self.workers, r).stop - shard(self.n, self.workers, r).start
                for r in range(self.workers)]

    def gather_rows(self, values: torch.Tensor, kind: str) -> torch.Tensor:
        """Every worker's ``values [b_r, ...]`` concatenated in rank order (the global batch's
        row order); ``values`` holds this worker's ``local_n`` rows."""
        return self.gather_many([(values, kind)])[0]

    def gather_many(self, items: Sequence[tuple[torch.Tensor, str]]) -> list[torch.Tensor]:
        """:meth:`gather_rows` of several tensors of this worker's rows in one ``all_gather``
        (one flat buffer of their common dtype: each value travels exactly)."""
        values = [v.detach() for v, _ in items]
        if self.workers == 1:
            return values
        sizes = self.sizes()
        top = max(sizes)
        dtype = values[0].dtype
        for v in values[1:]:
            dtype = torch.promote_types(dtype, v.dtype)
        widths = [math.prod(v.shape[1:]) for v in values]
        padded = values[0].new_zeros((top, sum(widths)), dtype=dtype)
        col = 0
        for v, w in zip(values, widths):
            padded[: v.shape[0], col : col + w] = v.reshape(v.shape[0], w)
            col += w
        parts = [torch.empty_like(padded) for _ in range(self.workers)]
        dist.all_gather(parts, padded)
        whole = torch.cat([part[:s] for part, s in zip(parts, sizes)])
        out: list[torch.Tensor] = []
        col = 0
        for (v, kind), w in zip(zip(values, (k for _, k in items)), widths):
            out.append(whole[:, col : col + w].to(v.dtype).reshape(whole.shape[0], *v.shape[1:]))
            self.bytes[kind] += top * w * padded.element_size()
            col += w
        return out

    def all_sum(self, values: list[float], kind: str) -> list[float]:
        """``values`` summed over the workers (float64)."""
        t = torch.tensor(values, dtype=torch.float64)
        if self.workers > 1:
            dist.all_reduce(t)
            self.bytes[kind] += t.numel() * t.element_size()
        return t.tolist()

    def average_gradients(self, params: Sequence[torch.Tensor],
                          riders: Sequence[float] = ()) -> list[float]:
        """Each gradient (its rows' mean) weighted by the worker's share of the rows, summed
        over the workers: the gradient of the global batch's mean loss. ``riders`` (a few
        numbers: the loss, a stop request) are summed in the same ``all_reduce``, in the
        gradients' dtype; returns their sums."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]) * (self.local_n / self.n)
        size = flat.numel()
        if riders:
            flat = torch.cat([flat, torch.tensor(list(riders), dtype=flat.dtype)])
        if self.workers > 1:
            dist.all_reduce(flat)
            self.bytes["gradients"] += size * flat.element_size()
            self.bytes["loss"] += len(riders) * flat.element_size()
        sums = flat[size:].tolist()
        flat = flat[:size]
        offset = 0
        for p, g in zip(params, grads):
            size = g.numel()
            n = g.numel()
            p.grad = flat[offset : offset + n].view_as(g).clone()
            offset += n
        return [float(v) for v in sums]

    def gather_objects(self, obj: object) -> list[object] | None:
        """Every worker's ``obj`` on rank 0 (None elsewhere)."""
        if self.workers == 1:
            return [obj]
        out: list[object] | None = [None] * self.workers if self.rank == 0 else None
        dist.gather_object(obj, out, dst=0)
        return out

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every worker."""
        if self.workers == 1:
            return obj
        box: list[object] = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]  # type: ignore[return-value]


@contextmanager
def _frozen(*scalers: RunningStandardizer | None) -> Iterator[None]:
    """The scalers' ``update`` does nothing inside (the whole global batch updated them)."""
    held = [s for s in scalers if s is not None]
    for s in held:
        s.update = _no_update  # type: ignore[method-assign]
    try:
        yield
    finally:
        for s in held:
            del s.update


def _no_update(X: torch.Tensor) -> None:
    return None


class ShardedLearner:
    """One worker's replica of an :class:`~torchstream.learners.OnlineLearner` trained by
    every worker on one stream (the :class:`~torchstream.base.Learner` contract for the
    runner; anything else is the replica's own).

    Called on a global batch that :class:`ParallelPrequential` has announced (its test), it
    predicts this worker's rows, has the joined explainers explain them (their plug-in calls
    of the step then answer what they answered here) and returns every worker's predictions
    gathered in row order (with the first explainer's contributions, in one collective);
    any other call (an explainer's, a detector's, the drift report's) is the replica's own
    prediction. :meth:`learn` takes the global batch just tested: the scalers learn all of its
    rows, the replica its own rows, with every worker's gradients combined before the step.
    The first test broadcasts rank 0's weights, so every replica starts equal.

    Parameters
    ----------
    learner
        This worker's replica (built alike on every worker).
    exchange
        This worker's :class:`Exchange`.

    >>> from functools import partial
    >>> from torchstream.learners import OnlineClassifier
    >>> from torchstream.models import MLP
    >>> replica = OnlineClassifier(partial(MLP, hidden=(8,)), seed=0)
    >>> learner = ShardedLearner(replica, Exchange(0, 1))  # one worker, in this process
    >>> X, y = torch.randn(6, 3), torch.tensor([0, 1, 0, 1, 1, 0])
    >>> learner.register_classes([0, 1]); learner.arm(X)
    >>> learner(X).shape, learner.learn(X, y), replica.n_samples_seen, learner.workers
    (torch.Size([6, 2]), None, 6, 1)
    """

    def __init__(self, learner: OnlineLearner, exchange: Exchange) -> None:
        if not isinstance(learner, OnlineLearner):
            raise TypeError(f"workers train a torch model (an OnlineLearner); got a "
                            f"{type(learner).__name__}, whose steps cannot be combined")
        if learner.on_divergence == "skip":
            raise ValueError("on_divergence='skip' undoes a step by one worker's rows alone, "
                             "so the replicas would part; use 'raise' or 'warn' with workers")
        self.learner = learner
        self.exchange = exchange
        #: The number of workers (part of a checkpoint's identity).
        self.workers = exchange.workers
        #: The replica's own settings, ``[name, value]`` pairs (a checkpoint's identity).
        self.replica = [[k, v] for k, v in sorted(settings(learner).items())
                        if not isinstance(v, Mapping)]
        self.task = learner.task
        self.device = learner.device
        self.dtype = learner.dtype
        self._armed: torch.Tensor | None = None
        self._joined = False
        self._learned = True
        self._hooked: torch.optim.Optimizer | None = None
        self._loss = float("nan")
        self._step_no = 0
        self._stop = False
        self._sums: list[float] = []
        # the step's loss rides on the gradients' all_reduce: it is read as the replica
        # computes it (a compiled replica's loss is inside its graphs: summed after the step)
        self._recorder: _LossRecorder | None = None
        if not learner.compile:
            self._recorder = _LossRecorder(learner._train_loss)
            learner._train_loss = self._recorder

    def __getattr__(self, name: str) -> object:
        """Anything else is the replica's (``module``, ``optimizer``, ``divergences``, ...)."""
        learner = self.__dict__.get("learner")
        if learner is None:
            raise AttributeError(name)
        return getattr(learner, name)

    def arm(self, X: torch.Tensor, step: int = 0) -> None:
        """The next call on ``X`` is the test of global batch ``step``."""
        self._armed = X
        self._step_no = step

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        if X is not self._armed:
            return self.learner(X)
        self._armed = None
        ex = self.exchange
        ex.start(X)
        X = self.learner._check_X(X)  # a bad value is named by its row of the stream
        self._learned = False
        if not self._joined:
            with torch.no_grad():
                self.learner(X[:1])  # builds the module (seeded alike on every worker)
            self._broadcast_weights()
            self._joined = True
        rows = ex.own_rows()
        out = self.learner(X[rows])
        ex.carry, ex.carried = out[: ex.local_n], None
        labels, ex.labels = ex.labels, None
        if ex.explainers and labels is not None:
            # the explainers explain this worker's rows now: the first one's contributions
            # carry the predictions (one all_gather for both); the runner's plug-in calls then
            # answer what they answered here
            y, start = labels
            local = _Rows(self._step_no, start + rows.start, X[rows], y[rows], out, self)
            with torch.enable_grad():
                for i, e in enumerate(ex.explainers):
                    ex.explained[i] = e.on_batch(local)
        if ex.carry is not None:  # no explainer folded contributions this step
            ex.carried = ex.gather_rows(ex.carry, "predictions")
            ex.carry = None
        gathered, ex.carried = ex.carried, None
        assert gathered is not None
        return gathered

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        ex = self.exchange
        if self._learned or X is not ex.X:
            raise RuntimeError("a worker's learner learns each global batch it has tested, "
                               "once (no label delay, no pre-training, no second pass)")
        self._learned = True
        learner = self.learner
        self._hook_optimizer()
        rows = ex.own_rows()
        target = learner._check_y(y, X.shape[0])  # a bad label is named by its row
        if learner.input_scaler is not None:
            learner.input_scaler.update(learner._check_X(X))
        if learner.target_scaler is not None:
            learner.target_scaler.update(target.view(-1, 1))
        seen = learner.n_samples_seen
        self._stop = ex.stop is not None and ex.stop()
        self._sums = []
        if self._recorder is not None:
            self._recorder.loss = None
        with _frozen(learner.input_scaler, learner.target_scaler):
            learner.learn(X[rows], y[rows])
        learner.n_samples_seen = seen + X.shape[0]
        if self._recorder is None:  # the loss was not known before the step
            share = ex.local_n / ex.n
            self._sums = ex.all_sum([learner.last_loss * share if ex.local_n else 0.0,
                                     float(self._stop)], "loss")
        loss, stops = self._sums
        self._loss = loss
        ex.stop_agreed = stops > 0

    @property
    def last_loss(self) -> float:
        """The mean loss of the last global batch (every worker's rows)."""
        return self._loss

    def register_classes(self, classes: Sequence[Any]) -> None:
        self.learner.register_classes(classes)

    def state_dict(self) -> dict[str, object]:
        return self.learner.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.learner.load_state_dict(state)

    def _hook_optimizer(self) -> None:
        """Combine the gradients before every step of the replica's optimiser (again when the
        replica rebuilt it: a resume, a new class)."""
        opt = self.learner.optimizer
        if opt is None or opt is self._hooked:
            return
        params = [p for g in opt.param_groups for p in g["params"]]
        opt.register_step_pre_hook(lambda o, a, k: self._reduce(params))
        self._hooked = opt

    def _reduce(self, params: list[torch.Tensor]) -> None:
        """The optimiser step's pre-hook: the gradients summed over the workers, with this
        worker's share of the global batch's loss and its stop request riding along (one
        collective for the three)."""
        ex = self.exchange
        if self._recorder is None:
            ex.average_gradients(params)
            return
        recorded = self._recorder.loss
        loss = float("nan") if recorded is None else float(recorded)
        share = ex.local_n / ex.n
        self._sums = ex.average_gradients(
            params, [loss * share if ex.local_n else 0.0, float(self._stop)])

    def _broadcast_weights(self) -> None:
        if self.exchange.workers == 1:
            return
        learner = self.learner
        assert learner.module is not None
        tensors = [*learner.module.parameters(), *learner.module.buffers()]
        for scaler in (learner.input_scaler, learner.target_scaler):
            if scaler is not None:
                tensors += list(scaler.buffers())
        with torch.no_grad():
            for t in tensors:
                dist.broadcast(t.data, 0)

    def __repr__(self) -> str:
        return repr(self.learner)


def join_explainer(explainer: Explainer, exchange: Exchange, *,
                   reseed: bool = False) -> Explainer:
    """Make ``explainer`` one worker's part of an explanation: as a plug-in it explains this
    worker's rows of each global batch, folds every worker's contributions in row order, and
    its storage takes every row of the global batch. ``reseed``: on every rank but 0, its
    random generators are seeded anew from its ``seed`` and the rank (an explainer built alike
    on every worker would otherwise draw the same numbers on each). Returns it."""
    if not isinstance(explainer, (IncrementalPFI, IncrementalSAGE)):
        raise TypeError(f"only iPFI and iSAGE combine contributions across workers, got a "
                        f"{type(explainer).__name__}")
    if explainer.compile:
        raise ValueError(f"{explainer.name}: a compiled explainer folds a batch's contributions "
                         "inside its compiled step, where the workers' cannot be combined; build "
                         "it with compile=False")
    if reseed and exchange.rank > 0:
        generators = [explainer.generator]
        generators += [g for g in explainer._generators() if all(g is not h for h in generators)]
        for i, g in enumerate(generators):
            if explainer.seed is None:
                g.seed()
            else:
                g.manual_seed(derived_seed(int(explainer.seed), f"worker {exchange.rank}/{i}"))
    smoother = explainer.smoother
    fold = type(smoother).update

    def update(values: torch.Tensor) -> None:
        mine = values[: exchange.local_n]
        if exchange.carry is not None:  # the test's predictions travel with these
            exchange.carried, gathered = exchange.gather_many(
                [(exchange.carry, "predictions"), (mine, "contributions")])
            exchange.carry = None
        else:
            gathered = exchange.gather_rows(mine, "contributions")
        del smoother.update  # the fold may call update on blocks of the rows: the class's own
        try:
            fold(smoother, gathered)
        finally:
            smoother.update = update  # type: ignore[method-assign]

    smoother.update = update  # type: ignore[method-assign]
    storage = explainer.storage
    for name in ("update", "_update_finite"):
        own = getattr(storage, name, None)
        if own is not None:
            setattr(storage, name, _global_rows(own, exchange))
    explain = explainer.on_batch
    index = len(exchange.explainers)

    def on_batch(batch: BatchView) -> object:
        if isinstance(batch, _Rows):  # the test of a global batch: this worker's rows
            return explain(batch)
        if index in exchange.explained:  # explained during the test
            return exchange.explained.pop(index)
        return explain(exchange.local(batch))

    explainer.on_batch = on_batch  # type: ignore[method-assign, assignment]
    exchange.explainers.append(explainer)
    return explainer


class _LossRecorder:
    """A replica's training loss that keeps the first mean loss it computes after ``loss`` is
    reset (the step's; later calls, e.g. a divergence check's, are not kept)."""

    def __init__(self, loss: Callable[..., torch.Tensor]) -> None:
        self.own = loss
        self.loss: torch.Tensor | None = None

    def __call__(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        value = self.own(out, y)
        if self.loss is None:
            self.loss = value.detach().mean()
        return value

    def __getattr__(self, name: str) -> object:
        own = self.__dict__.get("own")
        if own is None:
            raise AttributeError(name)
        value = getattr(own, name)
        if name == "mean":  # the fused mean loss
            def mean(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                result: torch.Tensor = value(out, y)
                if self.loss is None:
                    self.loss = result.detach()
                return result
            return mean
        return value


def _global_rows(update: Callable[[torch.Tensor], None], exchange: Exchange
                 ) -> Callable[[torch.Tensor], None]:
    def rows(X: torch.Tensor) -> None:
        assert exchange.X is not None
        update(exchange.X.to(X.device, X.dtype))
    return rows


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


# ---------------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class Named(Generic[T]):
    """A worker's function ``module.name(exchange, *args)``, imported in the worker (a
    command's module that imports the command line itself)."""

    module: str
    name: str
    args: tuple[object, ...] = ()

    def __call__(self, exchange: Exchange) -> T:
        fn: Callable[..., T] = getattr(importlib.import_module(self.module), self.name)
        return fn(exchange, *self.args)


def _failure(e: BaseException) -> str:
    if isinstance(e, SystemExit) and isinstance(e.code, str):
        return e.code.removeprefix("error: ")
    return f"{type(e).__name__}: {e}"


def _worker(target: Callable[[Exchange], object], rank: int, workers: int, address: str,
            results: Any, timeout: float, cpu: int | None) -> None:
    # a process group of its own: Ctrl-C at the terminal reaches the parent alone, which
    # passes a stop request on to every worker (each gets one signal)
    os.setpgid(0, 0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        dist.init_process_group("gloo", init_method=address, rank=rank, world_size=workers,
                                timeout=timedelta(seconds=timeout))
        exchange = Exchange(rank, workers)
        pids: list[object] = [None] * workers
        dist.all_gather_object(pids, os.getpid())
        exchange.pids = [int(p) for p in pids]  # type: ignore[call-overload]
        results.put(("running", rank, os.getpid()))
        out = target(exchange)
        if rank == 0:
            # the tensors' bytes travel in the message (the queue's own pickler would share
            # their memory, gone when this process ends)
            buffer = io.BytesIO()
            torch.save(out, buffer)
            results.put(("ok", rank, buffer.getvalue()))
        dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 (reported to the parent, which stops the run)
        results.put(("failed", rank, f"{_failure(e)}\n{traceback.format_exc()}"))
        raise SystemExit(1) from None


def worker_cpus(workers: int) -> list[int | None]:
    """The CPU each of ``workers`` workers is pinned to: the ``r``-th CPU this process may run
    on, when it may run on at least ``workers`` (else None each: the workers share the CPUs
    as the system schedules them). A pinned worker is not moved between cores mid-step, so
    the workers reach each collective closer together (less waiting).

    >>> cpus = worker_cpus(1)
    >>> len(cpus), cpus[0] in os.sched_getaffinity(0)
    (1, True)
    """
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < workers:
        return [None] * workers
    return [allowed[r] for r in range(workers)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(target: Callable[[Exchange], T], workers: int, *, returns: Sequence[type] = (),
           timeout: float = DEFAULT_TIMEOUT,
           on_start: Callable[[list[int]], None] | None = None,
           signal_to_pass: Callable[[], int | None] | None = None, pin: bool = True) -> T:
    """Run ``target(exchange)`` in ``workers`` processes on this machine (``spawn``; joined by
    ``torch.distributed`` with gloo; each in a process group of its own) and return rank 0's
    result. ``target`` must pickle (a module-level function, a :class:`Named`); its result
    travels as ``torch.save`` bytes read back weights-only: tensors, plain containers and
    values, and instances of the classes in ``returns`` (nothing else is rebuilt). ``on_start``
    is called with the workers' process ids once every worker has joined. ``signal_to_pass``
    is asked while they run; the first signal number it answers is sent to every worker (a
    stop request the parent received). ``timeout``: seconds a collective may wait for a
    worker. ``pin``: where this process may run on at least ``workers`` CPUs, worker ``r``
    runs on the ``r``-th of them only (:func:`worker_cpus`). Raises :class:`WorkerFailed`,
    naming the worker, when one fails or dies (the others are stopped)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    cpus = worker_cpus(workers) if pin else [None] * workers
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs: list[BaseProcess] = [
        ctx.Process(target=_worker, args=(target, r, workers, address, results, timeout,
                                          cpus[r]), name=f"torchstream-worker-{r}")
        for r in range(workers)]
    for p in procs:
        p.start()
    answered = False
    try:
        out: T = _wait(procs, results, returns, on_start, signal_to_pass)
        answered = True
        return out
    finally:
        if answered:  # rank 0 has answered: the others end on their own
            for p in procs:
                p.join(timeout=30)
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGKILL)
                p.join()


def _wait(procs: list[BaseProcess], results: Any, returns: Sequence[type],
          on_start: Callable[[list[int]], None] | None,
          signal_to_pass: Callable[[], int | None] | None) -> Any:
    """Rank 0's result; a :class:`WorkerFailed` naming the worker that died or failed first (a
    worker that died is named before the errors its peers then met in a collective)."""
    running: dict[int, int] = {}
    passed = False
    while True:
        signum = None if passed or signal_to_pass is None else signal_to_pass()
        if signum is not None:
            passed = True
            for p in procs:
                if p.pid is not None and p.exitcode is None:
                    os.kill(p.pid, signum)
        try:
            status, rank, payload = results.get(timeout=0.2)
        except queue.Empty:
            dead = _dead(procs)
            if dead:
                raise WorkerFailed(dead) from None
            if procs[0].exitcode == 0:  # rank 0 ended without a result (cannot happen)
                raise WorkerFailed("worker 0 ended without its result") from None
            continue
        if status == "running":
            running[rank] = int(payload)
            if len(running) == len(procs) and on_start is not None:
                on_start([running[r] for r in range(len(procs))])
        elif status == "ok":
            return read_result(payload, returns)
        else:
            deadline = time.monotonic() + 2.0  # a peer's death makes the others' errors
            while time.monotonic() < deadline:
                dead = _dead(procs, signalled=True)
                if dead:
                    raise WorkerFailed(dead) from None
                time.sleep(0.05)
            first, _, details = str(payload).partition("\n")
            raise WorkerFailed(f"worker {rank} (pid {procs[rank].pid}) failed: {first}; the "
                               "run is stopped", details)


def read_result(payload: bytes, returns: Sequence[type] = ()) -> Any:
    """A worker's result from its ``torch.save`` bytes, read weights-only: tensors, plain
    containers and values, and instances of the classes in ``returns``; any other object is
    refused (``pickle.UnpicklingError``), so reading it runs no code."""
    with torch.serialization.safe_globals(list(returns)):
        return torch.load(io.BytesIO(payload), weights_only=True)


def _dead(procs: list[BaseProcess], *, signalled: bool = False) -> str | None:
    """A message naming the first worker that ended with an error (``signalled``: killed by a
    signal), or None."""
    for rank, p in enumerate(procs):
        code = p.exitcode
        if code is not None and (code < 0 if signalled else code != 0):
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
            return f"worker {rank} (pid {p.pid}) died ({how}); the run is stopped"
    return None


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
                      pin: bool = True) -> ParallelResult:
    """Learn and explain one stream with ``workers`` processes (see the module docstring):
    global batches of ``workers * batch_size`` rows, ``steps`` of them (None: the rest of the
    stream). ``build(rank)`` makes each worker's :class:`WorkerSetup` (picklable: the workers
    are started with ``spawn``). ``checkpoint``: written by rank 0 every ``checkpoint_every``
    global batches and at the end; ``resume``: a checkpoint of the same run, with the same
    ``workers``. ``threads``: torch CPU threads per worker. ``on_start`` is called with the
    workers' process ids once every worker has joined. ``timeout``: seconds a collective may
    wait for a worker. ``pin``: each worker on a CPU of its own (:func:`launch`). Raises
    :class:`WorkerFailed`, naming the worker, when one fails or dies (the others are
    stopped)."""
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    if checkpoint_every is not None and checkpoint is None:
        raise ValueError("checkpoint_every needs a checkpoint path")
    result = launch(
        _RankCall(build, batch_size, steps, checkpoint, checkpoint_every, resume, threads),
        workers, returns=(ParallelResult,), timeout=timeout, on_start=on_start, pin=pin)
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
                  explainers: int = 1, *, contribution_bytes: int = 8,
                  n_outputs: int = 2) -> dict[str, float]:
    """Bytes one worker sends per global batch: its float32 gradients (a ring ``all_reduce`` of
    ``n_params`` values sends ``2 (N - 1) / N`` of them); for each explainer its rows'
    contributions (``all_gather`` of ``batch_size x n_features`` values of
    ``contribution_bytes``, 8: the explainers accumulate in float64) to each of the ``N - 1``
    others; its rows' predictions (``batch_size x n_outputs`` float32) likewise.

    >>> c = cost_per_step(n_params=30_000, n_features=100, batch_size=64, workers=2)
    >>> int(c["gradients"]), int(c["contributions"]), int(c["predictions"])
    (120000, 51200, 512)
    """
    ring = 2 * (workers - 1) / workers if workers > 1 else 0.0
    return {"gradients": 4.0 * n_params * ring,
            "contributions": float(contribution_bytes * batch_size * n_features * explainers
                                   * (workers - 1)),
            "predictions": float(4 * batch_size * n_outputs * (workers - 1))}
