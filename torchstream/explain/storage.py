"""Storages of past stream rows: the replacement values of incremental explainers.

Incremental explainers replace ("remove") features of the current row by values of *past* rows.
The storages here keep a bounded, randomly or deterministically selected set of those rows:

* :class:`GeometricReservoir` — every new row replaces a uniformly chosen slot; recent rows are
  favoured, the age of a sampled row is geometric (iPFI "geometric sampling" [PFI]_).
* :class:`UniformReservoir` — Vitter's algorithm R; every past row is equally likely (iPFI
  "uniform sampling" [PFI]_).
* :class:`FrequencyStorage` — the last ``size`` values that passed an entrance coin, for
  quantiles of one feature (iPDP App. B.2, Alg. 3 [PDP]_).
* :class:`RollingExtremes` — the exact minimum and maximum of the last ``window`` values with
  monotone deques (iPDP App. B.1, Alg. 2 [PDP]_).
* :class:`FreshSampler` — iid rows from a known distribution (``update`` is ignored): isolates
  an explainer from reservoir effects in statistical tests.

Conventions shared by all of them:

* Rows live in tensors on ``device`` (float64 by default). Random numbers come from the
  storage's own CPU ``torch.Generator`` seeded with ``seed`` (``None`` draws a seed once from the
  operating system, see :attr:`seed`); the results do not depend on the device.
* ``update`` takes a batch in time order and is the same as updating with its rows one at a
  time: every row that meets a full storage consumes the same random number whichever batch it
  comes in, and all numbers of a batch are drawn in one call. ``sample(n)`` likewise equals
  ``sample(n1)`` followed by ``sample(n - n1)``.
* ``state_dict()`` holds the content, the counters and the generator state, so that a storage
  restored with ``load_state_dict`` continues bit-exactly.

The explainers use the duck type ``sample(n) -> Tensor [n, d]`` and ``update(X [B, d])``; any
object with these methods can serve as a storage.

References
----------
.. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental permutation
   feature importance (iPFI): towards online explanations on data streams. *Machine Learning*
   112, 4863-4903.
.. [PDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: on
   partial dependence plots in dynamic modeling scenarios. *xAI 2023*, CCIS 1901, 177-194.
"""

from __future__ import annotations

import math
import operator
import secrets
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import torch

__all__ = [
    "FrequencyStorage",
    "FreshSampler",
    "GeometricReservoir",
    "RollingExtremes",
    "UniformReservoir",
]


# ---------------------------------------------------------------------------------- helpers
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


# ---------------------------------------------------------------------------------- reservoirs
class _Reservoir:
    """Fixed-size reservoir of ``d``-dimensional rows: buffer, counters, sampling, state."""

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
        self.seed, self.generator = _make_generator(seed)
        self._rows = torch.zeros(self.size, self.n_features, dtype=dtype, device=device)
        self._times = torch.zeros(self.size, dtype=torch.long, device=device)
        self._len = 0
        self.n_seen = 0

    # ------------------------------------------------------------------ content
    @property
    def device(self) -> torch.device:
        return self._rows.device

    @property
    def dtype(self) -> torch.dtype:
        return self._rows.dtype

    @property
    def rows(self) -> torch.Tensor:
        """The stored rows ``[len, d]`` by slot (a view: do not modify)."""
        return self._rows[: self._len]

    @property
    def times(self) -> torch.Tensor:
        """Stream index (0-based, counting every row seen) of each stored row ``[len]``."""
        return self._times[: self._len]

    def __len__(self) -> int:
        return self._len

    # ------------------------------------------------------------------ update
    def update(self, X: torch.Tensor) -> None:
        """Add the rows of ``X`` ``[B, d]`` (in time order)."""
        X = _as_rows(X, self.n_features, self.dtype, self.device)
        b = X.shape[0]
        n_fill = min(self.size - self._len, b)
        if n_fill > 0:
            self._rows[self._len : self._len + n_fill] = X[:n_fill]
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
                self._rows[written] = X[n_fill + source]
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
        return self._rows[self.sample_indices(n)]

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, "size": self.size, "n_features": self.n_features}

    def state_dict(self) -> dict[str, Any]:
        return {
            **self._config(),
            "rows": self.rows.clone(),
            "times": self.times.clone(),
            "n_seen": self.n_seen,
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        _check_state(state, self._config(), type(self).__name__)
        rows = torch.as_tensor(state["rows"])
        n = rows.shape[0]
        self._rows.zero_()
        self._times.zero_()
        self._rows[:n] = rows.to(self.device, self.dtype)
        self._times[:n] = torch.as_tensor(state["times"]).to(self.device, torch.long)
        self._len = n
        self.n_seen = int(state["n_seen"])
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())

    def to(self, device: torch.device | str) -> _Reservoir:
        """Move the stored rows to ``device`` (the generator stays on the CPU)."""
        self._rows, self._times = self._rows.to(device), self._times.to(device)
        return self

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(size={self.size}, n_features={self.n_features}, "
            f"len={self._len}, n_seen={self.n_seen})"
        )


