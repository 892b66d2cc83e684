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

import torch

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

    @property
    def device(self) -> torch.device:
        return self.raw.device

    def _weights(self, b: int) -> torch.Tensor:
        """``alpha (1 - alpha)^(b - i)`` for i = 1..b, and the decay ``(1 - alpha)^b``."""
        k = torch.arange(b - 1, -1, -1, dtype=self.raw.dtype, device=self.raw.device)
        return self.alpha * (1.0 - self.alpha) ** k

    def update(self, values: torch.Tensor) -> None:
        """Fold ``values`` ``[B, *shape]`` (in time order) into the average."""
        values = values.to(device=self.raw.device, dtype=self.raw.dtype)
        if tuple(values.shape[1:]) != self.shape:
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
        if b == 1:  # the per-row path: a few kernels (out of place: callers may hold `raw`)
            u = values[0]
            r = 1.0 - self.alpha
            if self.n:
                dev = (u - self.debiased) ** 2
                self.sq_dev = torch.add(self.sq_dev * r, dev, alpha=self.alpha)
            self.raw = torch.add(self.raw * r, u, alpha=self.alpha)
            self.n += 1
            return
        if b > self._max_chunk:  # keep (1 - alpha)^-b representable
            self.update(values[: self._max_chunk])
            self.update(values[self._max_chunk :])
            return
        before = self._estimates_before(values)
        dev = (values - before) ** 2
        if self.n == 0:
            dev[0] = 0.0  # no estimate exists before the very first value
        w = self._weights(b).reshape(b, *([1] * len(self.shape)))
        decay = (1.0 - self.alpha) ** b
        self.raw = decay * self.raw + (w * values).sum(0)
        self.sq_dev = decay * self.sq_dev + (w * dev).sum(0)
        self.n += b

    @property
    def _max_chunk(self) -> int:
        r = 1.0 - self.alpha
        return 1 << 30 if r == 0.0 else max(1, int(600.0 / -math.log(r)))

    def _estimates_before(self, values: torch.Tensor) -> torch.Tensor:
        """The debiased estimate just before each value of the batch (prefix EMAs in closed
        form), so that the deviations of a batch equal those of sequential updates."""
        b = values.shape[0]
        r = 1.0 - self.alpha
        view = (b, *([1] * len(self.shape)))
        if r == 0.0:  # alpha = 1: the estimate is the previous value
            return torch.cat([self.debiased.unsqueeze(0), values[:-1]])
        i = torch.arange(b, dtype=self.raw.dtype, device=self.raw.device)
        scaled = values * (self.alpha * r ** (-(i + 1))).reshape(view)
        prefix = torch.cumsum(scaled, 0) - scaled  # sum over j < i
        raw_before = (r**i).reshape(view) * (self.raw.unsqueeze(0) + prefix)
        n_before = self.n + i
        if self.init == "first":
            corr = (n_before > 0).to(self.raw.dtype)
        else:
            corr = 1.0 - r**n_before
        return raw_before / corr.clamp_min(1e-300).reshape(view)

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

    def state_dict(self) -> dict[str, Any]:
        return {"raw": self.raw.clone(), "sq_dev": self.sq_dev.clone(), "n": self.n,
                "alpha": self.alpha, "init": self.init}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state["alpha"] != self.alpha or state["init"] != self.init:
            raise ValueError(
                f"state has alpha={state['alpha']}, init={state['init']!r}; this smoother "
                f"alpha={self.alpha}, init={self.init!r}"
            )
        self.raw = state["raw"].to(self.raw.device, self.raw.dtype).clone()
        self.sq_dev = state["sq_dev"].to(self.raw.device, self.raw.dtype).clone()
        self.n = int(state["n"])
