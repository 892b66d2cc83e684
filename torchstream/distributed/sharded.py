"""One worker's replica of the model and its explainers in a data-parallel run
(:mod:`torchstream.distributed.data_parallel`): :class:`ShardedLearner` learns the worker's rows
with every worker's gradients summed, :func:`join_explainer` folds every worker's
contributions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from torchstream.distributed.exchange import Exchange, Explainer, WorkerRows
from torchstream.evaluate.identity import settings
from torchstream.evaluate.strategies import derived_seed
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.explain.isage import IncrementalSAGE
from torchstream.learners.online import OnlineLearner
from torchstream.learners.scaling import RunningStandardizer
from torchstream.learners.training import StepGradients
from torchstream.typing import BatchView

__all__ = ["ShardedLearner", "join_explainer"]


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


Statistics = tuple[torch.Tensor, torch.Tensor, int]


@contextmanager
def _ahead(pairs: Sequence[tuple[RunningStandardizer | None, torch.Tensor]]
           ) -> Iterator[list[Statistics]]:
    """Inside: each scaler updated by its values (the global batch's, as the step will update
    it) and its ``update`` doing nothing; outside: as it was before. Yields each scaler's
    statistics inside (the step sets them: :meth:`RunningStandardizer.restore`)."""
    held = [(s, v) for s, v in pairs if s is not None]
    before = [s.snapshot() for s, _ in held]
    try:
        after: list[Statistics] = []
        for s, v in held:
            s.update(v)
            after.append(s.snapshot())
        with _frozen(*(s for s, _ in held)):
            yield after
    finally:
        for (s, _), snap in zip(held, before):
            s.restore(snap)


def _check_no_running_statistics(module: torch.nn.Module | None) -> None:
    """A ``ValueError`` naming the first layer that keeps running statistics of the rows it
    sees in training (batch normalisation): each replica would keep its own rows' and part."""
    for name, m in (module.named_modules() if module is not None else ()):
        if isinstance(getattr(m, "running_mean", None), torch.Tensor):  # batch norm's buffer
            raise ValueError(
                f"the model's layer {name!r} ({type(m).__name__}) keeps running statistics of "
                "the rows it trains on: each worker's replica would keep its own rows' and the "
                "replicas would part; with workers use a model without them (a LayerNorm "
                "keeps none, or track_running_stats=False)")


