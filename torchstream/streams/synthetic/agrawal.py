"""Agrawal et al.'s loan-approval stream."""

from __future__ import annotations

from typing import ClassVar

from river.datasets import synth

from torchstream.schema import Schema
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _check_choice,
    _check_fraction,
    _RiverGenerator,
)

__all__ = ["Agrawal"]


class Agrawal(_RiverGenerator):
    """Agrawal et al.'s loan-approval generator [^1] (river's ``synth.Agrawal``).

    Nine features: ``salary``, ``commission``, ``age``, ``elevel``, ``car``, ``zipcode``,
    ``hvalue``, ``hyears`` and ``loan``. All are **numeric** columns: ``elevel`` (0..4), ``car``
    (1..20) and ``zipcode`` (0..8) are integer codes that are kept as numbers, as in the
    feature-importance studies that use this stream (iPFI), so every feature is one column.
    The label (``0`` or ``1``) is one of ten classification functions of the features;
    switching functions with :class:`ConceptDrift` gives a real concept drift.

    Parameters
    ----------
    classification_function
        Which of the ten functions (0..9) labels the rows. Function 0 is
        ``age < 40 or age >= 60``.
    seed
        Random seed (``None``: a random one).
    n_samples
        Number of rows (``None``: infinite).
    balance_classes
        Whether to alternate the classes (rejection sampling), making them balanced.
    perturbation
        Noise level in [0, 1] added to the numeric features after labelling.

    Examples
    --------
    >>> stream = Agrawal(classification_function=0, seed=0, n_samples=100)
    >>> x, y = next(iter(stream))
    >>> {k: round(v) for k, v in x.items()}, y
    ({'salary': 129775, 'commission': 0, 'age': 68, 'elevel': 3, 'car': 2, 'zipcode': 4, \
'hvalue': 586186, 'hyears': 16, 'loan': 202467}, 1)
    >>> len(stream), stream.n_features, stream.classes
    (100, 9, [0, 1])

    References
    ----------
    [^1]: Agrawal, R., Imielinski, T. and Swami, A. (1993). Database mining: a performance
          perspective. IEEE Transactions on Knowledge and Data Engineering, 5(6), 914-925.
    """

    _RIVER = synth.Agrawal
    _PARAMS = ("classification_function", "balance_classes", "perturbation")

    FEATURES: ClassVar[tuple[str, ...]] = (
        "salary",
        "commission",
        "age",
        "elevel",
        "car",
        "zipcode",
        "hvalue",
        "hyears",
        "loan",
    )

    def __init__(
        self,
        classification_function: int = 0,
        seed: int | None = 0,
        n_samples: int | None = DEFAULT_N_SAMPLES,
        balance_classes: bool = False,
        perturbation: float = 0.0,
    ) -> None:
        self.classification_function = _check_choice(
            "classification_function", classification_function, range(10)
        )
        self.balance_classes = bool(balance_classes)
        self.perturbation = _check_fraction("perturbation", perturbation)
        super().__init__(
            Schema(self.FEATURES),
            seed=seed,
            n_samples=n_samples,
            name=f"Agrawal({self.classification_function})",
        )
