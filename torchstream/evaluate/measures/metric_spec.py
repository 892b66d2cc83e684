"""A per-batch metric with its keyword arguments bound and checked up front (A.6 §5.1 [^1]).

:class:`MetricSpec` wraps either a scikit-learn style function ``f(y_true, y_pred, **kw)`` or a
river metric (class or instance). The keyword arguments are checked **at construction** against
the function's (or the river metric's constructor's) ``inspect.signature``: an unknown keyword, or
a required keyword that is missing, raises a ``TypeError`` there rather than failing silently at
run time. Calling the spec scores one batch and returns a float.

River metrics are cumulative; here every call scores its batch with a *fresh* copy, so the
result is a per-batch score like the scikit-learn functions' (the float package instead keeps
one river metric over the whole run).

The spec carries ``higher_is_better`` (see
:func:`~torchstream.evaluate.measures.direction.higher_is_better`); a metric whose direction is
not known needs it passed explicitly.

>>> from sklearn.metrics import f1_score
>>> f1 = MetricSpec(f1_score, zero_division=0, average="binary")
>>> f1([0, 0, 1], [0, 0, 0]), f1.name, f1.higher_is_better
(0.0, 'f1_score', True)

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from torchstream.evaluate.measures._common import to_numpy
from torchstream.evaluate.measures.direction import higher_is_better as _direction

__all__ = ["MetricSpec"]


def _is_river_metric(obj: Any) -> bool:
    cls = obj if isinstance(obj, type) else type(obj)
    return any(c.__module__.startswith("river.") and c.__name__ == "Metric" for c in cls.__mro__)


def check_kwargs(fn: Callable[..., Any], kwargs: dict[str, Any], skip: int, what: str) -> None:
    """Raise ``TypeError`` if ``kwargs`` cannot be bound to ``fn`` after ``skip`` positional
    arguments (unknown keyword, or a required parameter left out)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature: cannot check
        return
    params = [p for p in sig.parameters.values() if p.name != "self"]
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    filled = {p.name for p in positional[:skip]}
    named = {
        p.name: p
        for p in params
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in filled
    }
    unknown = [k for k in kwargs if k not in named]
    if unknown and not accepts_any:
        raise TypeError(
            f"{what} got unknown keyword argument(s) {unknown}; it accepts {sorted(named)}"
        )
    missing = [
        p.name
        for p in params
        if p.name not in filled
        and p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name not in kwargs
    ]
    if missing:
        raise TypeError(f"{what} requires keyword argument(s) {missing}")


class MetricSpec:
    """A metric ``(y_true, y_pred) -> float`` with bound, validated keyword arguments.

    Parameters
    ----------
    metric
        A scikit-learn style function ``f(y_true, y_pred, **kwargs)`` or a river metric class or
        instance (``update(y_true, y_pred)`` / ``get()``).
    higher_is_better
        The metric's direction; read from the metric when left out (unknown: ``ValueError``).
    labels
        When true, a 2-d ``y_pred`` (class probabilities ``[B, k]``) is turned into labels by
        ``argmax`` before scoring; set it to false for metrics of probabilities (``log_loss``,
        ``roc_auc_score``).
    name
        The name used in results; default: the function's or class's name.
    **kwargs
        Passed to the function at every call, or to the river metric's constructor.

    Examples
    --------
    >>> from sklearn.metrics import zero_one_loss
    >>> spec = MetricSpec(zero_one_loss)
    >>> spec([1, 0, 1, 1], [[0.2, 0.8], [0.6, 0.4], [0.9, 0.1], [0.3, 0.7]])
    0.25
    """

    def __init__(
        self,
        metric: Any,
        *,
        higher_is_better: bool | None = None,
        labels: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.river = _is_river_metric(metric)
        self.kwargs = dict(kwargs)
        if self.river:
            cls = metric if isinstance(metric, type) else type(metric)
            check_kwargs(cls.__init__, self.kwargs, skip=0, what=f"river metric {cls.__name__}")
            if isinstance(metric, type):
                self._prototype = metric(**self.kwargs)
            else:
                self._prototype = metric.clone(self.kwargs) if self.kwargs else metric.clone()
            default_name = cls.__name__
        else:
            if not callable(metric):
                raise TypeError(
                    f"metric must be a callable f(y_true, y_pred, **kw) or a river metric, "
                    f"got {type(metric).__name__}"
                )
            fn_name = getattr(metric, "__name__", type(metric).__name__)
            check_kwargs(metric, self.kwargs, skip=2, what=f"metric {fn_name}")
            default_name = fn_name
        self.metric = metric
        self.labels = bool(labels)
        self.name = name if name is not None else default_name
        probe = self._prototype if self.river else metric
        self.higher_is_better = _direction(probe, higher_is_better)

    def _prepare(self, y_true: Any, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
        t = to_numpy(y_true, "y_true")
        p = to_numpy(y_pred, "y_pred")
        if t.ndim != 1:
            raise ValueError(f"y_true must be 1-d, got shape {t.shape}")
        if p.shape[0] != t.shape[0]:
            raise ValueError(f"y_true has {t.shape[0]} rows but y_pred has {p.shape[0]}")
        if self.labels and p.ndim == 2:
            p = p.argmax(1)
        return t, p

    def __call__(self, y_true: Any, y_pred: Any) -> float:
        """The metric on one batch ``(y_true [B], y_pred [B] or [B, k])``."""
        t, p = self._prepare(y_true, y_pred)
        if self.river:
            m = self._prototype.clone()
            for a, b in zip(t.tolist(), p.tolist(), strict=True):
                m.update(a, b)
            return float(m.get())
        return float(self.metric(t, p, **self.kwargs))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.kwargs.items())
        return f"MetricSpec({self.name}{', ' if args else ''}{args})"

    def __deepcopy__(self, memo: dict[int, Any]) -> MetricSpec:
        new = copy.copy(self)
        new.kwargs = copy.deepcopy(self.kwargs, memo)
        if self.river:
            new._prototype = self._prototype.clone()
        return new
