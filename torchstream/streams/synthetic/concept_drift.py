"""Two streams joined by an abrupt or gradual concept drift."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from torchstream.schema import Schema
from torchstream.streams.base import Row, Stream
from torchstream.streams.synthetic._common import _check_n_samples, _is_int, _resolve_seed

__all__ = ["ConceptDrift"]


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
    >>> from torchstream.streams.synthetic import SEA
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
