"""DeepLift through a learner's output layer, exactly.

captum's DeepLift applies its rescale rule to every nonlinear module it finds; for a softmax
(many inputs, many outputs) that rule is not exact, and the attributions of a class probability
then miss completeness (``sum_i phi_i = p_t(x) - p_t(b)``) by a wide margin. A learner's network
is ``output(logits(x))`` (:class:`~torchstream.learners.network.LearnerNetwork`), so the chain
rule along the straight line from the baseline's logits ``z0`` to the row's ``z`` splits the
change of the probability exactly:

    p_t(z) - p_t(z0) = sum_j M_j (z_j - z0_j),   M_j = int_0^1 dp_t/dz_j (z0 + a (z - z0)) da,

and DeepLift on the logits (exact for the ReLU network and the affine input scaling) splits
each ``z_j - z0_j`` over the inputs: ``phi_i = sum_j M_j A_ji`` with ``sum_i A_ji = z_j - z0_j``.
The integral is a 32-point Gauss-Legendre rule on the (smooth) output function, exact to
rounding for the logit ranges of a trained network.
"""

from __future__ import annotations

import numpy as np
import torch
from captum.attr import DeepLift
from torch import nn

__all__ = ["deeplift_through_output"]

_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(32)


def deeplift_through_output(logits: nn.Module, output: nn.Module, X: torch.Tensor,
                            baselines: torch.Tensor, target: torch.Tensor | None
                            ) -> torch.Tensor:
    """Attributions ``[n, d]`` of ``output(logits(X))[:, target]`` (or of the single output)
    against one baseline row per input row."""
    with torch.no_grad():
        z, z0 = logits(X), logits(baselines)
    z, z0 = z.reshape(z.shape[0], -1), z0.reshape(z0.shape[0], -1)
    k = z.shape[1]
    deeplift = DeepLift(logits)
    A = torch.stack([deeplift.attribute(X, baselines=baselines, target=j if k > 1 else None)
                     .detach() for j in range(k)])  # [k, n, d]; rows: sum_i A_ji = dz_j
    a = torch.as_tensor((_NODES + 1) / 2, dtype=z.dtype, device=z.device)
    w = torch.as_tensor(_WEIGHTS / 2, dtype=z.dtype, device=z.device)
    path = (z0.unsqueeze(0) + a.view(-1, 1, 1) * (z - z0).unsqueeze(0)).requires_grad_(True)
    with torch.enable_grad():
        out = output(path.reshape(-1, k))
        out = out.reshape(len(a), z.shape[0], -1)
        chosen = out[..., 0] if target is None else out.gather(
            2, target.view(1, -1, 1).expand(len(a), -1, 1)).squeeze(2)
        (grad,) = torch.autograd.grad(chosen.sum(), path)
    M = (w.view(-1, 1, 1) * grad).sum(0)  # [n, k]
    return torch.einsum("knd,nk->nd", A.to(M.dtype), M)
