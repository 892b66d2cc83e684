"""Hulten et al.'s rotating hyperplane."""

from __future__ import annotations

from typing import Any

from river.datasets import synth

from torchstream.schema import Schema
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _check_fraction,
    _is_int,
    _numbered,
    _RiverGenerator,
)

__all__ = ["Hyperplane"]


class Hyperplane(_RiverGenerator):
    """Hulten et al.'s rotating hyperplane [^1] (river's ``synth.Hyperplane``).

    Features ``"x0"`` .. ``"x{n-1}"`` are uniform in [0, 1] (river's integer keys renamed). The
    label is ``1`` when ``sum(w_i x_i) >= sum(w_i) / 2``, else ``0``. When ``mag_change > 0``
    the first ``n_drift_features`` weights move by ``mag_change`` after every row, so the drift
    is gradual and continuous: it has no single position and ``drift_positions`` is ``()``.

    Parameters
    ----------
    n_features
        Number of features (at least 1).
    n_drift_features
        Number of weights that drift (0..n_features).
    mag_change
        Change in [0, 1] of each drifting weight per row (0: no drift).
    noise_percentage
        Probability in [0, 1] that a label is flipped.
    sigma
        Probability in [0, 1] that a drifting weight reverses its direction after a row.
    seed
        Random seed (``None``: a random one).
    n_samples
        Number of rows (``None``: infinite).

    Examples
    --------
    >>> stream = Hyperplane(n_features=3, mag_change=0.01, seed=0, n_samples=4)
    >>> for x, y in stream:
    ...     print({k: round(v, 3) for k, v in x.items()}, y)
    {'x0': 0.259, 'x1': 0.511, 'x2': 0.405} 0
    {'x0': 0.583, 'x1': 0.908, 'x2': 0.505} 1
    {'x0': 0.251, 'x1': 0.91, 'x2': 0.983} 1
    {'x0': 0.73, 'x1': 0.899, 'x2': 0.684} 1
    >>> stream.drift_positions
    ()

    References
    ----------
    [^1]: Hulten, G., Spencer, L. and Domingos, P. (2001). Mining time-changing data streams.
          In KDD'01, 97-106.
    """

    _INTEGER_KEYS = True

    def __init__(
        self,
        n_features: int = 10,
        n_drift_features: int = 2,
        mag_change: float = 0.0,
        noise_percentage: float = 0.05,
        sigma: float = 0.1,
        seed: int | None = 0,
        n_samples: int | None = DEFAULT_N_SAMPLES,
    ) -> None:
        if not _is_int(n_features) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
        if not _is_int(n_drift_features) or not 0 <= n_drift_features <= n_features:
            raise ValueError(
                f"n_drift_features must be an integer in 0..n_features ({n_features}), "
                f"got {n_drift_features!r}"
            )
        self.n_drift_features = int(n_drift_features)
        self.mag_change = _check_fraction("mag_change", mag_change)
        self.noise_percentage = _check_fraction("noise_percentage", noise_percentage)
        self.sigma = _check_fraction("sigma", sigma)
        super().__init__(
            Schema(_numbered(int(n_features))), seed=seed, n_samples=n_samples, name="Hyperplane"
        )

    def _generator(self) -> Any:
        return synth.Hyperplane(
            seed=self._seed,
            n_features=self.schema.n_features,
            n_drift_features=self.n_drift_features,
            mag_change=self.mag_change,
            noise_percentage=self.noise_percentage,
            sigma=self.sigma,
        )
