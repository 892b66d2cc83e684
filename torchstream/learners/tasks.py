"""The two task classes of :class:`~torchstream.learners.online.OnlineLearner`, and
:func:`online_learner`, which builds the one a task names."""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from river import base as river_base
from torch import nn

from torchstream.base import new_classes
from torchstream.learners.network import (
    ClassProbabilities,
    ProbitLink,
    RegressionOutput,
)
from torchstream.learners.online import ModuleFactory, OnlineLearner
from torchstream.learners.training import grow_output_layer
from torchstream.models.specs import ModelSpec
from torchstream.schema import match_key

__all__ = ["MAX_IMPLIED_CLASSES", "TASKS", "OnlineClassifier", "OnlineRegressor", "online_learner"]

#: The most classes one batch of class indices may add without holding a row of each: the
#: index ``k`` makes ``k + 1`` classes (an output unit each), and only so many may go unseen.
MAX_IMPLIED_CLASSES = 1000


def _is_missing_label(label: object) -> bool:
    """``None``, NaN (Python or numpy) and pandas' ``NA`` / ``NaT``."""
    if label is None:
        return True
    try:
        return bool(label != label)
    except (TypeError, ValueError):  # pandas.NA has no truth value
        return True


def _is_fraction(label: object) -> bool:
    """A real number with a fractional part (``0.5``; not ``1.0``, not an integer)."""
    return (
        isinstance(label, numbers.Real)
        and not isinstance(label, numbers.Integral)
        and not float(label).is_integer()
    )


def _is_integral(label: object) -> bool:
    """A number without a fractional part (``1``, ``np.int64(1)``, ``1.0``; not ``True``)."""
    return (
        isinstance(label, numbers.Real)
        and not isinstance(label, (bool, np.bool_))
        and math.isfinite(label)
        and float(label).is_integer()
    )


def _normalised(p: torch.Tensor) -> torch.Tensor:
    """Rows of probabilities in float64, rescaled to sum to 1 (a float32 softmax sums to 1
    only within about 1e-7, which ``math.isclose`` at its default 1e-9 rejects)."""
    p = p.double()
    return p / p.sum(1, keepdim=True)


def _stream_row(learner: OnlineLearner, i: int) -> str:
    return f"row {learner.n_samples_seen + i:,}"


