"""Fixed-size reservoirs of stream rows: :class:`GeometricReservoir` (recent rows favoured)
and :class:`UniformReservoir` (Vitter's algorithm R)."""

from __future__ import annotations

import math

import numpy as np
import torch

from torchstream.explain.storage._common import _check_prob, _Reservoir

__all__ = ["GeometricReservoir", "UniformReservoir"]


class GeometricReservoir(_Reservoir):
    """Reservoir in which each new row replaces a uniformly chosen slot ("geometric sampling",
    [PFI]_; also the iSAGE reservoir).

    The first ``size`` rows fill the reservoir. Afterwards each new row enters with probability
    ``insert_prob`` (``q``) and then overwrites a uniformly chosen slot. A uniform draw from the
    reservoir returns a row of age ``a`` (``a = 0``: the newest row) with probability
    ``p (1 - p)^a``, ``p = q / size``: the ages are geometric with mean ``size / q - 1``, and the
    collision probability of two independent realisations tends to ``p / (2 - p)`` (iPFI
    Lemma 1), whereas a uniform reservoir gives ``1 / n_seen``.

    The iPFI paper inserts every row (``q = 1``, the default here): the reservoir forgets like a
    window of about ``size`` rows. The authors' reference library uses ``q = 1 / size`` by
    default, so that its reservoir remembers about ``size**2`` rows (10 000 for ``size=100``);
    pass ``insert_prob=1 / size`` for that behaviour.

    Parameters
    ----------
    size
        Number of slots ``L``.
    n_features
        Width ``d`` of a row.
    insert_prob
        Probability ``q`` in ``(0, 1]`` that a row arriving at a full reservoir is stored.
    seed
        Seed of the reservoir's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored rows.

    Examples
    --------
    >>> res = GeometricReservoir(size=3, n_features=2, seed=42)
    >>> res.update(torch.arange(20.0).reshape(10, 2))
    >>> len(res), res.n_seen, res.times.tolist()
    (3, 10, [6, 8, 9])
    >>> res.sample(2).tolist()
    [[12.0, 13.0], [16.0, 17.0]]

    References
    ----------
    .. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental
       permutation feature importance (iPFI): towards online explanations on data streams.
       *Machine Learning* 112, 4863-4903.
    """

    def __init__(
        self,
        size: int,
        n_features: int,
        *,
        insert_prob: float = 1.0,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.insert_prob = _check_prob(insert_prob, "insert_prob")
        super().__init__(size, n_features, seed=seed, dtype=dtype, device=device)

    def _slot_of(self, u: float, t: int) -> int:
        # u < q enters; given that, u / q is uniform on [0, 1) and picks the slot
        q = self.insert_prob
        return min(math.floor(u / q * self.size), self.size - 1) if u < q else -1

    def _slots(self, u: np.ndarray, first: int) -> np.ndarray:
        q = self.insert_prob
        slot = np.minimum(np.floor(u / q * self.size), self.size - 1).astype(np.int64)
        return np.where(u < q, slot, -1)

    def _config(self) -> dict[str, object]:
        return {**super()._config(), "insert_prob": self.insert_prob}

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", insert_prob={self.insert_prob})"


class UniformReservoir(_Reservoir):
    """Reservoir sample of the whole stream: Vitter's algorithm R ("uniform sampling" [PFI]_).

    The first ``size`` rows fill the reservoir; the ``n``-th row (1-based) then draws ``j``
    uniformly from ``{0, ..., n - 1}`` and replaces slot ``j`` if ``j < size``. After ``n``
    rows each of them is stored with probability ``size / n``, so a uniform draw from the
    reservoir returns each past row with probability ``1 / n``.

    Parameters
    ----------
    size
        Number of slots ``L``.
    n_features
        Width ``d`` of a row.
    seed
        Seed of the reservoir's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored rows.

    Examples
    --------
    >>> res = UniformReservoir(size=3, n_features=1, seed=42)
    >>> res.update(torch.arange(10.0).reshape(10, 1))
    >>> res.times.tolist(), res.n_seen
    ([6, 1, 2], 10)
    >>> res.sample(4).flatten().tolist()
    [6.0, 1.0, 2.0, 1.0]

    References
    ----------
    .. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental
       permutation feature importance (iPFI): towards online explanations on data streams.
       *Machine Learning* 112, 4863-4903.
    """

    def __init__(
        self,
        size: int,
        n_features: int,
        *,
        seed: int | None = 0,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(size, n_features, seed=seed, dtype=dtype, device=device)

    def _slot_of(self, u: float, t: int) -> int:
        # the row with 0-based index t is the (t + 1)-th: j uniform on {0, ..., t}
        n = float(t + 1)
        j = int(min(math.floor(u * n), n - 1))
        return j if j < self.size else -1

    def _slots(self, u: np.ndarray, first: int) -> np.ndarray:
        n = np.arange(first + 1, first + 1 + u.shape[0], dtype=np.float64)
        j = np.minimum(np.floor(u * n), n - 1).astype(np.int64)
        return np.where(j < self.size, j, -1)
