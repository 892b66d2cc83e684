"""Schlimmer and Granger's STAGGER concepts."""

from __future__ import annotations

from typing import ClassVar, Literal

from river.datasets import synth

from torchstream.schema import Feature, Schema
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _check_choice,
    _RiverGenerator,
)

__all__ = ["STAGGER"]


class STAGGER(_RiverGenerator):
    """Schlimmer and Granger's STAGGER concepts [^1] (river's ``synth.STAGGER``).

    Three categorical features, kept as river's integer codes: ``size`` (0 small, 1 medium,
    2 large), ``color`` (0 red, 1 blue, 2 green) and ``shape`` (0 circle, 1 square,
    2 triangle); :attr:`CATEGORY_NAMES` holds these meanings. They are one-hot encoded by
    default (9 columns). The label (``0`` / ``1``) is one of three concepts: 0 is
    ``size small and color red``, 1 is ``color green or shape circle``, 2 is
    ``size medium or large``.

    Parameters
    ----------
    classification_function
        Which concept (0..2) labels the rows.
    seed
        Random seed of the features (``None``: a random one).
    n_samples
        Number of rows (``None``: infinite).
    balance_classes
        Whether to alternate the classes (rejection sampling), making them balanced.
    encoding
        ``"onehot"`` (default) or ``"ordinal"`` encoding of the three features.

    Examples
    --------
    >>> stream = STAGGER(classification_function=0, seed=0, n_samples=3)
    >>> list(stream)
    [({'size': 1, 'color': 1, 'shape': 0}, 0), ({'size': 1, 'color': 2, 'shape': 1}, 0), \
({'size': 1, 'color': 1, 'shape': 1}, 0)]
    >>> stream.schema.columns[:3]
    ('size=0', 'size=1', 'size=2')

    References
    ----------
    [^1]: Schlimmer, J. C. and Granger, R. H. (1986). Incremental learning from noisy data.
          Machine Learning, 1(3), 317-354.
    """

    _RIVER = synth.STAGGER
    _PARAMS = ("classification_function", "balance_classes")

    CATEGORY_NAMES: ClassVar[dict[str, tuple[str, ...]]] = {
        "size": ("small", "medium", "large"),
        "color": ("red", "blue", "green"),
        "shape": ("circle", "square", "triangle"),
    }

    def __init__(
        self,
        classification_function: int = 0,
        seed: int | None = 0,
        n_samples: int | None = DEFAULT_N_SAMPLES,
        balance_classes: bool = False,
        encoding: Literal["onehot", "ordinal"] = "onehot",
    ) -> None:
        self.classification_function = _check_choice(
            "classification_function", classification_function, range(3)
        )
        self.balance_classes = bool(balance_classes)
        if encoding not in ("onehot", "ordinal"):
            raise ValueError(f"encoding must be 'onehot' or 'ordinal', got {encoding!r}")
        features = [Feature(name, "categorical", (0, 1, 2)) for name in self.CATEGORY_NAMES]
        super().__init__(
            Schema(features, encoding=encoding),
            seed=seed,
            n_samples=n_samples,
            name=f"STAGGER({self.classification_function})",
        )