class OnlineClassifier(OnlineLearner, river_base.MiniBatchClassifier):
    """An :class:`OnlineLearner` for classification (binary or multiclass).

    >>> from functools import partial
    >>> from river import datasets, evaluate, metrics
    >>> from torchstream.models import MLP
    >>> model = OnlineClassifier(partial(MLP, hidden=(32,)), lr=0.01, seed=1)
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 86.47%
    """

    task = "classification"

    def _setup(self, module: torch.nn.Module) -> None:
        super()._setup(module)
        if hasattr(self._train_loss, "link"):
            self._train_loss.link = "probit" if getattr(module, "link", None) == "probit" else None
        self._grow_if_needed()

    # ------------------------------------------------------------------ classes
    def _n_outputs(self) -> int:
        assert self.module is not None
        n = getattr(self.module, "n_outputs", None)
        layer = getattr(self.module, "output_layer", None)
        if n is None and layer is not None:
            n = layer.out_features
        return int(n) if n is not None else max(len(self.classes_), 2)

    def _grow_if_needed(self) -> None:
        if self.module is None:
            return
        capacity = 2 if self.link is not None else self._n_outputs()
        if len(self.classes_) <= capacity:
            return
        if self.link is not None:
            raise ValueError(
                f"a binary model (one output unit) cannot learn a third class; classes seen: "
                f"{self.classes_!r}"
            )
        old = self.optimizer
        self._last_forward = None
        grow_output_layer(self.module, len(self.classes_))
        if self._initial is not None:
            grow_output_layer(self._initial, len(self.classes_))
        self._make_optimizer()
        if old is not None:  # keep the optimiser state of the unchanged parameters
            for p in self.module.parameters():
                if p in old.state:
                    self.optimizer.state[p] = old.state[p]  # type: ignore[union-attr]

    def _check_y(self, y: Any, n: int) -> torch.Tensor:
        try:
            y = torch.as_tensor(y, device=self.device)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ValueError(f"y must hold class indices (integers): {e}") from None
        if y.dim() != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape [{n}], got {list(y.shape)}")
        if y.dtype.is_complex:
            raise ValueError("y must hold class indices (integers), got complex numbers")
        if not n:
            return y.long()
        # one host read for the three facts: any non-integer label, the smallest, the largest
        if y.dtype.is_floating_point:
            bad = ~torch.isfinite(y) | (y != y.round())
            codes = torch.where(bad, 0, y).long()
            n_bad = bad.sum()
        else:
            codes = y.long()
            n_bad = torch.zeros((), dtype=torch.long, device=y.device)
        n_bad_, low, top = torch.stack([n_bad, *torch.aminmax(codes)]).tolist()
        if n_bad_:
            i = int(bad.nonzero()[0, 0])
            raise ValueError(
                f"y[{i}] ({_stream_row(self, i)}): {y[i].item()} is not a class index; "
                f"classification targets are integers (a missing label cannot be learned)"
            )
        y = codes
        if low < 0:
            i = int(y.argmin())
            raise ValueError(
                f"y[{i}] ({_stream_row(self, i)}): class index {int(y[i])}; class indices "
                f"must be >= 0"
            )
        if top >= len(self.classes_):
            if self._fixed_classes:
                i = int(y.argmax())
                raise ValueError(
                    f"y[{i}] ({_stream_row(self, i)}): class index {top} but only "
                    f"{len(self.classes_)} classes were declared"
                )
            self._check_implied_classes(y, top)
            for c in range(len(self.classes_), top + 1):
                self._add_class(c)
            self._grow_if_needed()
        return y

    def _check_implied_classes(self, y: torch.Tensor, top: int) -> None:
        """Class indices up to ``top`` make ``top + 1`` classes, each an output unit: those the
        batch ``y`` does not hold are implied. More than :data:`MAX_IMPLIED_CLASSES` implied
        ones (a label such as ``10**6`` read as an index) are an error before anything grows."""
        known = len(self.classes_)
        seen = int(torch.unique(y[y >= known]).numel())
        implied = top + 1 - known - seen
        if implied > MAX_IMPLIED_CLASSES:
            i = int(y.argmax())
            raise ValueError(
                f"y[{i}] ({_stream_row(self, i)}): class index {top:,} would make {top + 1:,} "
                f"classes (an output unit each), {implied:,} of them never seen as a label (at "
                f"most {MAX_IMPLIED_CLASSES:,} may be implied); y holds indices 0..k-1 into "
                f"classes_: map the labels to indices, declare the classes (classes=...), or "
                f"learn with learn_one / learn_many, which take any labels"
            )

    def _targets_from_labels(self, labels: Sequence[Any], first_row: int) -> torch.Tensor:
        codes = [self._codes.get(match_key(lab)) for lab in labels]
        if None in codes:
            self._add_classes(labels, codes, first_row)
        return torch.tensor(codes, dtype=torch.long, device=self.device)

    def _add_classes(self, labels: Sequence[Any], codes: list[int | None], first_row: int) -> None:
        """Give the labels without a code (``None`` in ``codes``) new classes, in order of
        appearance; every one is checked first, so a bad label changes nothing."""
        fresh: dict[tuple[bool, Hashable], Any] = {}
        for i, (lab, code) in enumerate(zip(labels, codes)):
            if code is None and match_key(lab) not in fresh:
                self._check_new_label(lab, first_row + i, [*self.classes_, *fresh.values()])
                fresh[match_key(lab)] = lab
        for lab in fresh.values():
            self._add_class(lab)
        for i, lab in enumerate(labels):
            if codes[i] is None:
                codes[i] = self._codes[match_key(lab)]
        self._grow_if_needed()

    @staticmethod
    def _check_new_label(label: Any, row: int, classes: Sequence[Hashable]) -> None:
        """A label never seen before may add a class unless it is missing, or has a fractional
        part while the ``classes`` so far are integers (at least one integral number, no
        fractional one)."""
        if _is_missing_label(label):
            raise ValueError(f"row {row:,}: the label is missing ({label!r}); it cannot be learned")
        if (
            _is_fraction(label)
            and any(_is_integral(c) for c in classes)
            and not any(_is_fraction(c) for c in classes)
        ):
            shown = ", ".join(repr(c) for c in classes[:10])
            raise ValueError(
                f"row {row:,}: label {label!r} is not an integer, but the classes are integers "
                f"({shown}{', ...' if len(classes) > 10 else ''}); a regression target? "
                f"(fractional classes: declare them, classes=[...])"
            )

    def register_classes(self, classes: Sequence[Hashable]) -> None:
        """Take the stream's ``classes`` in its order, so that class indices mean the same in
        both: the classes known so far must be their beginning; the others are added (the
        output layer grows)."""
        for c in new_classes(self.classes_, classes, "learner"):
            self._add_class(c)
        self._grow_if_needed()

    # ------------------------------------------------------------------ outputs
    def _output_module(self) -> torch.nn.Module:
        link = None
        if self.link is not None:
            link = ProbitLink() if self.link is torch.special.ndtr else torch.nn.Sigmoid()
        return ClassProbabilities(len(self.classes_), link)

    def _outputs(self, out: torch.Tensor) -> torch.Tensor:
        if self.link is not None:
            p = self.link(out.reshape(-1))
            return torch.stack([1 - p, p], dim=1)
        m, k = len(self.classes_), out.shape[1]
        if 0 < m < k:  # outputs of classes not seen yet get probability 0
            return torch.cat([out[:, :m].softmax(1), out.new_zeros(out.shape[0], k - m)], dim=1)
        return out.softmax(1)

    def predict_proba(self, X: torch.Tensor) -> torch.Tensor:
        """Class probabilities ``[B, k]`` (columns follow ``classes_``)."""
        return self._infer(self._check_X(X))

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        """Most probable class index ``[B]``."""
        return self.predict_proba(X).argmax(1)

    def _labels_from_tensor(self, out: torch.Tensor) -> list[Any]:
        m = len(self.classes_)
        if not m:
            return [None] * out.shape[0]
        return [self.classes_[i] for i in out[:, :m].argmax(1).tolist()]

    def predict_proba_one(self, x: Mapping[Hashable, Any]) -> dict[Hashable, float]:
        if not self.classes_:
            return {}
        p = _normalised(self._infer_one(self._encode_one(x))[:, : len(self.classes_)])
        return dict(zip(self.classes_, p[0].tolist()))

    def predict_proba_many(
        self, X: pd.DataFrame | Sequence[Mapping[Hashable, Any]]
    ) -> pd.DataFrame:
        p = _normalised(self._infer(self._encode_many(X))[:, : len(self.classes_)]).cpu().numpy()
        return pd.DataFrame(p, columns=list(self.classes_), index=getattr(X, "index", None))


