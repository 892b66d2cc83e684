"""The ablation test of the baselines paper [BL]_ §3.5: how discriminative are attributions?

For each fraction ``K`` of the ``d`` features (0 %, 10 %, ..., 100 % by default), each row's
top-``K`` features by ``|attribution|`` are masked (replaced by imputation values), the model
predicts again and the F1 score is recorded (binary: of class 1; several classes: macro F1).
The steeper the score falls, the better the attributions single out what the model uses. The
reference curve masks ``K`` *random* features per row (averaged over ``n_random`` draws).

Documented choices: by default only the rows the model classifies correctly are used (the
authors' code), so the curve starts at F1 = 1; the imputation is ``"mean"`` (column means of
the rows tested) unless asked otherwise — ``"blur"`` is the reference code's default (a 2-D
Gaussian filter, ``sigma = 3``, over the tested matrix), ``"zero"`` and ``"noise"`` (uniform in
each column's range, the paper's "random noise") are the others, or give values ``[d]`` /
``[n, d]``. Ablation ignores feature interactions [BL]_.

>>> X = torch.tensor([[2.0, 0.0], [-2.0, 0.0], [3.0, 1.0], [-1.0, -1.0]])
>>> y = (X[:, 0] > 0).long()
>>> model = lambda z: torch.stack([1 - (z[:, 0] > 0).double(), (z[:, 0] > 0).double()], 1)
>>> attributions = torch.tensor([[1.0, 0.1], [1.0, 0.1], [1.0, 0.1], [1.0, 0.1]])
>>> res = ablation_test(model, X, y, attributions, fractions=[0.0, 0.5], mask="zero")
>>> res.scores.tolist()
[1.0, 0.0]

References
----------
.. [BL] J. Haug, S. Zürn, P. El-Jiz, G. Kasneci (2021). On baselines for local feature
   attributions. AAAI-21 Workshop on Explainable Agency in Artificial Intelligence.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

__all__ = ["AblationResult", "ablation_test", "compare_attributions", "f1_score"]


def f1_score(y: torch.Tensor, pred: torch.Tensor, n_classes: int) -> float:
    """F1 of class 1 for two classes, macro F1 (mean over the classes present in ``y`` or
    ``pred``) for more."""
    y, pred = y.long().reshape(-1), pred.long().reshape(-1)

    def f1_of(c: int) -> float:
        tp = int(((pred == c) & (y == c)).sum())
        fp = int(((pred == c) & (y != c)).sum())
        fn = int(((pred != c) & (y == c)).sum())
        return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)

    if n_classes <= 2:
        return f1_of(1)
    present = sorted(set(y.tolist()) | set(pred.tolist()))
    return float(np.mean([f1_of(c) for c in present]))


@dataclass
class AblationResult:
    """Scores of the ablation test.

    Attributes
    ----------
    fractions
        The fractions of features masked ``[K]``.
    n_masked
        Features masked per row at each fraction ``[K]``.
    scores
        F1 after masking each row's top features ``[K]``.
    random_scores, random_std
        Mean and standard deviation of F1 over ``n_random`` random maskings ``[K]``.
    n_rows
        Rows tested.
    """

    fractions: torch.Tensor
    n_masked: torch.Tensor
    scores: torch.Tensor
    random_scores: torch.Tensor
    random_std: torch.Tensor
    n_rows: int

    @property
    def area(self) -> float:
        """Mean F1 over the fractions (lower: more discriminative attributions)."""
        return float(self.scores.mean())

    @property
    def random_area(self) -> float:
        """Mean F1 of the random reference over the fractions."""
        return float(self.random_scores.mean())

    def as_dict(self) -> dict[str, list[float]]:
        return {
            "fraction": self.fractions.tolist(),
            "f1": self.scores.tolist(),
            "random_f1": self.random_scores.tolist(),
        }


def _predict(model_fn: Callable[[torch.Tensor], Any], X: torch.Tensor, threshold: float):
    with torch.no_grad():
        out = torch.as_tensor(model_fn(X))
    if out.dim() == 2 and out.shape[1] > 1:
        if not bool(torch.isfinite(out).all()):
            raise ValueError("model output has non-finite values")
        return out.argmax(1), out.shape[1]
    out = out.reshape(-1)
    if not bool(torch.isfinite(out).all()):
        raise ValueError("model output has non-finite values")
    return (out > threshold).long(), 2


def _mask_values(mask: Any, X: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    n, d = X.shape
    if isinstance(mask, str):
        if mask == "mean":
            return X.mean(0).expand(n, d)
        if mask == "zero":
            return torch.zeros_like(X)
        if mask == "blur":
            blurred = gaussian_filter(X.detach().cpu().double().numpy(), sigma=3)
            return torch.from_numpy(blurred).to(X.device, X.dtype)
        if mask == "noise":
            lo, hi = X.min(0).values, X.max(0).values
            u = torch.rand(n, d, generator=generator, dtype=torch.float64).to(X.device, X.dtype)
            return lo + u * (hi - lo)
        raise ValueError(f"mask must be 'mean', 'zero', 'blur', 'noise' or values, got {mask!r}")
    values = torch.as_tensor(mask, dtype=X.dtype, device=X.device)
    if values.shape == (d,):
        return values.expand(n, d)
    if values.shape == (n, d):
        return values
    raise ValueError(f"mask values must have shape [{d}] or [{n}, {d}], got {list(values.shape)}")


def _score_masked(
    model_fn: Any,
    X: torch.Tensor,
    y: torch.Tensor,
    order: torch.Tensor,
    values: torch.Tensor,
    k: int,
    threshold: float,
    n_classes: int,
) -> float:
    """F1 after masking the first ``k`` features of each row's ``order``."""
    hide = torch.zeros_like(X, dtype=torch.bool)
    if k:
        hide.scatter_(1, order[:, :k], True)
    pred, _ = _predict(model_fn, torch.where(hide, values, X), threshold)
    return f1_score(y, pred, n_classes)


