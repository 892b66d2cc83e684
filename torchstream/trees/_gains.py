"""The simple node models of the Dynamic Model Tree, their loss-based gains and AIC thresholds.

A node model is a multinomial logit with class 0 as the pivot: ``c - 1`` weight columns over the
augmented input ``x~ = [1, x]`` (intercept first), logits ``[0, x~ W]``. For two classes this is
exactly the binary logit ``p(y=1|x) = sigmoid(x~ w)`` of the paper; for more classes it is a true
softmax regression with the identifiable ``m (c - 1)`` weights (the reference code fits
one-vs-rest logits instead).

Gains (paper eq. 3-7, Haug et al., ICDE 2022): every candidate model is one gradient step from
the parent, ``Theta_C = Theta_S + (lr / n_C) g_C`` with ``g_C`` the summed gradient of the
log-likelihood over the rows going left, so that ``L(Theta_C, C) ~ L(Theta_S, C) -
(lr / n_C) ||g_C||^2``. As ``L(Theta_S, C) + L(Theta_S, not C) = L(Theta_S, S)`` the split gain is

    G_{S,C} = lr * (||g_C||^2 / n_C + ||g_notC||^2 / n_notC)            (always >= 0)

and the replace gain of an inner node is its collapse gain plus the same term.

AIC thresholds (paper eq. 8-11, ``k`` free parameters per simple model, ``n_L`` leaves below an
inner node, ``-ln eps`` the relative-likelihood bound):

============  =====================================  =====================================
decision      ``thresholds="paper"`` (default)        ``thresholds="reference"``
============  =====================================  =====================================
split leaf    ``G >= k - ln eps``                     ``G >= -ln eps``
collapse      ``G_I >= -ln eps - (n_L - 1) k``        ``G_I >= -ln eps - (n_L - 1) k``
replace       ``G_IC >= -ln eps - (n_L - 2) k``       ``G_IC >= -ln eps - (n_L - 1) k``
============  =====================================  =====================================

The reference code scores a candidate split with the AIC of *one* model, so its split penalty
cancels; the paper's eq. (11) charges the extra model.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

__all__ = [
    "Thresholds",
    "candidate_gain",
    "candidate_gains_and_scores",
    "collapse_threshold",
    "log_likelihood_and_residuals",
    "n_free_parameters",
    "replace_threshold",
    "split_threshold",
]

Thresholds = Literal["paper", "reference"]


def n_free_parameters(n_features: int, n_classes: int) -> int:
    """``k`` of the AIC: ``m`` weights per non-pivot class (the intercept is not counted, as in
    the paper's worked example ``k = 8`` for Electricity)."""
    return n_features * max(n_classes - 1, 1)


def _neg_log_eps(epsilon: float) -> float:
    return -math.log(epsilon)


def split_threshold(k: int, epsilon: float, mode: Thresholds = "paper") -> float:
    """Smallest leaf split gain that passes the AIC test."""
    return (k if mode == "paper" else 0) + _neg_log_eps(epsilon)


def collapse_threshold(k: int, n_leaves: int, epsilon: float, mode: Thresholds = "paper") -> float:
    """Smallest collapse gain ``G_I`` of an inner node with ``n_leaves`` leaves below it."""
    return _neg_log_eps(epsilon) - (n_leaves - 1) * k


def replace_threshold(k: int, n_leaves: int, epsilon: float, mode: Thresholds = "paper") -> float:
    """Smallest replace gain ``G_{I,C}`` of an inner node with ``n_leaves`` leaves below it."""
    saved = n_leaves - 2 if mode == "paper" else n_leaves - 1
    return _neg_log_eps(epsilon) - saved * k


def candidate_gain(
    grad_left: torch.Tensor,
    grad_right: torch.Tensor,
    n_left: torch.Tensor,
    n_right: torch.Tensor,
    lr: float,
) -> torch.Tensor:
    """``lr (||g_L||^2 / n_L + ||g_R||^2 / n_R)`` per candidate (gradients ``[K, P]``, counts
    ``[K]``); ``-inf`` where a side is empty (not a split)."""
    tiny = torch.finfo(torch.float64).tiny  # faded counts may fall below 1
    gain = lr * (
        grad_left.square().sum(-1) / n_left.clamp_min(tiny)
        + grad_right.square().sum(-1) / n_right.clamp_min(tiny)
    )
    return gain.masked_fill((n_left <= 0) | (n_right <= 0), -math.inf)


def candidate_gains_and_scores(
    grad: torch.Tensor, cnt: torch.Tensor, lr: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`candidate_gain` of candidates held as ``grad [K, 2, P]`` and ``cnt [K, 2]``
    (sides left, right), and their ranking scores: the gain minus ``lr ||g_L + g_R||^2 / n``,
    the gain of one more step of the node model without a split (see :mod:`._candidates`).
    The same floating-point operations as :func:`candidate_gain`, in fewer tensor calls."""
    tiny = torch.finfo(torch.float64).tiny  # faded counts may fall below 1
    sides = (grad * grad).sum(-1) / cnt.clamp_min(tiny)  # [K, 2]
    gain = lr * (sides[:, 0] + sides[:, 1])
    gain = gain.masked_fill((cnt <= 0).any(1), -math.inf)
    g = grad[:, 0] + grad[:, 1]
    whole = lr * (g * g).sum(-1) / (cnt[:, 0] + cnt[:, 1]).clamp_min(tiny)
    return gain, gain - whole


def log_likelihood_and_residuals(
    Xa: torch.Tensor, W: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row log-likelihood ``[Q]``, residuals ``onehot(y) - p`` of the non-pivot classes
    ``[Q, c-1]`` and probabilities ``[Q, c]`` of pivot-softmax models.

    ``Xa``: augmented rows ``[Q, m+1]``; ``W``: each row's model ``[Q, m+1, c-1]``; ``y``: class
    indices ``[Q]``. The gradient of ``log p(y|x)`` w.r.t. ``W`` is ``outer(x~, residual)``.
    """
    z = torch.einsum("qp,qpc->qc", Xa, W)
    logits = torch.cat([z.new_zeros(z.shape[0], 1), z], dim=1)
    logp = logits.log_softmax(1)
    ll = logp.gather(1, y.view(-1, 1)).squeeze(1)
    p = logp.exp()
    onehot = torch.nn.functional.one_hot(y, logits.shape[1]).to(p.dtype)
    return ll, onehot[:, 1:] - p[:, 1:], p
