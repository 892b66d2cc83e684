"""Street and Kim's SEA concepts."""

from __future__ import annotations

from river.datasets import synth

from torchstream.schema import Schema
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _check_choice,
    _check_fraction,
    _numbered,
    _RiverGenerator,
)

__all__ = ["SEA"]


class SEA(_RiverGenerator):
    """Street and Kim's SEA concepts [^1] (river's ``synth.SEA``).

    Three features uniform in [0, 10], named ``"x0"``, ``"x1"`` and ``"x2"`` (river's integer
    keys 0, 1, 2 renamed to strings); only the first two matter. The label is
    ``x0 + x1 > threshold`` (``False`` / ``True``), with threshold 8, 9, 7 or 9.5 for variants
    0, 1, 2 and 3.

    Parameters
    ----------
    variant
        The threshold variant (0..3).
    seed
        Random seed (``None``: a random one).
    n_samples
        Number of rows (``None``: infinite).
    noise
        Probability in [0, 1] that a label is flipped.

    Examples
    --------
    >>> stream = SEA(variant=0, seed=0, n_samples=5)
    >>> for x, y in stream:
    ...     print({k: round(v, 3) for k, v in x.items()}, y)
    {'x0': 8.444, 'x1': 7.58, 'x2': 4.206} True
    {'x0': 2.589, 'x1': 5.113, 'x2': 4.049} False
    {'x0': 7.838, 'x1': 3.033, 'x2': 4.766} True
    {'x0': 5.834, 'x1': 9.081, 'x2': 5.047} True
    {'x0': 2.818, 'x1': 7.558, 'x2': 6.184} True

    References
    ----------
    [^1]: Street, W. N. and Kim, Y. (2001). A streaming ensemble algorithm (SEA) for
          large-scale classification. In KDD'01, 377-382.
    """

    _RIVER = synth.SEA
    _PARAMS = ("variant", "noise")
    _INTEGER_KEYS = True

    def __init__(
        self,
        variant: int = 0,
        seed: int | None = 0,
        n_samples: int | None = DEFAULT_N_SAMPLES,
        noise: float = 0.0,
    ) -> None:
        self.variant = _check_choice("variant", variant, range(4))
        self.noise = _check_fraction("noise", noise)
        super().__init__(
            Schema(_numbered(3)),
            seed=seed,
            n_samples=n_samples,
            classes=(False, True),
            name=f"SEA({self.variant})",
        )
