"""Per-sample losses on model outputs, by name or as callables.

A loss maps ``(y_pred, y_true)`` to a tensor ``[B]`` (no reduction). ``y_pred`` is what a
:data:`~torchstream.typing.ModelFn` returns: class probabilities ``[B, k]`` for a classifier
(or ``[B]``, the probability of the positive class, for a binary one), values ``[B]`` for a
regressor. ``y_true`` holds class indices (classification) or values (regression).

>>> p = torch.tensor([[0.9, 0.1], [0.2, 0.8]])
>>> y = torch.tensor([0, 0])
>>> get_loss("zero_one")(p, y).tolist()
[0.0, 1.0]
>>> [round(v, 4) for v in get_loss("cross_entropy")(p, y).tolist()]
[0.1054, 1.6094]
"""

from __future__ import annotations

from collections.abc import Callable

import torch

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: ``(y_pred [*lead] or [*lead, k], y_true broadcastable to lead, classes, dtype) -> [*lead]``.
BroadcastLossFn = Callable[[torch.Tensor, torch.Tensor, bool, torch.dtype], torch.Tensor]

__all__ = ["BROADCAST_LOSSES", "LOSSES", "BroadcastLossFn", "LossFn", "get_loss"]

_EPS = 1e-12


def _as_proba_matrix(p: torch.Tensor) -> torch.Tensor:
    """``[B]`` positive-class probabilities -> ``[B, 2]``; ``[B, k]`` unchanged."""
    if p.dim() == 1:
        return torch.stack([1.0 - p, p], dim=1)
    return p


def cross_entropy(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """``-log p[y]`` with probabilities clamped to ``[1e-12, 1]``."""
    p = _as_proba_matrix(y_pred)
    return -p.gather(1, y_true.long().view(-1, 1)).squeeze(1).clamp_min(_EPS).log()


def zero_one(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """1 where the most probable class (or the rounded value) differs from ``y_true``."""
    if y_pred.dim() == 2:
        return (y_pred.argmax(1) != y_true.long()).to(y_pred.dtype)
    return (y_pred.round() != y_true.to(y_pred.dtype)).to(y_pred.dtype)


def _regression_view(
    y_pred: torch.Tensor, y_true: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    if y_pred.dim() == 2 and y_pred.shape[1] > 1:  # probabilities: compare with one-hot labels
        onehot = torch.zeros_like(y_pred).scatter_(1, y_true.long().view(-1, 1), 1.0)
        return y_pred, onehot
    return y_pred.reshape(-1), y_true.to(y_pred.dtype).reshape(-1)


def mse(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """Squared error (summed over classes for probabilities: the Brier score)."""
    a, b = _regression_view(y_pred, y_true)
    d = (a - b) ** 2
    return d.sum(1) if d.dim() == 2 else d


def absolute(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """Absolute error (summed over classes for probabilities)."""
    a, b = _regression_view(y_pred, y_true)
    d = (a - b).abs()
    return d.sum(1) if d.dim() == 2 else d


LOSSES: dict[str, LossFn] = {
    "cross_entropy": cross_entropy,
    "log_loss": cross_entropy,
    "zero_one": zero_one,
    "mse": mse,
    "squared": mse,
    "absolute": absolute,
    "mae": absolute,
}


# ------------------------------------------------------------------ broadcasting forms
# The same losses for the explainers' hot paths: ``y_pred`` holds many model outputs per label
# (``[R, B]`` / ``[B, R]`` values or ``[R, B, k]`` probabilities) and ``y_true`` broadcasts
# against its leading dimensions, so the labels are never repeated. ``classes`` says whether
# the last dimension of ``y_pred`` is the class dimension; the result is computed in ``dtype``
# and equals the per-row loss of ``y_pred.to(dtype)`` against the repeated labels value by value.


def _class_index(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    lead = y_pred.shape[:-1]
    return y_true.long().unsqueeze(-1).expand(*lead, 1)


def _onehot(y_pred: torch.Tensor, y_true: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros(y_pred.shape, dtype=dtype, device=y_pred.device)
    return out.scatter_(-1, _class_index(y_pred, y_true), 1.0)


def _mse_b(y_pred: torch.Tensor, y_true: torch.Tensor, classes: bool, dtype: torch.dtype):
    if classes and y_pred.shape[-1] > 1:
        return (y_pred.to(dtype) - _onehot(y_pred, y_true, dtype)).square_().sum(-1)
    if classes:
        y_pred = y_pred.squeeze(-1)
    return torch.sub(y_pred, y_true.to(dtype)).square_()


def _absolute_b(y_pred: torch.Tensor, y_true: torch.Tensor, classes: bool, dtype: torch.dtype):
    if classes and y_pred.shape[-1] > 1:
        return (y_pred.to(dtype) - _onehot(y_pred, y_true, dtype)).abs_().sum(-1)
    if classes:
        y_pred = y_pred.squeeze(-1)
    return torch.sub(y_pred, y_true.to(dtype)).abs_()


def _cross_entropy_b(y_pred: torch.Tensor, y_true: torch.Tensor, classes: bool, dtype: torch.dtype):
    if classes:
        p = y_pred.gather(-1, _class_index(y_pred, y_true)).squeeze(-1).to(dtype)
    else:
        p = y_pred.to(dtype)
        p = torch.where(y_true.long() == 1, p, 1.0 - p)
    return p.clamp_min_(_EPS).log_().neg_()


def _zero_one_b(y_pred: torch.Tensor, y_true: torch.Tensor, classes: bool, dtype: torch.dtype):
    if classes:
        return (y_pred.argmax(-1) != y_true.long()).to(dtype)
    return (y_pred.to(dtype).round() != y_true.to(dtype)).to(dtype)


#: The named losses in broadcasting form (see above).
BROADCAST_LOSSES: dict[str, BroadcastLossFn] = {
    "cross_entropy": _cross_entropy_b,
    "log_loss": _cross_entropy_b,
    "zero_one": _zero_one_b,
    "mse": _mse_b,
    "squared": _mse_b,
    "absolute": _absolute_b,
    "mae": _absolute_b,
}


def get_loss(loss: str | LossFn) -> LossFn:
    """The per-sample loss for a name in :data:`LOSSES` or a callable (returned unchanged)."""
    if callable(loss):
        return loss
    try:
        return LOSSES[loss]
    except KeyError:
        raise ValueError(f"unknown loss {loss!r}; known: {sorted(LOSSES)} or a callable") from None
