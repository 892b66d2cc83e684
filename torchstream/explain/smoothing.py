"""Exponential smoothing of explanation streams, with debiasing and a running variance.

Every incremental explainer keeps its estimate as an exponential moving average (EMA)

    v_t = (1 - alpha) * v_{t-1} + alpha * u_t.

With *zero* initialisation (``v = 0`` before the first update, as in the theorems of the iPFI,
iSAGE and iPDP papers) the weights of the ``n`` values seen sum to ``c_n = 1 - (1 - alpha)^n``,
so the raw value is biased towards 0 early on; the *debiased* value ``v_n / c_n`` is not. With
*first* initialisation ``v`` starts at the first value (the papers' Def. 3 / Alg. 1 text) and raw
and debiased coincide.

A batch of ``B`` values in time order is folded in closed form:

    v_{t+B} = (1 - alpha)^B v_t + sum_i alpha (1 - alpha)^(B - i) u_{t+i},

which equals ``B`` sequential updates up to float rounding.

>>> s = ExponentialSmoother(alpha=0.5, shape=2)
>>> s.update(torch.tensor([[2.0, 4.0]]))
>>> s.raw.tolist(), s.debiased.tolist()
([1.0, 2.0], [2.0, 4.0])
>>> s.update(torch.tensor([[2.0, 4.0], [2.0, 4.0]]))
>>> s.raw.tolist(), s.n
([1.75, 3.5], 3)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch

from torchstream.devices import to_device

__all__ = ["ExponentialSmoother", "alpha_for_window", "check_alpha"]


def alpha_for_window(n: int) -> float:
    """The smoothing factor of an EMA with the mean age of an ``n``-sample window:
    ``alpha = 2 / (n + 1)`` (e.g. 1000 -> 0.001998)."""
    if n < 1:
        raise ValueError(f"window n must be >= 1, got {n}")
    return 2.0 / (n + 1)


def check_alpha(alpha: float, argument: str = "alpha") -> float:
    if not isinstance(alpha, (int, float)) or not (0.0 < alpha <= 1.0) or math.isnan(alpha):
        raise ValueError(f"{argument} must be in (0, 1], got {alpha!r}")
    return float(alpha)


class ExponentialSmoother:
    """EMA of a stream of tensors of a fixed ``shape``, with raw / debiased values and an EMA of
    squared deviations (for confidence half-widths).

    Parameters
    ----------
    alpha
        Smoothing factor in ``(0, 1]``.
    shape
        Shape of one value (``d`` for a feature vector).
    init
        ``"zero"`` (the papers' theorems) or ``"first"`` (start at the first value).
    dtype, device
        Of the state (float64 by default: ``alpha <= 1e-3`` over 1e5+ steps).
    """

    def __init__(
        self,
        alpha: float,
        shape: int | tuple[int, ...],
        *,
        init: Literal["zero", "first"] = "zero",
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.alpha = check_alpha(alpha)
        if init not in ("zero", "first"):
            raise ValueError(f"init must be 'zero' or 'first', got {init!r}")
        self.init = init
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.raw = torch.zeros(self.shape, dtype=dtype, device=device)
        self.sq_dev = torch.zeros(self.shape, dtype=dtype, device=device)
        self.n = 0
        self._plans: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    @property
    def device(self) -> torch.device:
        return self.raw.device

    def _weights(self, b: int) -> torch.Tensor:
        """``alpha (1 - alpha)^(b - i)`` for i = 1..b."""
        return self._plan(b)[2].reshape(b)

    def _plan(self, b: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, Any]:
        """Cached per batch length ``b`` (and dtype / device): the strictly lower-triangular
        prefix matrix ``M [b, b]`` (``M[i, j] = alpha r^(i - 1 - j)`` for ``j < i``, so that
        the raw EMA before value ``i`` is ``r^i raw + (M @ values)[i]``), ``r^i [b, 1]``, the
        weights ``alpha r^(b - 1 - i)`` as ``[1, b]``, the decay ``r^b`` and ``r^i`` on the host
        (``r = 1 - alpha``)."""
        key = (b, self.raw.dtype, self.raw.device)
        plan = self._plans.get(key)
        if plan is None:
            r = 1.0 - self.alpha
            i = np.arange(b, dtype=np.float64)
            ri_host = r**i
            age = i.reshape(-1, 1) - i.reshape(1, -1) - 1.0
            m = np.where(age >= 0, self.alpha * r ** np.maximum(age, 0.0), 0.0)
            as_t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to(
                device=self.raw.device, dtype=self.raw.dtype
            )
            w = self.alpha * r ** (b - 1 - i)
            plan = (as_t(m), as_t(ri_host.reshape(-1, 1)), as_t(w.reshape(1, -1)), r**b, ri_host)
            if len(self._plans) >= 8:
                self._plans.clear()
            self._plans[key] = plan
        return plan

    def update(self, values: torch.Tensor) -> None:
        """Fold ``values`` ``[B, *shape]`` (in time order) into the average."""
        raw = self.raw
        if values.dtype != raw.dtype or values.device != raw.device:
            values = values.to(device=raw.device, dtype=raw.dtype)
        if values.shape[1:] != self.shape:
            raise ValueError(
                f"values must have shape [B, {', '.join(map(str, self.shape))}], got "
                f"{list(values.shape)}"
            )
        b = values.shape[0]
        if b == 0:
            return
        if self.n == 0 and self.init == "first":
            self.raw = values[0].clone()
            self.sq_dev = torch.zeros_like(self.raw)
            self.n = 1
            values = values[1:]
            b -= 1
            if b == 0:
                return
            raw = self.raw
        if b == 1:  # the per-row path: a few kernels (out of place: callers may hold `raw`)
            u = values.view(self.shape)
            r = 1.0 - self.alpha
            if self.n:
                diff = torch.sub(u, raw, alpha=1.0 / self.correction)  # u - debiased
                self.sq_dev = torch.addcmul(self.sq_dev * r, diff, diff, value=self.alpha)
            self.raw = torch.add(raw * r, u, alpha=self.alpha)
            self.n += 1
            return
        if b > self._BLOCK:  # the prefix matrix grows as b^2: fold long batches in blocks
            for start in range(0, b, self._BLOCK):
                self.update(values[start : start + self._BLOCK])
            return
        m, ri, w, decay, ri_host = self._plan(b)
        flat = values.reshape(b, -1)
        raw_row = raw.reshape(1, -1)
        raw_before = torch.addmm(ri * raw_row, m, flat)  # raw EMA just before each value
        # debiased estimate before each value: raw / (1 - r^(n + i)) (first init: raw)
        if self.init == "first":
            corr = np.ones(b)
        else:
            corr = 1.0 - (1.0 - self.alpha) ** self.n * ri_host
        inv = np.divide(1.0, corr, out=np.zeros(b), where=corr > 0).reshape(-1, 1)
        inv_t = to_device(torch.from_numpy(inv), raw.device, raw.dtype)
        dev = torch.addcmul(flat, raw_before, inv_t, value=-1.0).square_()
        if self.n == 0:
            dev[0] = 0.0  # no estimate exists before the very first value
        self.raw = torch.addmm(raw_row, w, flat, beta=decay).view(self.shape)
        self.sq_dev = torch.addmm(self.sq_dev.reshape(1, -1), w, dev, beta=decay).view(self.shape)
        self.n += b

    #: Longest batch folded with one prefix matrix.
    _BLOCK = 256

    @property
    def correction(self) -> float:
        """``1 - (1 - alpha)^n`` for zero init (1 for first init)."""
        if self.init == "first":
            return 1.0 if self.n else 0.0
        return 1.0 - (1.0 - self.alpha) ** self.n

    @property
    def debiased(self) -> torch.Tensor:
        """``raw / (1 - (1 - alpha)^n)``; zeros before the first update."""
        c = self.correction
        return self.raw / c if c > 0 else torch.zeros_like(self.raw)

    def half_width(self, delta: float = 0.05) -> torch.Tensor:
        """Chebyshev half-width at level ``1 - delta``: with probability at least ``1 - delta``
        the estimate lies within it of its expectation, if its variance is
        ``sigma^2 alpha / (2 - alpha)`` (the papers' variance theorems, iid contributions),
        ``sigma^2`` estimated by the EMA of squared deviations."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        c = self.correction
        var = self.sq_dev / c if c > 0 and self.n > 1 else torch.full_like(self.raw, float("inf"))
        return torch.sqrt(var * self.alpha / (2.0 - self.alpha) / delta)

    def to(self, device: torch.device | str) -> ExponentialSmoother:
        self.raw, self.sq_dev = self.raw.to(device), self.sq_dev.to(device)
        return self

    def state_dict(self) -> dict[str, object]:
        return {
            "raw": self.raw.clone(),
            "sq_dev": self.sq_dev.clone(),
            "n": self.n,
            "alpha": self.alpha,
            "init": self.init,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["alpha"] != self.alpha or state["init"] != self.init:
            raise ValueError(
                f"state has alpha={state['alpha']}, init={state['init']!r}; this smoother "
                f"alpha={self.alpha}, init={self.init!r}"
            )
        self.raw = state["raw"].to(self.raw.device, self.raw.dtype).clone()
        self.sq_dev = state["sq_dev"].to(self.raw.device, self.raw.dtype).clone()
        self.n = int(state["n"])
