"""Friedman's regression problem."""

from __future__ import annotations

from river.datasets import synth

from torchstream.schema import Schema
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _numbered,
    _RiverGenerator,
)

__all__ = ["Friedman"]


class Friedman(_RiverGenerator):
    """Friedman's regression problem [^1] (river's ``synth.Friedman``).

    Ten features ``"x0"`` .. ``"x9"`` uniform in [0, 1] (river's integer keys renamed); the
    target is ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1)``, so only the
    first five features matter.

    Parameters
    ----------
    seed
        Random seed of the features and the noise (``None``: a random one).
    n_samples
        Number of rows (``None``: infinite).

    Examples
    --------
    >>> stream = Friedman(seed=0, n_samples=100)
    >>> x, y = next(iter(stream))
    >>> [round(v, 2) for v in x.values()], round(y, 2)
    ([0.84, 0.76, 0.42, 0.26, 0.51, 0.4, 0.78, 0.3, 0.48, 0.58], 15.31)
    >>> stream.task, stream.classes
    ('regression', None)

    References
    ----------
    [^1]: Friedman, J. H. (1991). Multivariate adaptive regression splines. The Annals of
          Statistics, 19(1), 1-67.
    """

    _RIVER = synth.Friedman
    _INTEGER_KEYS = True

    def __init__(self, seed: int | None = 0, n_samples: int | None = DEFAULT_N_SAMPLES) -> None:
        super().__init__(
            Schema(_numbered(10)),
            seed=seed,
            n_samples=n_samples,
            task="regression",
            classes=None,
            name="Friedman",
        )
