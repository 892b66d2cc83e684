"""Shared parts of the storages: argument validators, seeded generators and the base classes
that hold the counters, the generator and the ``state_dict`` plumbing."""

from __future__ import annotations

import math
import operator
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from typing_extensions import Self


def _check_int(value: Any, argument: str, minimum: int = 1) -> int:
    try:
        number = operator.index(value)  # int, numpy / torch integers; not floats
    except TypeError:
        number = None
    if isinstance(value, bool) or number is None or number < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}")
    return number


def _check_prob(value: Any, argument: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or math.isnan(value)
        or not 0.0 < value <= 1.0
    ):
        raise ValueError(f"{argument} must be in (0, 1], got {value!r}")
    return float(value)


def _make_generator(seed: int | None) -> tuple[int, torch.Generator]:
    if seed is None:
        seed = secrets.randbits(63)
    try:
        value = None if isinstance(seed, bool) else operator.index(seed)
        if value is None:
            raise TypeError
        return value, torch.Generator().manual_seed(value)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise ValueError(
            f"seed must be None or an integer in [-2**63, 2**64), got {seed!r}"
        ) from None


def _as_rows(X: Any, n_features: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    X = torch.as_tensor(X)
    if X.dim() != 2 or X.shape[1] != n_features:
        raise ValueError(f"X must have shape [B, d={n_features}], got {list(X.shape)}")
    X = X.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(X).all()):
        raise ValueError("X must contain only finite values (found NaN or inf)")
    return X