class GeometricReservoir(_Reservoir):
    """Reservoir in which each new row replaces a uniformly chosen slot ("geometric sampling",
    [PFI]_; also the iSAGE reservoir).

    The first ``size`` rows fill the reservoir. Afterwards each new row enters with probability
    ``insert_prob`` (``q``) and then overwrites a uniformly chosen slot. A uniform draw from the
    reservoir returns a row of age ``a`` (``a = 0``: the newest row) with probability
    ``p (1 - p)^a``, ``p = q / size``: the ages are geometric with mean ``size / q - 1``, and the
    collision probability of two independent realisations tends to ``p / (2 - p)`` (iPFI
    Lemma 1), whereas a uniform reservoir gives ``1 / n_seen``.

    The iPFI paper inserts every row (``q = 1``, the default here): the reservoir forgets like a
    window of about ``size`` rows. The authors' reference library uses ``q = 1 / size`` by
    default, so that its reservoir remembers about ``size**2`` rows (10 000 for ``size=100``);
    pass ``insert_prob=1 / size`` for that behaviour.

    Parameters
    ----------
    size
        Number of slots ``L``.
    n_features
        Width ``d`` of a row.
    insert_prob
        Probability ``q`` in ``(0, 1]`` that a row arriving at a full reservoir is stored.
    seed
        Seed of the reservoir's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored rows.

    Examples
    --------
    >>> res = GeometricReservoir(size=3, n_features=2, seed=42)
    >>> res.update(torch.arange(20.0).reshape(10, 2))
    >>> len(res), res.n_seen, res.times.tolist()
    (3, 10, [6, 8, 9])
    >>> res.sample(2).tolist()
    [[12.0, 13.0], [16.0, 17.0]]

    References
    ----------
    .. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental
       permutation feature importance (iPFI): towards online explanations on data streams.
       *Machine Learning* 112, 4863-4903.
    """

    def __init__(
        self,
        size: int,
        n_features: int,
        *,
        insert_prob: float = 1.0,
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.insert_prob = _check_prob(insert_prob, "insert_prob")
        super().__init__(size, n_features, seed=seed, dtype=dtype, device=device)

    def _slots(self, u: torch.Tensor, first: int) -> torch.Tensor:
        # u < q enters; given that, u / q is uniform on [0, 1) and picks the slot
        q = self.insert_prob
        slot = torch.floor(u / q * self.size).long().clamp_(max=self.size - 1)
        return torch.where(u < q, slot, -1)

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "insert_prob": self.insert_prob}

    def __repr__(self) -> str:
        return super().__repr__()[:-1] + f", insert_prob={self.insert_prob})"