class ShardedLearner:
    """One worker's replica of an :class:`~torchstream.learners.OnlineLearner` trained by
    every worker on one stream (the :class:`~torchstream.base.Learner` contract for the
    runner; anything else is the replica's own).

    Called on a global batch that :class:`ParallelPrequential` has announced (its test, with
    the batch's labels in the exchange), it predicts this worker's rows, has the joined
    explainers explain them (their plug-in calls of the step then answer what they answered
    here) and computes this worker's half of the step — the gradients of its rows' loss on the
    scalers updated by the whole global batch, as :meth:`learn` will take them (nothing changes
    the model in between) — so that the predictions, the explainers' contributions and the
    gradients are exchanged at the step's one synchronisation point
    (:meth:`Exchange.synchronise`); it returns every worker's predictions in row order. Any
    other call (an explainer's, a detector's, the drift report's) is the replica's own
    prediction. :meth:`learn` takes the global batch just tested: the scalers take its
    statistics and the replica steps with every worker's gradients summed. The first test
    broadcasts rank 0's weights, so every replica starts equal.

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
    >>> learner.register_classes([0, 1]); learner.arm(X); learner.exchange.labels = (y, 0)
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
        self._loss = float("nan")
        self._step_no = 0
        #: The tested global batch's step, waiting for :meth:`learn`: this worker's half of it,
        #: every worker's gradients summed, the scalers' statistics after the batch.
        self._tested: _Tested | None = None

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
        labels, ex.labels = ex.labels, None
        if labels is None:
            raise RuntimeError("a worker tests a global batch with its labels (set by "
                               "ParallelPrequential): its step's gradients travel with the test")
        ex.start(X)
        learner = self.learner
        X = learner._check_X(X)  # a bad value is named by its row of the stream
        y, start = labels
        self._tested = None
        if not self._joined:
            with torch.no_grad():
                learner(X[:1])  # builds the module (seeded alike on every worker)
            _check_no_running_statistics(learner.module)
            self._broadcast_weights()
            self._joined = True
        rows = ex.own_rows()
        out = learner(X[rows])
        predictions: list[torch.Tensor] = []
        ex.queue(out[: ex.local_n], "predictions", predictions.append)
        if ex.explainers:  # each explainer's contributions wait for the exchange below
            local = WorkerRows(self._step_no, start + rows.start, X[rows], y[rows], out, self)
            with torch.enable_grad():
                for i, e in enumerate(ex.explainers):
                    ex.explained[i] = e.on_batch(local)
        # the step's gradients, as learn() will take them: the model is not changed before
        target = learner._check_y(y, X.shape[0])  # a bad label is named by its row
        scalers = [(learner.input_scaler, X), (learner.target_scaler, target.view(-1, 1))]
        with _ahead(scalers) as after, torch.enable_grad():
            half = learner._gradients(X[rows], target[rows])
        weights = learner._weights
        share = ex.local_n / ex.n
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in weights])
        # a worker without rows (a short last batch) computed on a stand-in row: weight 0, and
        # no value of it reaches the sums (not even a NaN of a diverged model)
        flat = flat * share if ex.local_n else torch.zeros_like(flat)
        loss = float(half.loss) * share if ex.local_n else 0.0
        stop = ex.stop is not None and ex.stop()
        *summed, riders = ex.synchronise(flat, [loss, float(stop)]).split(
            [p.numel() for p in weights] + [2])
        grads = [g.view_as(p).to(p.dtype) for g, p in zip(summed, weights)]
        loss, stops = riders.tolist()
        self._tested = _Tested(half, grads, after, loss, stops > 0)
        return predictions[0]

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        tested, self._tested = self._tested, None
        if tested is None or X is not self.exchange.X:
            raise RuntimeError("a worker's learner learns each global batch it has tested, "
                               "once (no label delay, no pre-training, no second pass)")
        learner = self.learner
        stats = iter(tested.statistics)
        for scaler in (learner.input_scaler, learner.target_scaler):
            if scaler is not None:
                scaler.restore(next(stats))
        for p, g in zip(learner._weights, tested.gradients):
            p.grad = g
        learner._last_loss = learner._descend(tested.half, X.shape[0], None)
        self._loss = tested.loss
        self.exchange.stop_agreed = tested.stop

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

    def fold_all(gathered: torch.Tensor) -> None:
        del smoother.update  # the fold may call update on blocks of the rows: the class's own
        try:
            fold(smoother, gathered)
        finally:
            smoother.update = update  # type: ignore[method-assign]

    def update(values: torch.Tensor) -> None:  # folded once every worker's have come
        exchange.queue(values[: exchange.local_n], "contributions", fold_all)

    smoother.update = update  # type: ignore[method-assign]
    storage = explainer.storage
    for name in ("update", "_update_finite"):
        own = getattr(storage, name, None)
        if own is not None:
            setattr(storage, name, _global_rows(own, exchange))
    explain = explainer.on_batch
    index = len(exchange.explainers)

    def on_batch(batch: BatchView) -> object:
        if isinstance(batch, WorkerRows):  # the test of a global batch: this worker's rows
            return explain(batch)
        if index not in exchange.explained:
            raise RuntimeError(f"{explainer.name}: a joined explainer explains a worker's rows "
                               "as the learner tests them (ShardedLearner)")
        return exchange.explained.pop(index)

    explainer.on_batch = on_batch  # type: ignore[method-assign, assignment]
    exchange.explainers.append(explainer)
    return explainer


@dataclass(frozen=True)
class _Tested:
    """A global batch tested: this worker's half of its step (:class:`StepGradients`), every
    worker's ``gradients`` summed (one per parameter), the scalers' ``statistics`` after the
    batch, the batch's mean ``loss`` and whether a worker asked to ``stop``."""

    half: StepGradients
    gradients: list[torch.Tensor]
    statistics: list[Statistics]
    loss: float
    stop: bool


def _global_rows(update: Callable[[torch.Tensor], None], exchange: Exchange
                 ) -> Callable[[torch.Tensor], None]:
    def rows(X: torch.Tensor) -> None:
        assert exchange.X is not None
        update(exchange.X.to(X.device, X.dtype))
    return rows
