"""Shared parts of the storages: argument validators, seeded generators and the base classes
that hold the counters, the generator and the ``state_dict`` plumbing."""

from __future__ import annotations

import math
import operator
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torchstream.devices import to_device

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


def _all_finite(X: torch.Tensor) -> bool:
    """Whether every value of ``X`` is finite, with one reduction in the common case: a finite
    sum proves it (a NaN or inf value makes the sum NaN or inf); only a non-finite sum (which
    finite values can also give, by overflow) pays for the exact element-wise test."""
    if not X.is_floating_point() and not X.is_complex():
        return True
    if math.isfinite(float(X.sum())):
        return True
    return bool(torch.isfinite(X).all())


def _as_rows(X: Any, n_features: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    if not isinstance(X, torch.Tensor):
        X = torch.as_tensor(X)
    if X.dim() != 2 or X.shape[1] != n_features:
        raise ValueError(f"X must have shape [B, d={n_features}], got {list(X.shape)}")
    X = X.to(device=device, dtype=dtype)
    if not _all_finite(X):
        raise ValueError("X must contain only finite values (found NaN or inf)")
    return X


def _as_values(values: Any, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    values = torch.as_tensor(values)
    if values.dim() == 0:
        values = values.reshape(1)
    if values.dim() != 1:
        raise ValueError(f"values must have shape [B], got {list(values.shape)}")
    values = values.to(device=device, dtype=dtype)
    if not _all_finite(values):
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

    def _config(self) -> dict[str, object]:  # pragma: no cover
        raise NotImplementedError

    def _content(self) -> dict[str, object]:
        return {}

    def _load_content(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, object]:
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

    def _content(self) -> dict[str, object]:
        return {self._data_key: self._data[: len(self)].clone(), "times": self.times.clone()}

    def to(self, device: torch.device | str) -> Self:
        """Move the stored entries to ``device`` (the generator stays on the CPU)."""
        self._data, self._times = self._data.to(device), self._times.to(device)
        return self


# ---------------------------------------------------------------------------------- reservoirs
class _Reservoir(_TensorStorage):
    """Fixed-size reservoir of ``d``-dimensional rows: buffer, counters, sampling, state.

    The hot paths are kept short: a row arriving at a full reservoir is placed with Python
    arithmetic on its one random number (one copy into a slot); a longer batch decides its
    slots on the host (``numpy``) and writes the surviving rows with one ``index_copy_``. The
    stream index of each slot is kept on the host and only turned into a tensor on request.
    """

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
        self._host_times = np.zeros(self.size, dtype=np.int64)
        self._slot_views: tuple[torch.Tensor, ...] | None = None  # _data[i:i+1], built lazily
        self._len = 0

    # ------------------------------------------------------------------ content
    @property
    def rows(self) -> torch.Tensor:
        """The stored rows ``[len, d]`` by slot (a view: do not modify)."""
        return self._data[: self._len]

    @property
    def times(self) -> torch.Tensor:
        """Stream index (0-based, counting every row seen) of each stored row ``[len]``."""
        return torch.from_numpy(self._host_times[: self._len].copy()).to(self.device)

    def __len__(self) -> int:
        return self._len

    def to(
        self, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Self:
        """Move the stored rows to ``device`` and / or ``dtype`` (the generator stays on the
        CPU). A narrower ``dtype`` than the stored rows' rounds them: callers use it only on an
        empty reservoir or to widen."""
        data = self._data.to(device=device, dtype=dtype)
        if data is not self._data:
            self._data = data
            self._slot_views = None
        return self

    # ------------------------------------------------------------------ update
    def update(self, X: torch.Tensor) -> None:
        """Add the rows of ``X`` ``[B, d]`` (in time order)."""
        self._insert(_as_rows(X, self.n_features, self.dtype, self.device))

    def _update_finite(self, X: torch.Tensor) -> None:
        """:meth:`update` with rows ``[B, d]`` the caller has already checked to be finite."""
        if X.dtype != self.dtype or X.device != self.device:
            X = X.to(device=self.device, dtype=self.dtype)
        self._insert(X)

    def _insert(self, X: torch.Tensor) -> None:
        b = X.shape[0]
        n_fill = min(self.size - self._len, b)
        if n_fill > 0:
            self._data[self._len : self._len + n_fill] = X[:n_fill]
            self._host_times[self._len : self._len + n_fill] = np.arange(
                self.n_seen, self.n_seen + n_fill
            )
            self._len += n_fill
        m = b - n_fill
        if m == 1:
            # one uniform number for the row (the same draw as the batched path below)
            u = float(torch.rand(1, dtype=torch.float64, generator=self.generator))
            slot = self._slot_of(u, self.n_seen + n_fill)
            if slot >= 0:
                if self._slot_views is None:
                    self._slot_views = self._data.split(1)
                self._slot_views[slot].copy_(X[n_fill:] if n_fill else X)
                self._host_times[slot] = self.n_seen + n_fill
        elif m > 1:
            # one uniform number per row that meets a full reservoir, all drawn at once
            u = torch.rand(m, dtype=torch.float64, generator=self.generator).numpy()
            slot = self._slots(u, first=self.n_seen + n_fill)  # [m], -1 = row not stored
            entered = np.flatnonzero(slot >= 0)
            if entered.size:
                # apply the decisions in time order: the last row written to a slot wins
                rev = entered[::-1]
                written, at = np.unique(slot[rev], return_index=True)
                source = rev[at] + n_fill
                src = to_device(torch.from_numpy(source), X.device)
                dst = to_device(torch.from_numpy(written), X.device)
                self._data.index_copy_(0, dst, X.index_select(0, src))
                self._host_times[written] = self.n_seen + source
        self.n_seen += b

    def _slot_of(self, u: float, t: int) -> int:  # pragma: no cover
        """The slot (or -1) of the row with stream index ``t`` and random number ``u``."""
        raise NotImplementedError

    def _slots(self, u: np.ndarray, first: int) -> np.ndarray:  # pragma: no cover
        """Vectorised :meth:`_slot_of` for the rows ``first, first + 1, ...``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ sampling
    def sample_indices(self, n: int) -> torch.Tensor:
        """Slots ``[n]`` (long) of ``n`` uniform draws with replacement from the stored rows."""
        if type(n) is not int or n < 0:
            n = _check_n(n)
        if self._len == 0:
            raise ValueError(f"{type(self).__name__} is empty: update it before sampling")
        idx = torch.randint(0, self._len, (n,), generator=self.generator)
        return idx if self._data.device.type == "cpu" else to_device(idx, self._data.device)

    def sample(self, n: int) -> torch.Tensor:
        """``n`` rows ``[n, d]`` drawn uniformly with replacement from the stored rows
        (``rows[sample_indices(n)]``)."""
        return self._data[self.sample_indices(n)]

    # ------------------------------------------------------------------ state
    def _content(self) -> dict[str, object]:
        return {"rows": self.rows.clone(), "times": self.times}

    def _config(self) -> dict[str, object]:
        return {"kind": type(self).__name__, "size": self.size, "n_features": self.n_features}

    def _load_content(self, state: Mapping[str, Any]) -> None:
        rows = torch.as_tensor(state["rows"])
        n = rows.shape[0]
        self._data.zero_()
        self._host_times[:] = 0
        self._data[:n] = rows.to(self.device, self.dtype)
        self._host_times[:n] = torch.as_tensor(state["times"]).cpu().long().numpy()
        self._len = n

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(size={self.size}, n_features={self.n_features}, "
            f"len={self._len}, n_seen={self.n_seen})"
        )
