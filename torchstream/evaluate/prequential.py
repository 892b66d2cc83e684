"""Prequential (test-then-train) evaluation of one learner: the default use of the runner.

Pseudocode of one run::

    for step, (X, y) in enumerate(stream.batches(B)):
        X = plugin.transform(X, step) for each plug-in that has one
        y_pred = learner(X)                    # test: the model before it sees y
        metrics.update(y, y_pred)
        scalars = plugin.on_batch(Batch(step, start, X, y, y_pred, learner)) for each plug-in
        record = StepRecord(...)               # alarms; every log_every steps metrics,
                                               # importance, scalars
        plugin.on_record(record) for each plug-in
        learner.learn(X, y)                    # learn (record.loss: its loss)
        sink.log_step(record)
        every checkpoint_every steps: torch.save(runner.state_dict(), checkpoint_path)

A run can be stopped after any step and resumed from its ``state_dict()`` with identical
results: the state holds the learner, the metrics, the plug-ins and sinks that have state,
the stream position and torch's global random state. Other strategies (periodic holdout,
distributed k-fold), label delay, pre-training and several predictors: see
:class:`~torchstream.evaluate.runner.Evaluator`, the loop this class runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torchstream.base import Learner
from torchstream.evaluate.result import RunResult
from torchstream.evaluate.runner import Evaluator
from torchstream.streams.base import Stream

__all__ = ["Prequential", "RunResult"]


class Prequential(Evaluator):
    """Test-then-train evaluation of an online learner on a stream.

    Parameters
    ----------
    learner
        An :class:`~torchstream.learners.OnlineLearner` (anything with ``__call__(X)`` returning
        probabilities / values and ``learn(X, y)``).
    stream
        A :class:`~torchstream.streams.Stream`.
    batch_size
        Rows per step (B = 1 is the classic per-row protocol).
    metrics
        Metric objects; default: the task's standard metrics, cumulative and over ``window`` rows.
    plugins
        Plug-ins (see :mod:`torchstream.evaluate.plugins`), called in order.
    sinks
        Sinks (:mod:`torchstream.sinks`) receiving the config once and scalars every
        ``log_every`` steps.
    figure_every
        Every this many steps, the plug-ins' figures go to the sinks' ``log_figure`` (None:
        never); drawn by ``figures`` (e.g. :func:`torchstream.viz.figures.plugin_figures`;
        None: each plug-in's own ``figures()`` hook).
    progress
        Show a progress bar (tqdm).
    **kwargs
        ``figures``, ``n_pretrain``, ``label_delay``, ``record_steps``, ``records_path``,
        ``max_records``, ``config``, ``seed``: as :class:`~torchstream.evaluate.runner.Evaluator`.

    >>> from torchstream.learners import OnlineClassifier
    >>> from torchstream.models import MLP
    >>> from torchstream.streams import agrawal_drift
    >>> stream = agrawal_drift(n_samples=2000, position=1000)
    >>> learner = OnlineClassifier(lambda d, k: MLP(d, k), lr=0.01, scale_inputs=True, seed=0)
    >>> result = Prequential(learner, stream, batch_size=16).run()
    >>> result.n_rows, result.n_steps, round(result.metrics["accuracy"], 3)
    (2000, 125, 0.692)
    """

    def __init__(
        self,
        learner: Learner | Mapping[str, Learner],
        stream: Stream,
        **kwargs: Any,  # Evaluator's keywords, each with its own type
    ) -> None:
        if "strategy" in kwargs:
            raise TypeError("Prequential is the test-then-train strategy; use Evaluator("
                            "strategy=...) for another")
        super().__init__(learner, stream, strategy="prequential", **kwargs)
