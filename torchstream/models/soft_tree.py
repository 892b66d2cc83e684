"""Soft (differentiable) decision tree in the style of Frosst & Hinton (arXiv:1711.09784)."""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from torchstream.models._common import check_input, check_int

__all__ = ["SoftDecisionTree"]

TreeTask = Literal["classification", "regression"]


class SoftDecisionTree(nn.Module):
    """Complete binary soft decision tree of a given depth [1]_.

    Inner node ``i`` (breadth-first numbering, root ``0``, children ``2i+1`` left and ``2i+2``
    right) sends a sample right with probability ``p_i(x) = sigmoid(beta * (x @ w_i + b_i))``,
    with ``beta`` the fixed ``inverse_temperature``. The probability ``P_l(x)`` of reaching leaf
    ``l`` (leaves numbered left to right) is the product of the branch probabilities along its
    path. Leaf ``l`` holds a learned vector ``phi_l`` of width ``n_outputs``.

    * ``task="classification"``, ``n_outputs >= 2``: :meth:`forward` returns the log of the mixture of the leaf
      distributions, ``log(sum_l P_l(x) * softmax(phi_l))``, shape ``[B, n_outputs]``. These are
      log-probabilities, so they can be fed to ``cross_entropy`` as logits (``log_softmax``
      leaves them unchanged) and ``exp`` of them sums to one per row.
    * ``task="classification"`` with ``n_outputs=1`` (binary): leaf ``l`` gives
      ``P(y = 1) = sigmoid(phi_l)``; :meth:`forward` returns the logit of the mixture,
      ``log(p / (1 - p))`` with ``p = sum_l P_l(x) * sigmoid(phi_l)``, shape ``[B, 1]``, so that
      ``sigmoid`` of the output is the mixture probability.
    * ``task="regression"``: :meth:`forward` returns the mixture of the leaf values,
      ``sum_l P_l(x) * phi_l``, shape ``[B, n_outputs]``.

    The output width is fixed: unlike :class:`~torchstream.models.MLP` and
    :class:`~torchstream.models.Probit`, this model has no ``output_layer`` a learner could grow
    when a new class appears; declare all classes up front (``n_outputs``).

    Parameters
    ----------
    n_features
        Input width ``d``.
    n_outputs
        Number of classes (classification; ``1`` for a single-logit binary tree) or of
        regression targets.
    depth
        Number of gate levels (``>= 1``): ``2**depth - 1`` inner nodes, ``2**depth`` leaves.
    inverse_temperature
        ``beta > 0``; larger values make the gates closer to hard splits.
    task
        ``"classification"`` or ``"regression"``.

    Attributes
    ----------
    gates
        ``nn.Linear(n_features, n_inner)``: row ``i`` holds ``w_i``, ``b_i`` of inner node ``i``.
    leaves
        ``nn.Parameter`` of shape ``[n_leaves, n_outputs]``, row ``l`` is ``phi_l``.

    Example
    -------
    >>> tree = SoftDecisionTree(3, 2, depth=2)
    >>> tree.n_inner, tree.n_leaves
    (3, 4)
    >>> with torch.no_grad():  # every gate at 0.5: each of the 4 leaves is reached w.p. 1/4
    ...     _ = tree.gates.weight.zero_()
    ...     _ = tree.gates.bias.zero_()
    >>> tree.path_probabilities(torch.ones(2, 3)).tolist()
    [[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
    >>> tree(torch.ones(2, 3)).exp().sum(1).tolist()
    [1.0, 1.0]

    References
    ----------
    .. [1] N. Frosst and G. Hinton, "Distilling a Neural Network Into a Soft Decision Tree",
       arXiv:1711.09784, 2017.
    """

    def __init__(
        self,
        n_features: int,
        n_outputs: int,
        depth: int = 4,
        inverse_temperature: float = 1.0,
        task: TreeTask = "classification",
    ) -> None:
        super().__init__()
        self.n_features = check_int(n_features, "n_features")
        self.n_outputs = check_int(n_outputs, "n_outputs")
        self.depth = check_int(depth, "depth")
        beta = float(inverse_temperature)
        if not beta > 0.0:
            raise ValueError(f"inverse_temperature must be > 0, got {inverse_temperature!r}")
        self.inverse_temperature = beta
        if task not in ("classification", "regression"):
            raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
        self.task: TreeTask = task
        self.n_inner = 2**self.depth - 1
        self.n_leaves = 2**self.depth
        self.gates = nn.Linear(self.n_features, self.n_inner)
        self.leaves = nn.Parameter(0.1 * torch.randn(self.n_leaves, self.n_outputs))

    def gate_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """Probability of going right at every inner node, ``[B, n_inner]``."""
        check_input(x, self.n_features, type(self).__name__)
        return torch.sigmoid(self.inverse_temperature * self.gates(x))

    def log_path_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """``log P_l(x)`` for every leaf, ``[B, n_leaves]`` (computed in log space)."""
        check_input(x, self.n_features, type(self).__name__)
        z = self.inverse_temperature * self.gates(x)
        log_right = F.logsigmoid(z)
        log_left = F.logsigmoid(-z)
        batch = x.shape[0]
        log_path = z.new_zeros(batch, 1)
        for level in range(self.depth):
            lo, hi = 2**level - 1, 2 ** (level + 1) - 1
            left = log_path + log_left[:, lo:hi]
            right = log_path + log_right[:, lo:hi]
            # node j of this level has children 2j (left) and 2j + 1 (right) on the next one
            log_path = torch.stack((left, right), dim=2).reshape(batch, 2 * (hi - lo))
        return log_path

    def path_probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """``P_l(x)`` for every leaf, ``[B, n_leaves]``; every row sums to one."""
        return self.log_path_probabilities(x).exp()

    def leaf_distributions(self) -> torch.Tensor:
        """Per-leaf output, ``[n_leaves, n_outputs]``: ``softmax(phi_l)`` for classification
        (``sigmoid(phi_l)``, the probability of class 1, when ``n_outputs == 1``), ``phi_l`` for
        regression."""
        if self.task == "regression":
            return self.leaves
        if self.n_outputs == 1:
            return torch.sigmoid(self.leaves)
        return torch.softmax(self.leaves, dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, n_features] -> [B, n_outputs]``: mixture log-probabilities (classification) or
        mixture values (regression)."""
        log_path = self.log_path_probabilities(x).unsqueeze(2)  # [B, n_leaves, 1]
        if self.task == "regression":
            return log_path.squeeze(2).exp() @ self.leaves
        if self.n_outputs == 1:  # logit of the mixture of leaf Bernoulli probabilities
            log_p = torch.logsumexp(log_path + F.logsigmoid(self.leaves), dim=1)
            log_q = torch.logsumexp(log_path + F.logsigmoid(-self.leaves), dim=1)
            return log_p - log_q
        return torch.logsumexp(log_path + torch.log_softmax(self.leaves, dim=1), dim=1)

    def extra_repr(self) -> str:
        return (
            f"n_features={self.n_features}, n_outputs={self.n_outputs}, depth={self.depth}, "
            f"inverse_temperature={self.inverse_temperature}, task={self.task!r}"
        )
