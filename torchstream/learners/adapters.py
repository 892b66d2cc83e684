"""Adapters that turn river and scikit-learn models into a :data:`~torchstream.typing.ModelFn`.

Explainers call a ``ModelFn`` with a tensor of rows ``[n, d]`` and expect ``[n, k]`` class
probabilities (classifiers) or ``[n]`` values (regressors) back, on the input's device and
dtype. Torch modules and :class:`~torchstream.learners.OnlineLearner` already are ``ModelFn``;
:func:`as_model_fn` wraps everything else.

>>> from river import linear_model
>>> from torchstream import Schema
>>> model = linear_model.LogisticRegression()
>>> for x, y in [({"a": 1.0, "b": 0.0}, True), ({"a": 0.0, "b": 1.0}, False)] * 20:
...     model.learn_one(x, y)
>>> fn = as_model_fn(model, schema=Schema(["a", "b"]), classes=[False, True])
>>> fn(torch.tensor([[1.0, 0.0], [0.0, 1.0]])).argmax(1).tolist()
[1, 0]
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from torchstream.schema import Schema
from torchstream.typing import ModelFn

__all__ = ["RiverModelFn", "SklearnModelFn", "as_model_fn"]

Output = Literal["auto", "proba", "value"]


def _to_tensor(values: Any, like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(np.array(values, dtype=np.float64)).to(like.device, like.dtype)


class RiverModelFn:
    """A river model as a ``ModelFn``: rows are decoded to dicts through ``schema``.

    Parameters
    ----------
    model
        A river classifier or regressor (never trained here).
    schema
        How the tensor columns map back to the model's features.
    output
        ``"proba"`` (classifiers: ``predict_proba``), ``"value"`` (``predict``), or ``"auto"``.
    classes
        Column order of the probabilities. Default: the classes the model has reported so far,
        sorted; fix them for a stable output width.
    """

    def __init__(
        self,
        model: Any,
        schema: Schema,
        *,
        output: Output = "auto",
        classes: Sequence[Hashable] | None = None,
    ) -> None:
        from river import base

        if output == "auto":
            output = "proba" if isinstance(model, base.Classifier) else "value"
        if output not in ("proba", "value"):
            raise ValueError(f"output must be 'auto', 'proba' or 'value', got {output!r}")
        self.model, self.schema, self.output = model, schema, output
        self.classes = list(classes) if classes is not None else None

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        rows = self.schema.decode(X)
        if self.output == "value":
            many = getattr(self.model, "predict_many", None)
            if many is not None:
                import pandas as pd

                try:
                    return _to_tensor(many(pd.DataFrame(rows)).to_numpy(), X)
                except NotImplementedError:
                    pass
            return _to_tensor([self.model.predict_one(r) for r in rows], X)
        probas = [self.model.predict_proba_one(r) for r in rows]
        if self.classes is None:
            seen = {c for p in probas for c in p}
            try:
                self.classes = sorted(seen)
            except TypeError:
                self.classes = list(seen)
        out = [[p.get(c, 0.0) for c in self.classes] for p in probas]
        return _to_tensor(out, X).reshape(len(rows), len(self.classes))


class SklearnModelFn:
    """A fitted scikit-learn estimator as a ``ModelFn`` (``predict_proba`` or ``predict``)."""

    def __init__(self, estimator: Any, *, output: Output = "auto") -> None:
        if output == "auto":
            output = "proba" if hasattr(estimator, "predict_proba") else "value"
        if output not in ("proba", "value"):
            raise ValueError(f"output must be 'auto', 'proba' or 'value', got {output!r}")
        if output == "proba" and not hasattr(estimator, "predict_proba"):
            raise ValueError(f"{type(estimator).__name__} has no predict_proba")
        self.estimator, self.output = estimator, output

    def __call__(self, X: torch.Tensor) -> torch.Tensor:
        Xn = X.detach().cpu().numpy()
        if self.output == "proba":
            return _to_tensor(self.estimator.predict_proba(Xn), X)
        return _to_tensor(self.estimator.predict(Xn), X).reshape(-1)


def as_model_fn(
    model: Any,
    *,
    schema: Schema | None = None,
    output: Output = "auto",
    classes: Sequence[Hashable] | None = None,
) -> ModelFn:
    """Torch modules, learners and plain callables pass through; river models (``schema``
    needed) and scikit-learn estimators are wrapped."""
    if isinstance(model, nn.Module) or hasattr(model, "learn") and callable(model):
        return model
    if hasattr(model, "learn_one") and (
        hasattr(model, "predict_proba_one") or hasattr(model, "predict_one")
    ):
        if schema is None:
            raise ValueError("a river model needs schema= to turn tensor rows back into dicts")
        return RiverModelFn(model, schema, output=output, classes=classes)
    if hasattr(model, "fit") and (hasattr(model, "predict") or hasattr(model, "predict_proba")):
        return SklearnModelFn(model, output=output)
    if callable(model):
        return model
    raise TypeError(f"cannot make a ModelFn from {type(model).__name__}")
