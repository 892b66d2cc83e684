"""Exact rolling minimum and maximum of the last values of one feature (monotone deques)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from typing import Any

import torch

from torchstream.explain.storage._common import _as_values, _check_int, _check_state

__all__ = ["RollingExtremes"]


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

    def state_dict(self) -> dict[str, object]:
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
