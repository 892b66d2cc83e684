"""A river estimator with the tensor learner API, so it runs in the evaluation loop."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch
from river import base as river_base

from torchstream.base import LearnerBase
from torchstream.checkpoint import restore_object
from torchstream.learners.adapters import RiverModelFn
from torchstream.schema import Schema
from torchstream.streams.base import Stream

__all__ = ["RiverLearner"]


class RiverLearner(LearnerBase):
    """Wrap a river classifier or regressor as ``learner(X) -> predictions`` and
    ``learner.learn(X, y)``.

    Tensor rows are decoded to dicts through ``schema``; a classifier learns the stream's class
    *indices* (``0..k-1``, the labels the runner passes) and its probabilities come back in that
    column order. Rows are learned one by one (river's ``learn_one``), in order.

    Evaluated by the runner at ``batch_size=1`` it makes river's own test-then-train
    predictions (``river.evaluate.progressive_val_score``), row for row. One difference in the
    counting: on the first row the model is empty; river skips that row (no prediction) while
    the runner counts it (uniform probabilities, class 0), so ``accuracy * n`` of the runner
    equals ``accuracy * (n - 1)`` of river.

    Parameters
    ----------
    model
        A river classifier or regressor (trained here).
    schema
        The stream's schema (``stream.schema``).
    n_classes
        Width of the probability output of a classifier (default 2).
    dtype
        The dtype of the batches the runner makes for the model (``learner.dtype``): float64
        by default, so river sees the stream's values exactly as a river loop would (float32
        rounding changes the splits of a tree and the alarms of a detector).

    >>> from river import tree
    >>> from torchstream.streams import SEA
    >>> stream = SEA(seed=1, n_samples=300)
    >>> learner = RiverLearner.for_stream(tree.HoeffdingTreeClassifier(), stream)
    >>> for X, y in stream.batches(100):
    ...     learner.learn(X, y)
    >>> learner(X[:2]).shape, learner.task
    (torch.Size([2, 2]), 'classification')
    >>> learner.clone().model.summary["n_nodes"], learner.model.summary["n_nodes"] > 0
    (None, True)
    """

    def __init__(self, model: Any, schema: Schema, *, n_classes: int = 2,
                 dtype: torch.dtype = torch.float64) -> None:
        if not hasattr(model, "learn_one"):
            raise TypeError(f"{type(model).__name__} is not a river estimator (no learn_one)")
        self.model = model
        self.schema = schema
        classifier = isinstance(model, river_base.Classifier)
        self.task = "classification" if classifier else "regression"
        if self.task == "classification" and (not isinstance(n_classes, int) or n_classes < 2):
            raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
        self.n_classes = n_classes
        self.dtype = dtype
        self._fn = self._model_fn()

    @classmethod
    def for_stream(cls, model: Any, stream: Stream) -> RiverLearner:
        """A learner for ``stream``: its schema and (for a classifier) its number of classes."""
        classes = getattr(stream, "classes", None)
        return cls(model, stream.schema, n_classes=max(2, len(classes or ())))

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        """Check that the probability output has a column for each of the stream's
        ``classes`` (class ``i`` is column ``i``)."""
        if self.task == "classification" and len(classes) > self.n_classes:
            raise ValueError(f"the stream has {len(classes)} classes {classes!r} but this "
                             f"RiverLearner was built with n_classes={self.n_classes}")

    def _model_fn(self) -> RiverModelFn:
        if self.task == "classification":
            return RiverModelFn(self.model, self.schema, output="proba",
                                classes=list(range(self.n_classes)))
        return RiverModelFn(self.model, self.schema, output="value")

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        return self._fn(X)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}")
        rows = self.schema.decode(X)
        if self.task == "classification":
            labels: list[Any] = [int(v) for v in y.tolist()]
            bad = [v for v in labels if not 0 <= v < self.n_classes]
            if bad:
                raise ValueError(f"class index {bad[0]} outside 0..{self.n_classes - 1}")
        else:
            labels = [float(v) for v in y.tolist()]
        for row, label in zip(rows, labels):
            self.model.learn_one(row, label)

    def state_dict(self) -> dict[str, object]:
        """The river model itself (a copy): checkpoint files store it as a pickled part, loaded
        only from a trusted file (:mod:`torchstream.checkpoint`)."""
        return {"model": copy.deepcopy(self.model), "n_classes": self.n_classes}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model = restore_object(state["model"], "the river model")
        self.n_classes = state["n_classes"]
        self._fn = self._model_fn()

    def __repr__(self) -> str:
        return f"RiverLearner({self.model!r})"