def ablation_test(
    model_fn: Callable[[torch.Tensor], Any],
    X: torch.Tensor,
    y: torch.Tensor,
    attributions: torch.Tensor,
    *,
    fractions: Sequence[float] | None = None,
    mask: str | Any = "mean",
    only_correct: bool = True,
    n_random: int = 10,
    threshold: float = 0.5,
    seed: int = 0,
) -> AblationResult:
    """Top-K ablation of ``attributions`` ``[n, d]`` of the rows ``X`` ``[n, d]`` with labels
    ``y`` ``[n]`` (class indices) for the classifier ``model_fn`` (probabilities ``[n, k]``,
    or one score ``[n]`` thresholded at ``threshold``). See the module docstring."""
    if not isinstance(X, torch.Tensor) or X.dim() != 2:
        raise ValueError("X must be a tensor [n, d]")
    n, d = X.shape
    attributions = torch.as_tensor(attributions)
    if attributions.shape != X.shape:
        raise ValueError(
            f"attributions must have the shape of X {list(X.shape)}, got {list(attributions.shape)}"
        )
    y = torch.as_tensor(y).reshape(-1)
    if y.shape[0] != n:
        raise ValueError(f"y has {y.shape[0]} labels for {n} rows")
    if not bool(torch.isfinite(attributions).all()):
        raise ValueError("attributions has non-finite values")
    fr = (
        torch.linspace(0, 1, 11, dtype=torch.float64)
        if fractions is None
        else torch.as_tensor(list(fractions), dtype=torch.float64)
    )
    if fr.dim() != 1 or fr.numel() == 0 or bool(((fr < 0) | (fr > 1)).any()):
        raise ValueError(f"fractions must be numbers in [0, 1], got {fractions!r}")
    if isinstance(n_random, bool) or not isinstance(n_random, int) or n_random < 1:
        raise ValueError(f"n_random must be an integer >= 1, got {n_random!r}")
    generator = torch.Generator().manual_seed(seed)
    pred, n_classes = _predict(model_fn, X, threshold)
    if only_correct:
        keep = pred.cpu() == y.cpu().long()
        if not bool(keep.any()):
            raise ValueError("the model classifies no row correctly: nothing to ablate")
        keep = keep.to(X.device)
        X, y, attributions = (
            X[keep],
            y[keep.to(y.device)],
            attributions[keep.to(attributions.device)],
        )
    n = X.shape[0]
    values = _mask_values(mask, X, generator)
    order = torch.argsort(attributions.abs().to(X.device), dim=1, descending=True, stable=True)
    ks = torch.round(fr * d).long()
    scores = [
        _score_masked(model_fn, X, y, order, values, int(k), threshold, n_classes) for k in ks
    ]
    rand = torch.zeros(n_random, len(ks), dtype=torch.float64)
    for r in range(n_random):
        perm = torch.argsort(torch.rand(n, d, generator=generator), dim=1).to(X.device)
        for i, k in enumerate(ks):
            rand[r, i] = _score_masked(model_fn, X, y, perm, values, int(k), threshold, n_classes)
    return AblationResult(
        fr,
        ks,
        torch.tensor(scores, dtype=torch.float64),
        rand.mean(0),
        rand.std(0, unbiased=n_random > 1)
        if n_random > 1
        else torch.zeros(len(ks), dtype=torch.float64),
        n,
    )


def compare_attributions(
    model_fn: Callable[[torch.Tensor], Any],
    X: torch.Tensor,
    y: torch.Tensor,
    explainers: Mapping[str, Any],
    *,
    chunk: int = 256,
    **kwargs: Any,
) -> dict[str, AblationResult]:
    """:func:`ablation_test` for several explainers (e.g. one
    :class:`~torchstream.explain.local.LocalAttributor` per method and baseline), each
    attributing ``X`` in chunks of ``chunk`` rows; ``kwargs`` go to :func:`ablation_test`."""
    out = {}
    for name, explainer in explainers.items():
        parts = [explainer(X[i : i + chunk]) for i in range(0, X.shape[0], chunk)]
        out[name] = ablation_test(model_fn, X, y, torch.cat(parts), **kwargs)
    return out