def _as_values(values: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    values = torch.as_tensor(values)
    if values.dim() == 0:
        values = values.reshape(1)
    if values.dim() != 1:
        raise ValueError(f"values must have shape [B], got {list(values.shape)}")
    values = values.to(device=device, dtype=dtype)
    if not bool(torch.isfinite(values).all()):
        raise ValueError("values must contain only finite values (found NaN or inf)")
    return values


def _check_n(n: Any) -> int:
    return _check_int(n, "n", minimum=0)


def _check_state(state: Mapping[str, Any], own: Mapping[str, Any], name: str) -> None:
    for key, value in own.items():
        if state.get(key) != value:
            raise ValueError(f"state has {key}={state.get(key)!r}, this {name} has {key}={value!r}")


# ---------------------------------------------------------------------------------- bases
class _SeededStorage:
    """Seed, CPU generator and row counter of a storage, and the ``state_dict`` built from them.

    A subclass sets ``_config()`` (the settings a state must match) and, if it holds data,
    ``_content()`` / ``_load_content()``; the state is ``{**config, **content, "n_seen",
    "seed", "generator"}``.
    """

    seed: int
    generator: torch.Generator
    n_seen: int

    def _init_random(self, seed: int | None) -> None:
        self.seed, self.generator = _make_generator(seed)
        self.n_seen = 0

    def _config(self) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _content(self) -> dict[str, Any]:
        return {}

    def _load_content(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {
            **self._config(),
            **self._content(),
            "n_seen": self.n_seen,
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        _check_state(state, self._config(), type(self).__name__)
        self._load_content(state)
        self.n_seen = int(state["n_seen"])
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())


class _TensorStorage(_SeededStorage):
    """A seeded storage whose entries live in a tensor ``_data`` (first dimension: entries)
    with the stream index of each entry in ``_times``; ``len(self)`` entries are in use."""

    _data: torch.Tensor
    _times: torch.Tensor
    _data_key: str  # name of the data in the state

    def __len__(self) -> int:  # pragma: no cover
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        return self._data.device

    @property
    def dtype(self) -> torch.dtype:
        return self._data.dtype

    @property
    def times(self) -> torch.Tensor:
        """Stream index (0-based, counting every entry seen) of each stored entry ``[len]``."""
        return self._times[: len(self)]

    def _content(self) -> dict[str, Any]:
        return {self._data_key: self._data[: len(self)].clone(), "times": self.times.clone()}

    def to(self, device: torch.device | str) -> Self:
        """Move the stored entries to ``device`` (the generator stays on the CPU)."""
        self._data, self._times = self._data.to(device), self._times.to(device)
        return self


# ---------------------------------------------------------------------------------- reservoirs
class _Reservoir(_TensorStorage):
    """Fixed-size reservoir of ``d``-dimensional rows: buffer, counters, sampling, state."""

    _data_key = "rows"

    def __init__(
        self,
        size: int,
        n_features: int,
        *,
        seed: int | None,
        dtype: torch.dtype,
        device: torch.device | str | None,
    ) -> None:
        self.size = _check_int(size, "size")
        self.n_features = _check_int(n_features, "n_features")
        self._init_random(seed)
        self._data = torch.zeros(self.size, self.n_features, dtype=dtype, device=device)
        self._times = torch.zeros(self.size, dtype=torch.long, device=device)
        self._len = 0

    # ------------------------------------------------------------------ content
    @property
    def rows(self) -> torch.Tensor:
        """The stored rows ``[len, d]`` by slot (a view: do not modify)."""
        return self._data[: self._len]

    def __len__(self) -> int:
        return self._len

    # ------------------------------------------------------------------ update
    def update(self, X: torch.Tensor) -> None:
        """Add the rows of ``X`` ``[B, d]`` (in time order)."""
        X = _as_rows(X, self.n_features, self.dtype, self.device)
        b = X.shape[0]
        n_fill = min(self.size - self._len, b)
        if n_fill > 0:
            self._data[self._len : self._len + n_fill] = X[:n_fill]
            self._times[self._len : self._len + n_fill] = torch.arange(
                self.n_seen, self.n_seen + n_fill, device=self.device
            )
            self._len += n_fill
        m = b - n_fill
        if m > 0:
            # one uniform number per row that meets a full reservoir, all drawn at once
            u = torch.rand(m, dtype=torch.float64, generator=self.generator)
            slot = self._slots(u, first=self.n_seen + n_fill)  # [m], -1 = row not stored
            entered = (slot >= 0).nonzero().squeeze(1)
            if entered.numel():
                # apply the decisions in time order: the last row written to a slot wins
                last = torch.full((self.size,), -1, dtype=torch.long)
                last.scatter_reduce_(0, slot[entered], entered, reduce="amax")
                written = (last >= 0).nonzero().squeeze(1)
                source = last[written]
                written, source = written.to(self.device), source.to(self.device)
                self._data[written] = X[n_fill + source]
                self._times[written] = self.n_seen + n_fill + source
        self.n_seen += b

    def _slots(self, u: torch.Tensor, first: int) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------------------ sampling
    def sample_indices(self, n: int) -> torch.Tensor:
        """Slots ``[n]`` (long) of ``n`` uniform draws with replacement from the stored rows."""
        n = _check_n(n)
        if self._len == 0:
            raise ValueError(f"{type(self).__name__} is empty: update it before sampling")
        idx = torch.randint(0, self._len, (n,), generator=self.generator)
        return idx.to(self.device)

    def sample(self, n: int) -> torch.Tensor:
        """``n`` rows ``[n, d]`` drawn uniformly with replacement from the stored rows
        (``rows[sample_indices(n)]``)."""
        return self._data[self.sample_indices(n)]

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, "size": self.size, "n_features": self.n_features}

    def _load_content(self, state: Mapping[str, Any]) -> None:
        rows = torch.as_tensor(state["rows"])
        n = rows.shape[0]
        self._data.zero_()
        self._times.zero_()
        self._data[:n] = rows.to(self.device, self.dtype)
        self._times[:n] = torch.as_tensor(state["times"]).to(self.device, torch.long)
        self._len = n

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(size={self.size}, n_features={self.n_features}, "
            f"len={self._len}, n_seen={self.n_seen})"
        )
