"""The learner's whole function as one ``nn.Module``: input scaling, the module, the output.

Captum's attribution methods take a module (DeepLift needs one, and its rules apply to the
nonlinear *modules* it finds), so the prediction a learner makes must exist as a module whose
pieces are modules: :class:`Standardize` (the learner's running input scaling, read live),
the learner's own network, then :class:`ClassProbabilities` (softmax over the classes seen, or
the binary link) or :class:`RegressionOutput` (the inverse target scaling). Its output is
exactly ``learner(X)`` (same function, same numbers); unlike ``learner(X)`` it does no input
checks, so captum may feed it expanded, gradient-carrying batches.
"""

from __future__ import annotations

import torch
from torch import nn

from torchstream.learners.scaling import RunningStandardizer

__all__ = ["ClassProbabilities", "LearnerNetwork", "RegressionOutput", "Standardize"]


class Standardize(nn.Module):
    """``(X - mean) / std`` with the current statistics of a running standardiser (an affine
    map: DeepLift and the gradient methods pass through it exactly); zeros before the first
    update, as the learner predicts then."""

    def __init__(self, scaler: RunningStandardizer | None) -> None:
        super().__init__()
        self._scaler = [scaler]  # a reference, not a sub-module: its statistics stay the learner's

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        scaler = self._scaler[0]
        return X if scaler is None else scaler.transform(X)


class ClassProbabilities(nn.Module):
    """Class probabilities ``[n, k]`` from the module's scores: a softmax module over the
    ``n_seen`` classes seen so far (outputs of classes not seen yet get probability 0), or for a
    single output unit ``[1 - p, p]`` with ``p = link(score)``."""

    def __init__(self, n_seen: int, link: nn.Module | None) -> None:
        super().__init__()
        self.n_seen = n_seen
        self.link = link
        self.softmax = nn.Softmax(dim=1)

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        if self.link is not None:
            p = self.link(out.reshape(-1))
            return torch.stack([1 - p, p], dim=1)
        m, k = self.n_seen, out.shape[1]
        if 0 < m < k:
            return torch.cat([self.softmax(out[:, :m]), out.new_zeros(out.shape[0], k - m)], 1)
        return self.softmax(out)


class RegressionOutput(nn.Module):
    """The single output as ``[n]``, mapped back to the target's scale when targets are scaled."""

    def __init__(self, target_scaler: RunningStandardizer | None) -> None:
        super().__init__()
        self._scaler = [target_scaler]

    def forward(self, out: torch.Tensor) -> torch.Tensor:
        out = out.reshape(out.shape[0], -1)
        if out.shape[1] != 1:
            raise ValueError(f"a regression module must have one output, got {out.shape[1]}")
        scaler = self._scaler[0]
        out = out[:, :1]
        return (out if scaler is None else scaler.inverse(out)).view(-1)


class ProbitLink(nn.Module):
    """The normal CDF as a module."""

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return torch.special.ndtr(s)


class LearnerNetwork(nn.Sequential):
    """``Standardize -> module -> output``: the learner's prediction as a module (see the
    module docstring). Built by ``learner.network``; it shares the learner's parameters and
    scaling statistics, so it follows the learner as it learns."""

    def __init__(self, scale: Standardize, body: nn.Module, output: nn.Module,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.scale, self.body, self.output = scale, body, output
        self.dtype = dtype

    def forward(self, X: torch.Tensor) -> torch.Tensor:
        """The learner's prediction for ``X`` (cast to the learner's dtype, as ``learner(X)``
        does; the cast is differentiable)."""
        if self.dtype is not None and X.dtype != self.dtype:
            X = X.to(self.dtype)
        return self.output(self.body(self.scale(X)))
