"""Argument checks and the base class of the streams built on river's generators."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

import numpy as np

from torchstream.schema import Schema
from torchstream.streams.base import Row, Stream, Task

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


# ---------------------------------------------------------------------- base class
class _RiverGenerator(Stream):
    """A stream of the rows of a river generator, rebuilt with the same seed on every pass.

    Subclasses check their own arguments, then call this constructor, which resolves
    ``seed`` (kept as given in ``seed``, as an integer in ``_seed``) and checks
    ``n_samples``. They name the river class in :attr:`_RIVER` and, in :attr:`_PARAMS`, their
    attributes that it takes as keyword arguments of the same names (or override
    :meth:`_generator`). When :attr:`_INTEGER_KEYS` is true the river rows have integer keys,
    renamed to ``"x0"``, ``"x1"``, ... (see :func:`_numbered`).
    """

    _RIVER: ClassVar[Callable[..., Any]]
    _PARAMS: ClassVar[tuple[str, ...]] = ()
    _INTEGER_KEYS: ClassVar[bool] = False

    def __init__(
        self,
        schema: Schema,
        *,
        seed: int | None,
        n_samples: int | None,
        task: Task = "classification",
        classes: Sequence[Any] | None = (0, 1),
        name: str | None = None,
    ) -> None:
        self.seed = seed
        self._seed = _resolve_seed(seed)
        super().__init__(
            schema,
            task=task,
            classes=classes,
            n_samples=_check_n_samples(n_samples),
            name=name,
        )

    def _generator(self) -> Any:
        """A fresh river generator seeded with ``self._seed``."""
        params = {name: getattr(self, name) for name in self._PARAMS}
        return self._RIVER(seed=self._seed, **params)

    def _rows(self) -> Iterator[tuple[Row, Any]]:
        gen = self._generator()
        return _renamed(gen) if self._INTEGER_KEYS else iter(gen)