class OnlineRegressor(OnlineLearner, river_base.MiniBatchRegressor):
    """An :class:`OnlineLearner` for regression (one output unit).

    >>> from river import datasets, evaluate, metrics
    >>> from torchstream.models import MLP
    >>> model = OnlineRegressor(MLP, lr=0.01, scale_inputs=True, seed=1)
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    MAE: 0.581352
    """

    task = "regression"

    def _check_y(self, y: Any, n: int) -> torch.Tensor:
        try:  # numbers stay float64 until the range check below
            raw = y if isinstance(y, torch.Tensor) else torch.as_tensor(y, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError) as e:
            raise ValueError(f"regression targets must be numbers: {e}") from None
        if raw.is_complex():  # the conversion would drop the imaginary parts
            raise TypeError(f"regression targets must be real numbers, got dtype {raw.dtype}")
        y = raw.to(device=self.device, dtype=self.dtype)
        if y.dim() != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape [{n}], got {list(y.shape)}")
        if not bool(torch.isfinite(y).all()):
            i = int((~torch.isfinite(y)).nonzero()[0, 0])
            value = float(raw[i])
            kind = str(self.dtype).removeprefix("torch.")
            what = (
                f"{value:g} overflows the model's {kind}; rescale the target"
                if math.isfinite(value)
                else f"non-finite target {value} (a missing target cannot be learned)"
            )
            raise ValueError(f"y[{i}] ({_stream_row(self, i)}): {what}")
        return y

    def _targets_from_labels(self, labels: Sequence[Any], first_row: int) -> torch.Tensor:
        try:
            vals = [float(v) for v in labels]
        except (TypeError, ValueError):
            for i, v in enumerate(labels):
                try:
                    float(v)
                except (TypeError, ValueError):
                    raise ValueError(
                        f"row {first_row + i:,}: target {v!r}; regression targets must be numbers"
                    ) from None
            raise
        return self._check_y(vals, len(vals))

    def _train_target(self, y: torch.Tensor) -> torch.Tensor:
        if self.target_scaler is None:
            return y
        self.target_scaler.update(y.view(-1, 1))
        return self.target_scaler.transform(y.view(-1, 1)).view(-1)

    def _output_module(self) -> torch.nn.Module:
        return RegressionOutput(self.target_scaler)

    def _outputs(self, out: torch.Tensor) -> torch.Tensor:
        out = out.reshape(out.shape[0], -1)
        if out.shape[1] != 1:
            raise ValueError(f"a regression module must have one output, got {out.shape[1]}")
        out = out[:, 0]
        if self.target_scaler is not None:
            out = self.target_scaler.inverse(out.view(-1, 1)).view(-1)
        return out

    def predict(self, X: torch.Tensor) -> torch.Tensor:
        """Predicted values ``[B]``."""
        return self._infer(self._check_X(X))

    def _labels_from_tensor(self, out: torch.Tensor) -> list[Any]:
        return out.tolist()


#: The learner class of each task.
TASKS: dict[str, type[OnlineLearner]] = {
    "classification": OnlineClassifier,
    "regression": OnlineRegressor,
}


def online_learner(
    model: nn.Module | ModuleFactory | ModelSpec | str | Path,
    *,
    task: str = "classification",
    **options: Any,  # the learner's keywords, each with its own type
) -> OnlineLearner:
    """The :class:`OnlineClassifier` or :class:`OnlineRegressor` that ``task`` names, for code
    that holds the task as a value (a stream's ``task``). ``model`` is a module or a module
    factory (the classes' ``module``), or a model spec (a :class:`~torchstream.models.ModelSpec`,
    a spec name such as ``"mlp"`` or a TOML path, as in ``from_spec``); ``options`` are the
    classes' other keywords.

    >>> from torchstream.models import MLP
    >>> type(online_learner(MLP, task="regression")).__name__
    'OnlineRegressor'
    >>> type(online_learner("probit", scale_inputs=True)).__name__
    'OnlineClassifier'
    >>> online_learner(MLP, task="ranking")
    Traceback (most recent call last):
    ...
    ValueError: task must be 'classification' or 'regression', got 'ranking'
    """
    cls = TASKS.get(task)
    if cls is None:
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    if isinstance(model, (ModelSpec, str, Path)):
        return cls.from_spec(model, **options)
    return cls(model, **options)
