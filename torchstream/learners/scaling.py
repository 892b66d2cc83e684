"""Running standardisation (exact batched Welford / Chan updates) as a learnable-free module."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["RunningStandardizer"]


class RunningStandardizer(nn.Module):
    """Keeps the running mean and variance of a stream of vectors ``[B, d]`` and standardises.

    The update of a whole batch is exact (Chan et al.'s pairwise combination of moments), so
    feeding rows one by one or in batches gives the same statistics up to rounding.
    Columns with zero variance are divided by 1 (not by 0): a constant column stays centred
    at zero. Before the first update there are no statistics and :meth:`transform` maps every
    row to zeros (the model's prediction before it has seen data).

    >>> s = RunningStandardizer(2)
    >>> s.update(torch.tensor([[1.0, 10.0], [3.0, 10.0]]))
    >>> s.mean.tolist(), s.std.tolist()
    ([2.0, 10.0], [1.0, 1.0])
    """

    def __init__(self, n_features: int, *, eps: float = 1e-12) -> None:
        super().__init__()
        self.eps = eps
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean_", torch.zeros(n_features, dtype=torch.float64))
        self.register_buffer("m2", torch.zeros(n_features, dtype=torch.float64))
        self._n = 0  # mirror of `count` on the host: no device sync to read it
        self._cache: (
            tuple[tuple[torch.dtype, torch.device], torch.Tensor, torch.Tensor | None] | None
        ) = None

    @torch.no_grad()
    def update(self, X: torch.Tensor) -> None:
        X = X.detach().reshape(X.shape[0], -1).to(self.mean_.device, torch.float64)
        n_b = X.shape[0]
        if n_b == 0:
            return
        n_a = self._n
        n = n_a + n_b
        if n_b == 1:  # Welford's single-row update: fewer kernels on the per-row hot path
            delta = X[0] - self.mean_
            self.mean_.add_(delta, alpha=1.0 / n)
            self.m2.addcmul_(delta, X[0] - self.mean_)
        else:  # Chan et al.: combine the batch's moments with the running ones
            mean_b = X.mean(0)
            delta = mean_b - self.mean_
            self.mean_.add_(delta, alpha=n_b / n)
            self.m2.add_(((X - mean_b) ** 2).sum(0)).add_(delta**2, alpha=n_a * n_b / n)
        self._n = n
        self.count.fill_(n)
        self._cache = None

    @property
    def mean(self) -> torch.Tensor:
        return self.mean_

    @property
    def std(self) -> torch.Tensor:
        """Population standard deviation; 1 where it is (numerically) zero or unknown."""
        if self._n < 2:
            return torch.ones_like(self.m2)
        var = self.m2 / self._n
        return var.sqrt() + (var <= self.eps)

    def transform(self, X: torch.Tensor) -> torch.Tensor:
        """``(X - mean) / std``; before the first update (no statistics yet) every row maps to 0."""
        mean, std = self._in(X.dtype)
        if std is None:
            return torch.zeros_like(X)
        return (X - mean) / std

    def inverse(self, Z: torch.Tensor) -> torch.Tensor:
        mean, std = self._in(Z.dtype)
        return Z + mean if std is None else Z * std + mean

    def _in(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mean and deviation in ``dtype`` (deviation ``None`` before any update), cached until
        the next update: no device sync on the hot path."""
        key = (dtype, self.mean_.device)
        if self._cache is None or self._cache[0] != key:
            std = None if self._n == 0 else self.std.to(dtype)
            self._cache = (key, self.mean_.to(dtype), std)
        return self._cache[1], self._cache[2]

    def snapshot(self) -> tuple[torch.Tensor, torch.Tensor, int]:
        """A copy of the statistics, for :meth:`restore`."""
        return self.mean_.clone(), self.m2.clone(), self._n

    @classmethod
    def from_snapshot(cls, snap: Sequence[object]) -> RunningStandardizer:
        """A standardiser with the statistics of a :meth:`snapshot` (e.g. read from a
        checkpoint as a list), on the snapshot's device."""
        mean, m2, n = snap
        assert isinstance(mean, torch.Tensor) and isinstance(m2, torch.Tensor)
        out = cls(int(mean.numel())).to(mean.device)
        out.restore((mean, m2, int(n)))  # type: ignore[call-overload]
        return out

    @torch.no_grad()
    def restore(self, snap: tuple[torch.Tensor, torch.Tensor, int]) -> None:
        """Return to the statistics of a :meth:`snapshot`."""
        mean, m2, n = snap
        self.mean_.copy_(mean)
        self.m2.copy_(m2)
        self._n = n
        self.count.fill_(n)
        self._cache = None

    @torch.no_grad()
    def grow(self, n_features: int) -> None:
        """Widen to ``n_features`` columns; a new column gets mean 0 and no spread, the exact
        statistics of a column that was 0 in every row seen so far."""
        add = n_features - self.mean_.shape[0]
        if add < 0:
            raise ValueError(f"cannot shrink the standardizer from {self.mean_.shape[0]} columns")
        self.mean_ = torch.cat([self.mean_, self.mean_.new_zeros(add)])
        self.m2 = torch.cat([self.m2, self.m2.new_zeros(add)])
        self._cache = None

    def _load_from_state_dict(self, *args: object, **kwargs: object) -> None:
        super()._load_from_state_dict(*args, **kwargs)  # type: ignore[arg-type]
        self._cache = None
        self._n = int(self.count)
