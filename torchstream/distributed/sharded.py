"""One worker's replica of the model and its explainers in a data-parallel run
(:mod:`torchstream.distributed.data_parallel`): :class:`ShardedLearner` learns the worker's rows
with every worker's gradients summed, :func:`join_explainer` folds every worker's
contributions."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
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
            local = WorkerRows(self._step_no, start + rows.start, X[rows], y[rows], out, self)
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
        if isinstance(batch, WorkerRows):  # the test of a global batch: this worker's rows
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
