"""Synthetic streams with known drift, built on river's generators.

Every stream here is restartable and deterministic: each pass builds a fresh river generator
with the same seed, so two passes over one stream yield the same rows. ``seed=None`` draws a
random seed once, when the stream is built (passes over that stream are still identical).
``n_samples=None`` makes a generator stream infinite.

:class:`ConceptDrift` joins two streams with an abrupt or gradual drift and nests, so
``ConceptDrift(ConceptDrift(a, b, ...), c, ...)`` gives a stream with several drifts.
:data:`SYNTHETIC` and :func:`make_synthetic` name a few ready-made benchmark streams.

Example
-------
>>> stream = make_synthetic("agrawal-drift", n_samples=1_000)
>>> len(stream), stream.drift_positions, stream.classes
(1000, (500,), [0, 1])
>>> X, y = next(stream.batches(4))
>>> X.shape, y.tolist()
(torch.Size([4, 9]), [1, 1, 1, 0])
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal

import numpy as np
from river.datasets import synth

from torchstream.schema import Feature, Schema
from torchstream.streams.base import Row, Stream

__all__ = [
    "SEA",
    "STAGGER",
    "SYNTHETIC",
    "Agrawal",
    "ConceptDrift",
    "Friedman",
    "Hyperplane",
    "agrawal_drift",
    "make_synthetic",
]

DEFAULT_N_SAMPLES = 10_000


# ---------------------------------------------------------------------- argument checks
def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _check_n_samples(n_samples: Any) -> int | None:
    if n_samples is None:
        return None
    if not _is_int(n_samples) or n_samples < 0:
        raise ValueError(f"n_samples must be a non-negative integer or None, got {n_samples!r}")
    return int(n_samples)


def _resolve_seed(seed: Any) -> int:
    """An integer seed; ``None`` becomes a random one, drawn once."""
    if seed is None:
        return random.SystemRandom().randrange(2**32)
    if not _is_int(seed) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer or None, got {seed!r}")
    return int(seed)


def _check_choice(name: str, value: Any, allowed: range) -> int:
    if not _is_int(value) or value not in allowed:
        raise ValueError(
            f"{name} must be an integer in {allowed.start}..{allowed.stop - 1}, got {value!r}"
        )
    return int(value)


def _check_fraction(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [0, 1], got {value!r}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


def _numbered(n: int) -> list[str]:
    return [f"x{i}" for i in range(n)]


def _renamed(gen: Any) -> Iterator[tuple[Row, Any]]:
    """River rows with integer keys ``0, 1, ...`` -> rows with keys ``"x0", "x1", ...``."""
    for x, y in gen:
        yield {f"x{k}": v for k, v in x.items()}, y


# ---------------------------------------------------------------------- generators
class Agrawal(Stream):
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
        self.seed = seed
        self._seed = _resolve_seed(seed)
        self.balance_classes = bool(balance_classes)
        self.perturbation = _check_fraction("perturbation", perturbation)
        super().__init__(
            Schema(self.FEATURES),
            task="classification",
            classes=(0, 1),
            n_samples=_check_n_samples(n_samples),
            name=f"Agrawal({self.classification_function})",
        )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        return iter(
            synth.Agrawal(
                classification_function=self.classification_function,
                seed=self._seed,
                balance_classes=self.balance_classes,
                perturbation=self.perturbation,
            )
        )


class SEA(Stream):
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

    def __init__(
        self,
        variant: int = 0,
        seed: int | None = 0,
        n_samples: int | None = DEFAULT_N_SAMPLES,
        noise: float = 0.0,
    ) -> None:
        self.variant = _check_choice("variant", variant, range(4))
        self.seed = seed
        self._seed = _resolve_seed(seed)
        self.noise = _check_fraction("noise", noise)
        super().__init__(
            Schema(_numbered(3)),
            task="classification",
            classes=(False, True),
            n_samples=_check_n_samples(n_samples),
            name=f"SEA({self.variant})",
        )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        gen = synth.SEA(variant=self.variant, noise=self.noise, seed=self._seed)
        return _renamed(gen)


class STAGGER(Stream):
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
        Random seed (``None``: a random one).
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
        self.seed = seed
        self._seed = _resolve_seed(seed)
        self.balance_classes = bool(balance_classes)
        if encoding not in ("onehot", "ordinal"):
            raise ValueError(f"encoding must be 'onehot' or 'ordinal', got {encoding!r}")
        schema = Schema(
            [Feature(name, "categorical", (0, 1, 2)) for name in self.CATEGORY_NAMES],
            encoding=encoding,
        )
        super().__init__(
            schema,
            task="classification",
            classes=(0, 1),
            n_samples=_check_n_samples(n_samples),
            name=f"STAGGER({self.classification_function})",
        )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        return iter(
            synth.STAGGER(
                classification_function=self.classification_function,
                seed=self._seed,
                balance_classes=self.balance_classes,
            )
        )


class Hyperplane(Stream):
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
        self.seed = seed
        self._seed = _resolve_seed(seed)
        super().__init__(
            Schema(_numbered(int(n_features))),
            task="classification",
            classes=(0, 1),
            n_samples=_check_n_samples(n_samples),
            name="Hyperplane",
        )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        gen = synth.Hyperplane(
            seed=self._seed,
            n_features=self.schema.n_features,
            n_drift_features=self.n_drift_features,
            mag_change=self.mag_change,
            noise_percentage=self.noise_percentage,
            sigma=self.sigma,
        )
        return _renamed(gen)


class Friedman(Stream):
    """Friedman's regression problem [^1] (river's ``synth.Friedman``).

    Ten features ``"x0"`` .. ``"x9"`` uniform in [0, 1] (river's integer keys renamed); the
    target is ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4 + N(0, 1)``, so only the
    first five features matter.

    Parameters
    ----------
    seed
        Random seed (``None``: a random one).
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

    def __init__(self, seed: int | None = 0, n_samples: int | None = DEFAULT_N_SAMPLES) -> None:
        self.seed = seed
        self._seed = _resolve_seed(seed)
        super().__init__(
            Schema(_numbered(10)),
            task="regression",
            n_samples=_check_n_samples(n_samples),
            name="Friedman",
        )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        gen = synth.Friedman(seed=self._seed)
        return _renamed(gen)


# ---------------------------------------------------------------------- composition
def _schema_difference(a: Schema, b: Schema) -> str | None:
    """A short description of how two schemas differ, or ``None`` when they are equal."""
    da, db = a.to_dict(), b.to_dict()
    if da == db:
        return None
    na = [f["name"] for f in da["features"]]
    nb = [f["name"] for f in db["features"]]
    if na != nb:
        return f"feature names differ: a has {na}, b has {nb}"
    for fa, fb in zip(da["features"], db["features"]):
        if fa != fb:
            keys = [k for k in fa if fa[k] != fb[k]]
            parts = ", ".join(f"{k} {fa[k]!r} vs {fb[k]!r}" for k in keys)
            return f"feature {fa['name']!r} differs: {parts}"
    keys = [k for k in ("encoding", "unseen") if da[k] != db[k]]
    return ", ".join(f"{k} {da[k]!r} vs {db[k]!r}" for k in keys)


def _class_key(classes: list[Any]) -> set[tuple[type, Any]]:
    # Typed, so that 0 / False or 1 / 1.0 (equal in Python) count as different classes.
    return {(type(c), c) for c in classes}


class ConceptDrift(Stream):
    """Two streams joined by an abrupt or gradual concept drift.

    Row ``t`` (counting from 0) is drawn from ``b`` with probability

    ``p(t) = 1 / (1 + exp(-4 (t - position) / width))``

    and from ``a`` otherwise: the sigmoid drift of MOA's ``ConceptDriftStream`` [^1], whose
    slope at ``position`` is ``1 / width``, so the change takes about ``width`` rows. The
    chosen stream gives its next row, so ``a`` and ``b`` each advance only when drawn.
    ``width=1`` is an exact switch: rows ``0 .. position - 1`` are the first rows of ``a``,
    rows from ``position`` on are the rows of ``b`` (a sigmoid of width 1 would still mix the
    rows next to ``position``). The choices come from a numpy generator seeded with ``seed``.

    ``a`` and ``b`` must have equal schemas and the same task; for classification, the same
    set of classes (or classes still unknown in one of them, in which case the joined stream
    discovers its classes as they come).

    ``drift_positions`` is the drifts of ``a`` before ``position``, then ``position``, then
    the drifts of ``b`` shifted by ``position``. The shift is exact for an abrupt drift; for a
    gradual one ``b``'s row counter lags behind, so ``b``'s drifts are approximate there.
    Positions at or after the end of the stream are dropped. Composition nests.

    Parameters
    ----------
    a
        The stream before the drift.
    b
        The stream after the drift.
    position
        Row of the drift: the first row of ``b`` for ``width=1``, the midpoint of the change
        (``p = 1/2``) otherwise; at least 1 and before the end of the stream.
    width
        Length of the change in rows (1: abrupt).
    seed
        Seed of the choices between ``a`` and ``b`` (``None``: a random one). Give nested
        gradual drifts different seeds.
    n_samples
        Number of rows. ``None`` gives the shorter of ``a`` and ``b`` (infinite when both
        are), which neither can run out of. A longer stream is checked when it is built: if
        the (seeded, hence known) choices would draw more rows from ``a`` or ``b`` than it
        has, a ``ValueError`` says which stream runs out at which row.

    Examples
    --------
    >>> a = SEA(variant=2, seed=0, n_samples=None)
    >>> b = SEA(variant=3, seed=1, n_samples=None)
    >>> stream = ConceptDrift(a, b, position=600, width=100, n_samples=1_000)
    >>> len(stream), stream.drift_positions
    (1000, (600,))
    >>> c = SEA(variant=0, seed=2, n_samples=None)
    >>> nested = ConceptDrift(stream, c, position=800)
    >>> len(nested), nested.drift_positions
    (1000, (600, 800))

    References
    ----------
    [^1]: Bifet, A., Holmes, G., Pfahringer, B., Kirkby, R. and Gavaldà, R. (2009). New
          ensemble methods for evolving data streams. In KDD'09, 139-148.
    """

    _CHUNK = 1024

    def __init__(
        self,
        a: Stream,
        b: Stream,
        position: int,
        width: int = 1,
        seed: int | None = 0,
        n_samples: int | None = None,
    ) -> None:
        for name, s in (("a", a), ("b", b)):
            if not isinstance(s, Stream):
                raise TypeError(f"{name} must be a Stream, got {type(s).__name__}")
        if not _is_int(position) or position < 1:
            raise ValueError(f"position must be an integer >= 1, got {position!r}")
        if not _is_int(width) or width < 1:
            raise ValueError(f"width must be an integer >= 1, got {width!r}")
        diff = _schema_difference(a.schema, b.schema)
        if diff is not None:
            raise ValueError(f"a and b must have equal schemas: {diff}")
        if a.task != b.task:
            raise ValueError(f"a and b must have the same task: a is {a.task!r}, b is {b.task!r}")
        classes: list[Any] | None = None
        if a.task == "classification":
            fixed_a = getattr(a, "_fixed_classes", False)
            fixed_b = getattr(b, "_fixed_classes", False)
            if fixed_a and fixed_b:
                assert a.classes is not None and b.classes is not None
                if _class_key(a.classes) != _class_key(b.classes):
                    raise ValueError(
                        f"a and b must have the same classes: a has {a.classes!r}, "
                        f"b has {b.classes!r}"
                    )
                classes = list(a.classes)
        lengths = [s.n_samples for s in (a, b) if s.n_samples is not None]
        shortest = min(lengths) if lengths else None
        n_samples = _check_n_samples(n_samples)
        if n_samples is None:
            n_samples = shortest
        if n_samples is not None and position >= n_samples:
            raise ValueError(
                f"position ({position}) must be before the end of the stream "
                f"(n_samples={n_samples}); pass a larger n_samples or longer streams"
            )

        self.a, self.b = a, b
        self.position, self.width = int(position), int(width)
        self.seed = seed
        self._seed = _resolve_seed(seed)
        if n_samples is not None and shortest is not None and n_samples > shortest:
            self._check_supply(n_samples)

        drifts = [p for p in a.drift_positions if p < position]
        drifts.append(self.position)
        drifts.extend(self.position + p for p in b.drift_positions)
        if n_samples is not None:
            drifts = [p for p in drifts if p < n_samples]
        super().__init__(
            a.schema,
            task=a.task,
            classes=classes,
            n_samples=n_samples,
            drift_positions=drifts,
            name=f"ConceptDrift({a.name} -> {b.name} @ {position})",
        )

    def probability(self, t: int | np.ndarray) -> float | np.ndarray:
        """Probability ``p(t)`` that row ``t`` comes from ``b``."""
        tt = np.asarray(t, dtype=np.float64)
        if self.width == 1:
            p = (tt >= self.position).astype(np.float64)
        else:
            # 1 / (1 + exp(-z)) == (1 + tanh(z / 2)) / 2, which cannot overflow.
            z = 4.0 * (tt - self.position) / self.width
            p = 0.5 * (1.0 + np.tanh(0.5 * z))
        return float(p) if p.ndim == 0 else p

    def _choices(self) -> Iterator[bool]:
        """Whether row 0, 1, 2, ... comes from ``b`` (deterministic given the seed)."""
        rng = np.random.default_rng(self._seed)
        start = 0
        while True:
            t = np.arange(start, start + self._CHUNK)
            yield from (rng.random(self._CHUNK) < self.probability(t)).tolist()
            start += self._CHUNK

    def _check_supply(self, n_samples: int) -> None:
        used = {"a": 0, "b": 0}
        have = {"a": self.a.n_samples, "b": self.b.n_samples}
        for t, from_b in zip(range(n_samples), self._choices()):
            key = "b" if from_b else "a"
            used[key] += 1
            limit = have[key]
            if limit is not None and used[key] > limit:
                raise ValueError(
                    f"n_samples={n_samples} is too long: row {t} would be row {limit} of "
                    f"{key}, which has only {limit} rows; use a smaller n_samples or a longer "
                    f"{key}"
                )

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        its = {False: iter(self.a), True: iter(self.b)}
        for t, from_b in enumerate(self._choices()):
            try:
                yield next(its[from_b])
            except StopIteration:
                key = "b" if from_b else "a"
                raise RuntimeError(
                    f"{self.name}: stream {key} ran out of rows at row {t}"
                ) from None


# ---------------------------------------------------------------------- registry
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
    return ConceptDrift(
        Agrawal(0, seed=seed, n_samples=None),
        Agrawal(2, seed=seed + 1, n_samples=None),
        position=position,
        width=width,
        seed=seed,
        n_samples=n_samples,
    )


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
    return ConceptDrift(
        SEA(2, seed=seed, n_samples=None),
        SEA(3, seed=seed + 1, n_samples=None),
        position=max(n // 2, 1),
        seed=seed,
        n_samples=n,
    )


def _stagger(n_samples: int | None, seed: int) -> Stream:
    return STAGGER(0, seed=seed, n_samples=n_samples)


def _stagger_drift(n_samples: int | None, seed: int) -> Stream:
    # The original STAGGER sequence: concept 0, then 1 after a third, then 2 after two thirds.
    n = DEFAULT_N_SAMPLES if n_samples is None else n_samples
    first, second = max(n // 3, 1), max(2 * n // 3, 2)
    inner = ConceptDrift(
        STAGGER(0, seed=seed, n_samples=None),
        STAGGER(1, seed=seed + 1, n_samples=None),
        position=first,
        seed=seed,
    )
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
