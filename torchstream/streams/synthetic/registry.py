"""Ready-made benchmark streams, by name."""

from __future__ import annotations

from collections.abc import Callable

from torchstream.streams.base import Stream
from torchstream.streams.synthetic._common import (
    DEFAULT_N_SAMPLES,
    _check_n_samples,
    _resolve_seed,
)
from torchstream.streams.synthetic.agrawal import Agrawal
from torchstream.streams.synthetic.concept_drift import ConceptDrift
from torchstream.streams.synthetic.friedman import Friedman
from torchstream.streams.synthetic.hyperplane import Hyperplane
from torchstream.streams.synthetic.sea import SEA
from torchstream.streams.synthetic.stagger import STAGGER

__all__ = ["SYNTHETIC", "agrawal_drift", "make_synthetic"]


def _switch(
    cls: Callable[..., Stream],
    before: int,
    after: int,
    *,
    position: int,
    seed: int,
    width: int = 1,
    n_samples: int | None = None,
) -> ConceptDrift:
    """Infinite ``cls(before)`` drifting to infinite ``cls(after)`` at ``position``.

    The two streams have seeds ``seed`` and ``seed + 1``; ``seed`` also seeds the choices.
    """
    return ConceptDrift(
        cls(before, seed=seed, n_samples=None),
        cls(after, seed=seed + 1, n_samples=None),
        position=position,
        width=width,
        seed=seed,
        n_samples=n_samples,
    )


def agrawal_drift(
    n_samples: int | None = DEFAULT_N_SAMPLES,
    position: int = 5_000,
    width: int = 1,
    seed: int | None = 0,
) -> ConceptDrift:
    """Agrawal function 0 drifting to function 2 at ``position``.

    Both functions use ``age``; function 2 also uses ``elevel``, and about half of the labels
    change. The streams before and after the drift have seeds ``seed`` and ``seed + 1`` (so
    the rows after the drift do not repeat the first ones); ``seed`` also seeds the choices.

    >>> stream = agrawal_drift(n_samples=2_000, position=1_000)
    >>> len(stream), stream.drift_positions
    (2000, (1000,))
    """
    seed = _resolve_seed(seed)
    return _switch(Agrawal, 0, 2, position=position, width=width, seed=seed, n_samples=n_samples)


def _agrawal(n_samples: int | None, seed: int) -> Stream:
    return Agrawal(0, seed=seed, n_samples=n_samples)


def _agrawal_drift(n_samples: int | None, seed: int) -> Stream:
    n = DEFAULT_N_SAMPLES if n_samples is None else n_samples
    return agrawal_drift(n_samples=n, position=max(n // 2, 1), seed=seed)


def _sea(n_samples: int | None, seed: int) -> Stream:
    return SEA(0, seed=seed, n_samples=n_samples)


def _sea_drift(n_samples: int | None, seed: int) -> Stream:
    # Threshold 7 -> 9.5: the largest change among SEA's variants (about 21% of labels flip).
    n = DEFAULT_N_SAMPLES if n_samples is None else n_samples
    return _switch(SEA, 2, 3, position=max(n // 2, 1), seed=seed, n_samples=n)


def _stagger(n_samples: int | None, seed: int) -> Stream:
    return STAGGER(0, seed=seed, n_samples=n_samples)


def _stagger_drift(n_samples: int | None, seed: int) -> Stream:
    # The original STAGGER sequence: concept 0, then 1 after a third, then 2 after two thirds.
    n = DEFAULT_N_SAMPLES if n_samples is None else n_samples
    first, second = max(n // 3, 1), max(2 * n // 3, 2)
    inner = _switch(STAGGER, 0, 1, position=first, seed=seed)
    return ConceptDrift(
        inner,
        STAGGER(2, seed=seed + 2, n_samples=None),
        position=second,
        seed=seed + 1,
        n_samples=n,
    )


def _hyperplane(n_samples: int | None, seed: int) -> Stream:
    return Hyperplane(mag_change=0.001, seed=seed, n_samples=n_samples)


def _friedman(n_samples: int | None, seed: int) -> Stream:
    return Friedman(seed=seed, n_samples=n_samples)


SYNTHETIC: dict[str, Callable[..., Stream]] = {
    "agrawal": _agrawal,
    "agrawal-drift": _agrawal_drift,
    "sea": _sea,
    "sea-drift": _sea_drift,
    "stagger": _stagger,
    "stagger-drift": _stagger_drift,
    "hyperplane": _hyperplane,
    "friedman": _friedman,
}
"""Named synthetic streams; each builder takes ``(n_samples, seed)``.

* ``agrawal``: Agrawal function 0. ``agrawal-drift``: :func:`agrawal_drift`, drift in the
  middle.
* ``sea``: SEA variant 0. ``sea-drift``: variant 2 (threshold 7) to variant 3 (threshold
  9.5) in the middle.
* ``stagger``: STAGGER concept 0. ``stagger-drift``: concepts 0, 1, 2 with abrupt drifts
  after one and two thirds of the stream.
* ``hyperplane``: rotating hyperplane, 10 features, 2 of them drifting (``mag_change=0.001``).
* ``friedman``: Friedman regression.
"""


def make_synthetic(name: str, *, n_samples: int | None = None, seed: int = 0) -> Stream:
    """The synthetic stream registered as ``name`` in :data:`SYNTHETIC`.

    ``n_samples=None`` gives the default length (10 000 rows); drifts of the ``-drift``
    streams are placed relative to the length. The stream is named ``name``.

    >>> stream = make_synthetic("stagger-drift", n_samples=900)
    >>> stream.name, len(stream), stream.drift_positions
    ('stagger-drift', 900, (300, 600))
    >>> make_synthetic("sine")
    Traceback (most recent call last):
    ...
    ValueError: unknown synthetic stream 'sine'; known: agrawal, agrawal-drift, sea, \
sea-drift, stagger, stagger-drift, hyperplane, friedman
    """
    builder = SYNTHETIC.get(name)
    if builder is None:
        raise ValueError(f"unknown synthetic stream {name!r}; known: {', '.join(SYNTHETIC)}")
    n = DEFAULT_N_SAMPLES if n_samples is None else _check_n_samples(n_samples)
    stream = builder(n, _resolve_seed(seed))
    stream.name = name
    return stream