class UniformReservoir(_Reservoir):
    """Reservoir sample of the whole stream: Vitter's algorithm R ("uniform sampling" [PFI]_).

    The first ``size`` rows fill the reservoir; the ``n``-th row (1-based) then draws ``j``
    uniformly from ``{0, ..., n - 1}`` and replaces slot ``j`` if ``j < size``. After ``n``
    rows each of them is stored with probability ``size / n``, so a uniform draw from the
    reservoir returns each past row with probability ``1 / n``.

    Parameters
    ----------
    size
        Number of slots ``L``.
    n_features
        Width ``d`` of a row.
    seed
        Seed of the reservoir's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored rows.

    Examples
    --------
    >>> res = UniformReservoir(size=3, n_features=1, seed=42)
    >>> res.update(torch.arange(10.0).reshape(10, 1))
    >>> res.times.tolist(), res.n_seen
    ([6, 1, 2], 10)
    >>> res.sample(4).flatten().tolist()
    [6.0, 1.0, 2.0, 1.0]

    References
    ----------
    .. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental
       permutation feature importance (iPFI): towards online explanations on data streams.
       *Machine Learning* 112, 4863-4903.
    """

    def __init__(
        self,
        size: int,
        n_features: int,
        *,
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__(size, n_features, seed=seed, dtype=dtype, device=device)

    def _slots(self, u: torch.Tensor, first: int) -> torch.Tensor:
        # the row with 0-based index t is the (t + 1)-th: j uniform on {0, ..., t}
        n = torch.arange(first + 1, first + 1 + u.shape[0], dtype=torch.float64)
        j = torch.minimum(torch.floor(u * n), n - 1).long()
        return torch.where(j < self.size, j, -1)


# ---------------------------------------------------------------------------------- 1-D storages
class FrequencyStorage:
    """The last ``size`` values that passed an entrance coin, oldest first (iPDP App. B.2,
    Alg. 3 [PDP]_); its empirical quantiles track the distribution of a feature.

    The first ``size`` values fill the storage. Afterwards each value enters with probability
    ``entrance_prob`` (``P(E)``) and then pushes out the *oldest* stored value (FIFO). The
    storage therefore covers about the last ``size / entrance_prob`` values. (The paper's
    pseudo-code lacks the ``else`` between the fill phase and the coin; here a value that fills
    the storage never also triggers a replacement.)

    Parameters
    ----------
    size
        Number of stored values ``L``.
    entrance_prob
        Probability in ``(0, 1]`` that a value arriving at a full storage enters.
    seed
        Seed of the storage's generator (``None``: drawn once from the operating system).
    dtype, device
        Of the stored values.

    Examples
    --------
    >>> fs = FrequencyStorage(size=4, entrance_prob=0.5, seed=42)
    >>> fs.update(torch.arange(10.0))
    >>> fs.values.tolist(), fs.times.tolist()
    ([5.0, 6.0, 7.0, 9.0], [5, 6, 7, 9])
    >>> fs.quantile(0.5).item()
    6.5

    References
    ----------
    .. [PDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: on
       partial dependence plots in dynamic modeling scenarios. *xAI 2023*, CCIS 1901, 177-194.
    """

    def __init__(
        self,
        size: int,
        *,
        entrance_prob: float = 1.0,
        seed: int | None = None,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.size = _check_int(size, "size")
        self.entrance_prob = _check_prob(entrance_prob, "entrance_prob")
        self.seed, self.generator = _make_generator(seed)
        self._values = torch.zeros(0, dtype=dtype, device=device)
        self._times = torch.zeros(0, dtype=torch.long, device=device)
        self.n_seen = 0

    @property
    def device(self) -> torch.device:
        return self._values.device

    @property
    def dtype(self) -> torch.dtype:
        return self._values.dtype

    @property
    def values(self) -> torch.Tensor:
        """The stored values ``[len]``, oldest first."""
        return self._values

    @property
    def times(self) -> torch.Tensor:
        """Stream index (0-based) of each stored value ``[len]``, increasing."""
        return self._times

    def __len__(self) -> int:
        return self._values.shape[0]

    def update(self, values: torch.Tensor) -> None:
        """Offer the values ``[B]`` (in time order)."""
        values = _as_values(values, self.dtype, self.device)
        b = values.shape[0]
        times = torch.arange(self.n_seen, self.n_seen + b, device=self.device)
        n_fill = min(self.size - len(self), b)
        m = b - n_fill
        if m > 0 and self.entrance_prob < 1.0:
            # one coin per value that meets a full storage, all drawn at once
            u = torch.rand(m, dtype=torch.float64, generator=self.generator)
            keep = torch.cat([torch.ones(n_fill, dtype=torch.bool), u < self.entrance_prob])
            keep = keep.to(self.device)
            values, times = values[keep], times[keep]
        values, times = values[-self.size :], times[-self.size :]  # only these can stay
        self._values = torch.cat([self._values, values])[-self.size :].clone()
        self._times = torch.cat([self._times, times])[-self.size :].clone()
        self.n_seen += b

    def quantile(self, q: float | torch.Tensor) -> torch.Tensor:
        """Empirical ``q``-quantile(s) of the stored values (linear interpolation); a 0-d tensor
        for a float ``q``, ``[k]`` for ``q`` of shape ``[k]``."""
        if len(self) == 0:
            raise ValueError("FrequencyStorage is empty: update it before asking for quantiles")
        q_t = torch.as_tensor(q, dtype=self.dtype, device=self.device)
        if q_t.dim() > 1 or not bool(((q_t >= 0) & (q_t <= 1)).all()):
            raise ValueError(f"q must be a float or a 1-D tensor of values in [0, 1], got {q!r}")
        return torch.quantile(self._values, q_t)

    def _config(self) -> dict[str, Any]:
        return {"size": self.size, "entrance_prob": self.entrance_prob}

    def state_dict(self) -> dict[str, Any]:
        return {
            **self._config(),
            "values": self._values.clone(),
            "times": self._times.clone(),
            "n_seen": self.n_seen,
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        _check_state(state, self._config(), "FrequencyStorage")
        self._values = torch.as_tensor(state["values"]).to(self.device, self.dtype).clone()
        self._times = torch.as_tensor(state["times"]).to(self.device, torch.long).clone()
        self.n_seen = int(state["n_seen"])
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())

    def to(self, device: torch.device | str) -> FrequencyStorage:
        self._values, self._times = self._values.to(device), self._times.to(device)
        return self

    def __repr__(self) -> str:
        return (
            f"FrequencyStorage(size={self.size}, entrance_prob={self.entrance_prob}, "
            f"len={len(self)}, n_seen={self.n_seen})"
        )


class RollingExtremes:
    """Exact minimum and maximum of the last ``window`` values (iPDP App. B.1, Alg. 2 [PDP]_).

    The maximum is the front of a deque of (value, time) pairs whose values decrease strictly:
    a new value removes the pairs at the back that it is at least as large as, and the front
    leaves once it falls out of the window; the minimum uses a second deque, mirrored.
    Amortised ``O(1)`` per value. Memory is ``window`` in the worst case (a strictly decreasing
    stream for the maximum) and the harmonic number ``H_window ≈ ln(window) + 0.58`` in
    expectation for iid continuous values.

    Each deque holds exactly the values of the window that exceed (resp. undercut) every later
    value of the window. A batch therefore only needs its last ``window`` values; short batches
    run the deque algorithm value by value, long ones (more than 256 values) fold the batch in
    at once (one reverse cumulative max/min over deque + batch), with the same result. Values
    are compared as float64 (exact for float32 and for integers below ``2**53``).

    Parameters
    ----------
    window
        Number ``k`` of most recent values covered.

    Examples
    --------
    >>> ext = RollingExtremes(window=3)
    >>> ext.update(torch.tensor([5.0, 1.0, 4.0, 2.0, 3.0]))
    >>> ext.min, ext.max, ext.deque_sizes
    (2.0, 4.0, (2, 2))
    >>> ext.update(torch.tensor([0.0]))
    >>> ext.min, ext.max
    (0.0, 3.0)

    References
    ----------
    .. [PDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: on
       partial dependence plots in dynamic modeling scenarios. *xAI 2023*, CCIS 1901, 177-194.
    """

    _VECTORISE_ABOVE = 256

    def __init__(self, window: int) -> None:
        self.window = _check_int(window, "window")
        self._max: deque[tuple[float, int]] = deque()  # (value, time), values decreasing
        self._min: deque[tuple[float, int]] = deque()  # (value, time), values increasing
        self.n_seen = 0

    def update(self, values: torch.Tensor) -> None:
        """Add the values ``[B]`` (in time order)."""
        values = torch.as_tensor(values)
        values = _as_values(values, torch.float64, values.device)
        b = values.shape[0]
        if b == 0:
            return
        values = values[-self.window :]  # older values of the batch leave the window anyway
        first = self.n_seen + b - values.shape[0]
        if values.shape[0] > self._VECTORISE_ABOVE:
            values = values.cpu()
            self._max = self._fold(self._max, values, first, sign=1.0)
            self._min = self._fold(self._min, values, first, sign=-1.0)
        else:
            k, dmax, dmin = self.window, self._max, self._min
            for t, x in enumerate(values.tolist(), start=first):
                while dmax and dmax[0][1] <= t - k:
                    dmax.popleft()
                while dmax and dmax[-1][0] <= x:
                    dmax.pop()
                dmax.append((x, t))
                while dmin and dmin[0][1] <= t - k:
                    dmin.popleft()
                while dmin and dmin[-1][0] >= x:
                    dmin.pop()
                dmin.append((x, t))
        self.n_seen += b

    def _fold(
        self, dq: deque[tuple[float, int]], values: torch.Tensor, first: int, sign: float
    ) -> deque[tuple[float, int]]:
        """The max-deque (``sign=1``; min-deque: ``sign=-1``) after adding ``values`` with times
        ``first, first + 1, ...``: the live values that beat every later live value."""
        last = first + values.shape[0] - 1
        old_v = torch.tensor([v for v, _ in dq], dtype=torch.float64)
        old_t = torch.tensor([t for _, t in dq], dtype=torch.long)
        cv = sign * torch.cat([old_v, values])
        ct = torch.cat([old_t, torch.arange(first, last + 1)])
        live = ct > last - self.window
        cv, ct = cv[live], ct[live]
        later = torch.flip(torch.cummax(torch.flip(cv, (0,)), 0).values, (0,))
        later = torch.cat([later[1:], cv.new_full((1,), -math.inf)])
        keep = cv > later
        return deque(zip((sign * cv[keep]).tolist(), ct[keep].tolist()))

    def _check_nonempty(self) -> None:
        if self.n_seen == 0:
            raise ValueError("RollingExtremes is empty: update it before asking for min/max")

    @property
    def max(self) -> float:
        """Maximum of the last ``window`` values."""
        self._check_nonempty()
        return self._max[0][0]

    @property
    def min(self) -> float:
        """Minimum of the last ``window`` values."""
        self._check_nonempty()
        return self._min[0][0]

    @property
    def deque_sizes(self) -> tuple[int, int]:
        """Lengths of the (max, min) deques."""
        return len(self._max), len(self._min)

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "max_deque": list(self._max),
            "min_deque": list(self._min),
            "n_seen": self.n_seen,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        _check_state(state, {"window": self.window}, "RollingExtremes")
        self._max = deque((float(v), int(t)) for v, t in state["max_deque"])
        self._min = deque((float(v), int(t)) for v, t in state["min_deque"])
        self.n_seen = int(state["n_seen"])

    def __repr__(self) -> str:
        return f"RollingExtremes(window={self.window}, n_seen={self.n_seen})"


# ---------------------------------------------------------------------------------- fresh draws
class FreshSampler:
    """A "storage" that returns fresh iid rows from a known distribution and ignores
    ``update``: replacement values drawn independently of the stream, which isolates the
    estimator of an explainer from reservoir effects in statistical tests.

    Parameters
    ----------
    draw
        ``draw(n, generator) -> Tensor [n, d]``; use ``generator`` for every random number so
        that the draws are reproducible.
    n_features
        Width ``d`` of a row.
    seed
        Seed of the sampler's CPU generator (``None``: drawn once from the operating system).

    Examples
    --------
    >>> def draw(n, generator):
    ...     return torch.rand(n, 2, generator=generator, dtype=torch.float64)
    >>> fresh = FreshSampler(draw, n_features=2, seed=42)
    >>> fresh.update(torch.zeros(5, 2))  # ignored
    >>> fresh.sample(2).round(decimals=4).tolist()
    [[0.0582, 0.0629], [0.1236, 0.0526]]
    """

    def __init__(
        self,
        draw: Callable[[int, torch.Generator], torch.Tensor],
        n_features: int,
        *,
        seed: int | None = None,
    ) -> None:
        if not callable(draw):
            raise TypeError(f"draw must be callable as draw(n, generator), got {draw!r}")
        self.draw = draw
        self.n_features = _check_int(n_features, "n_features")
        self.seed, self.generator = _make_generator(seed)
        self.n_seen = 0

    def update(self, X: torch.Tensor) -> None:
        """Count the rows of ``X`` ``[B, d]``; they are not stored."""
        X = torch.as_tensor(X)
        if X.dim() != 2 or X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape [B, d={self.n_features}], got {list(X.shape)}")
        self.n_seen += X.shape[0]

    def sample(self, n: int) -> torch.Tensor:
        """``n`` fresh rows ``[n, d]`` from ``draw``."""
        n = _check_n(n)
        rows = torch.as_tensor(self.draw(n, self.generator))
        if rows.shape != (n, self.n_features):
            raise ValueError(
                f"draw({n}, generator) returned shape {list(rows.shape)}, expected "
                f"[{n}, {self.n_features}]"
            )
        return rows

    def state_dict(self) -> dict[str, Any]:
        return {
            "n_features": self.n_features,
            "n_seen": self.n_seen,
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        _check_state(state, {"n_features": self.n_features}, "FreshSampler")
        self.n_seen = int(state["n_seen"])
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())

    def __repr__(self) -> str:
        return f"FreshSampler(n_features={self.n_features}, n_seen={self.n_seen})"
