"""A "storage" of fresh iid rows from a known distribution, for statistical tests."""

from __future__ import annotations

from collections.abc import Callable

import torch

from torchstream.explain.storage._common import _check_int, _check_n, _SeededStorage

__all__ = ["FreshSampler"]


class FreshSampler(_SeededStorage):
    """A "storage" that returns fresh iid rows from a known distribution and ignores
    ``update``: replacement values drawn independently of the stream, which isolates the
    estimator of an explainer from reservoir effects in statistical tests.

    Parameters
    ----------
    draw
        ``draw(n, generator) -> Tensor [n, d]``; use ``generator`` for every random number so
        that the draws are reproducible.
    n_features
        Width ``d`` of a row.
    seed
        Seed of the sampler's CPU generator (``None``: drawn once from the operating system).

    Examples
    --------
    >>> def draw(n, generator):
    ...     return torch.rand(n, 2, generator=generator, dtype=torch.float64)
    >>> fresh = FreshSampler(draw, n_features=2, seed=42)
    >>> fresh.update(torch.zeros(5, 2))  # ignored
    >>> fresh.sample(2).round(decimals=4).tolist()
    [[0.0582, 0.0629], [0.1236, 0.0526]]
    """

    def __init__(
        self,
        draw: Callable[[int, torch.Generator], torch.Tensor],
        n_features: int,
        *,
        seed: int | None = 0,
    ) -> None:
        if not callable(draw):
            raise TypeError(f"draw must be callable as draw(n, generator), got {draw!r}")
        self.draw = draw
        self.n_features = _check_int(n_features, "n_features")
        self._init_random(seed)

    def update(self, X: torch.Tensor) -> None:
        """Count the rows of ``X`` ``[B, d]``; they are not stored."""
        X = torch.as_tensor(X)
        if X.dim() != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape [B, d={self.n_features}], got {list(X.shape)}")
        self.n_seen += X.shape[0]

    def sample(self, n: int) -> torch.Tensor:
        """``n`` fresh rows ``[n, d]`` from ``draw``."""
        n = _check_n(n)
        rows = torch.as_tensor(self.draw(n, self.generator))
        if rows.shape != (n, self.n_features):
            raise ValueError(
                f"draw({n}, generator) returned shape {list(rows.shape)}, expected "
                f"[{n}, {self.n_features}]"
            )
        return rows

    def _config(self) -> dict[str, object]:
        return {"n_features": self.n_features}

    def __repr__(self) -> str:
        return f"FreshSampler(n_features={self.n_features}, n_seen={self.n_seen})"
