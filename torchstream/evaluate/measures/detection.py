"""Drift-detection measures: truthfulness and timeliness of a detector (A.6 §5.2 [^1]).

``T_d`` are the known drifts, ``T^_d`` the detections, both as **observation indices** into
the full data set (pre-training rows included); :func:`observation_index` converts a detector's
time step. A known drift is an ``int`` (sudden) or a ``(start, end)`` pair (gradual or
incremental). ``W`` is the tolerance window in observations and ``n_total`` the stream length.

Windows. By default (``convention="closed"``, the paper's equations) the window of drift ``i``
is ``[start_i, end_i + W]``, both ends included. ``convention="half_open"`` reproduces the
float package: ``[start_i, min(end_i + W, start_{i+1}))``.

* **Detected change rate** (Eq. 4, recall): the share of known drifts with at least one
  detection in their window. **Missed detection rate**: ``1 - DCR``.
* **False discovery rate** (Eq. 5): ``1 - |TP| / |T^_d|`` where the true positives are the
  detections inside the *union* of the windows (a detection in two overlapping windows counts
  once). No detections: 0.
* **Mean detection delay**: for drift ``i`` the distance from ``start_i`` to the first
  detection in ``[start_i, start_{i+1})`` (the last drift: up to ``n_total``), *without* the
  ``W`` limit; a drift with no such detection adds the whole gap ``start_{i+1} - start_i``
  (``n_total - start_i``). The mean over drifts.
* **Mean time between false alarms**: the mean gap between consecutive false alarms (the
  detections outside every window). With fewer than two false alarms there is no gap; the
  documented fallback is ``n_total``.
* **Mean time ratio** (Eq. 6): ``MTR = MTFA / MD * DCR`` (``inf`` when ``MD = 0``).

Detections before ``n_init_tolerance`` (a warm-up) are left out of *every* measure, the
denominator of FDR included (float counts them there).

>>> known, found = [100, 300], [110, 150, 250, 420]
>>> m = detection_measures(known, found, window=50, n_total=500)
>>> {k: round(v, 4) for k, v in m.items()}  # doctest: +NORMALIZE_WHITESPACE
{'detected_change_rate': 0.5, 'missed_detection_rate': 0.5, 'false_discovery_rate': 0.5,
 'mean_detection_delay': 65.0, 'mean_time_between_false_alarms': 170.0,
 'mean_time_ratio': 1.3077}
>>> observation_index(40, n_pretrain=100, batch_size=10)
500

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

import numpy as np

from torchstream.evaluate.measures._common import as_int, to_numpy

__all__ = [
    "DetectionMeasure",
    "detected_change_rate",
    "detection_delays",
    "detection_measures",
    "false_discovery_rate",
    "mean_detection_delay",
    "mean_time_between_false_alarms",
    "mean_time_ratio",
    "missed_detection_rate",
    "observation_index",
    "observation_indices",
    "step_index",
]

Convention = Literal["closed", "half_open"]
Drift = int | tuple[int, int]


def observation_index(step: int, n_pretrain: int = 0, batch_size: int = 1) -> int:
    """Index of the first observation of time step ``step``: ``n_pretrain + step * batch_size``.

    Steps are counted from 0 after the ``n_pretrain`` pre-training observations.
    """
    s = as_int(step, "step", minimum=0)
    p = as_int(n_pretrain, "n_pretrain", minimum=0)
    b = as_int(batch_size, "batch_size", minimum=1)
    return p + s * b


def observation_indices(
    steps: Sequence[int], n_pretrain: int = 0, batch_size: int = 1
) -> list[int]:
    """:func:`observation_index` of every step in ``steps``."""
    arr = to_numpy(steps, "steps")
    if arr.ndim != 1:
        raise ValueError(f"steps must be 1-d, got shape {arr.shape}")
    return [observation_index(s.item(), n_pretrain, batch_size) for s in arr]


def step_index(observation: int, n_pretrain: int = 0, batch_size: int = 1) -> int:
    """The time step whose batch holds ``observation``: ``(observation - n_pretrain) //
    batch_size``; an observation used for pre-training has no step (``ValueError``)."""
    o = as_int(observation, "observation", minimum=0)
    p = as_int(n_pretrain, "n_pretrain", minimum=0)
    b = as_int(batch_size, "batch_size", minimum=1)
    if o < p:
        raise ValueError(
            f"observation {o} was used for pre-training (n_pretrain={p}); it has no time step"
        )
    return (o - p) // b


@dataclass(frozen=True)
class _Setup:
    starts: np.ndarray  # [D]
    ends: np.ndarray  # [D]
    lo: np.ndarray  # window lower bounds (included)
    hi: np.ndarray  # window upper bounds (excluded)
    detections: np.ndarray  # sorted, warm-up removed
    n_total: int


def _drifts(known_drifts: Sequence[Drift], n_total: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(known_drifts, (int, np.integer, str)):
        raise TypeError("known_drifts must be a sequence of drifts (ints or (start, end) pairs)")
    starts, ends = [], []
    for i, d in enumerate(known_drifts):
        if isinstance(d, (tuple, list)):
            if len(d) != 2:
                raise ValueError(f"known_drifts[{i}] must be an int or (start, end), got {d!r}")
            s = as_int(d[0], f"known_drifts[{i}] start")
            e = as_int(d[1], f"known_drifts[{i}] end")
            if e < s:
                raise ValueError(f"known_drifts[{i}] = {d!r} ends before it starts")
        else:
            s = e = as_int(d.item() if hasattr(d, "item") else d, f"known_drifts[{i}]")
        if not 0 <= s or not e < n_total:
            raise ValueError(
                f"known_drifts[{i}] = {d!r} lies outside the stream [0, {n_total}) (n_total)"
            )
        if starts and s <= ends[-1]:
            raise ValueError(
                f"known_drifts must be sorted and not overlap: known_drifts[{i}] = {d!r} starts "
                f"at or before the end of the previous drift ({ends[-1]})"
            )
        starts.append(s)
        ends.append(e)
    if not starts:
        raise ValueError("known_drifts is empty: the detection measures need known drifts")
    return np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)


def _setup(
    known_drifts: Sequence[Drift],
    detections: Sequence[int],
    window: int,
    n_total: int,
    convention: Convention,
    n_init_tolerance: int,
) -> _Setup:
    n = as_int(n_total, "n_total", minimum=1)
    w = as_int(window, "window")
    if w <= 0:
        raise ValueError(f"window (the tolerance, in observations) must be > 0, got {w}")
    tol = as_int(n_init_tolerance, "n_init_tolerance", minimum=0)
    if convention not in ("closed", "half_open"):
        raise ValueError(f"convention must be 'closed' or 'half_open', got {convention!r}")
    starts, ends = _drifts(known_drifts, n)
    arr = to_numpy(detections, "detections")
    if arr.ndim != 1:
        raise ValueError(f"detections must be 1-d, got shape {arr.shape}")
    det = np.asarray(
        [as_int(v.item(), f"detections[{i}]") for i, v in enumerate(arr)], dtype=np.int64
    )
    bad = np.flatnonzero((det < 0) | (det >= n))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"detections[{i}] = {det[i]} lies outside the stream [0, {n}) (n_total)")
    det = np.sort(det)
    if np.any(np.diff(det) == 0):
        dup = int(det[np.flatnonzero(np.diff(det) == 0)[0]])
        raise ValueError(f"detections holds observation {dup} more than once")
    det = det[det >= tol]
    if convention == "closed":
        hi = ends + w + 1
    else:
        nxt = np.append(starts[1:], np.iinfo(np.int64).max)
        hi = np.minimum(ends + w, nxt)
    return _Setup(starts, ends, starts.copy(), hi, det, n)


def _in_window(s: _Setup) -> np.ndarray:
    """``[D, K]``: detection k lies in the window of drift i."""
    d = s.detections[None, :]
    return (d >= s.lo[:, None]) & (d < s.hi[:, None])


_T = TypeVar("_T", covariant=True)


class DetectionMeasure(Protocol[_T]):
    """The call shared by every detection measure (see the module docstring)."""

    def __call__(
        self,
        known_drifts: Sequence[Drift],
        detections: Sequence[int],
        *,
        window: int,
        n_total: int,
        convention: Convention = "closed",
        n_init_tolerance: int = 0,
    ) -> _T: ...


def _measure(compute: Callable[[_Setup], _T]) -> DetectionMeasure[_T]:
    """The public measure that checks its arguments into a :class:`_Setup` and applies
    ``compute`` to it; it takes ``compute``'s name (without the leading ``_``) and docstring."""

    def measure(
        known_drifts: Sequence[Drift],
        detections: Sequence[int],
        *,
        window: int,
        n_total: int,
        convention: Convention = "closed",
        n_init_tolerance: int = 0,
    ) -> _T:
        return compute(
            _setup(known_drifts, detections, window, n_total, convention, n_init_tolerance)
        )

    measure.__name__ = measure.__qualname__ = compute.__name__.lstrip("_")
    measure.__doc__ = compute.__doc__
    measure.__annotations__["return"] = compute.__annotations__["return"]
    measure.__module__ = compute.__module__
    return measure


def _detected_change_rate(s: _Setup) -> float:
    """Share of known drifts with a detection inside their tolerance window (A.6 Eq. 4)."""
    return float(_in_window(s).any(1).mean())


def _missed_detection_rate(s: _Setup) -> float:
    """``1 - DCR``: share of known drifts without a detection in their window."""
    return 1.0 - _detected_change_rate(s)


def _false_discovery_rate(s: _Setup) -> float:
    """``1 - |TP| / |detections|`` (A.6 Eq. 5), TP = detections in the union of the windows;
    0 when there are no detections."""
    if s.detections.size == 0:
        return 0.0
    tp = _in_window(s).any(0).sum()
    return float(1.0 - tp / s.detections.size)


def _delays(s: _Setup) -> list[int]:
    nxt = np.append(s.starts[1:], s.n_total)
    out = []
    for a, b in zip(s.starts, nxt, strict=True):
        hit = s.detections[(s.detections >= a) & (s.detections < b)]
        out.append(int(hit[0] - a) if hit.size else int(b - a))
    return out


def detection_delays(
    known_drifts: Sequence[Drift],
    detections: Sequence[int],
    *,
    n_total: int,
    n_init_tolerance: int = 0,
) -> list[int]:
    """Per known drift, the observations from its start to the first detection before the next
    drift's start (or ``n_total``); a drift without one gets that whole gap."""
    return _delays(_setup(known_drifts, detections, 1, n_total, "closed", n_init_tolerance))


def _mean_detection_delay(s: _Setup) -> float:
    """Mean of :func:`detection_delays` over the known drifts, in observations.

    The delay does not use the tolerance ``window`` (it only takes it for a common signature
    and checks it).
    """
    return float(np.mean(_delays(s)))


def _mean_time_between_false_alarms(s: _Setup) -> float:
    """Mean gap between consecutive false alarms (detections outside every window), in
    observations; ``n_total`` when there are fewer than two false alarms."""
    false = s.detections[~_in_window(s).any(0)]
    if false.size < 2:
        return float(s.n_total)
    return float(np.diff(false).mean())


def _mean_time_ratio(s: _Setup) -> float:
    """``MTFA / MD * DCR`` (A.6 Eq. 6); ``inf`` when the mean delay is 0."""
    md = _mean_detection_delay(s)
    if md == 0:
        return float("inf")
    return _mean_time_between_false_alarms(s) / md * _detected_change_rate(s)


def _detection_measures(s: _Setup) -> dict[str, float]:
    """All six measures, reported together (each alone can be gamed), by name."""
    return {
        "detected_change_rate": _detected_change_rate(s),
        "missed_detection_rate": _missed_detection_rate(s),
        "false_discovery_rate": _false_discovery_rate(s),
        "mean_detection_delay": _mean_detection_delay(s),
        "mean_time_between_false_alarms": _mean_time_between_false_alarms(s),
        "mean_time_ratio": _mean_time_ratio(s),
    }


detected_change_rate = _measure(_detected_change_rate)
missed_detection_rate = _measure(_missed_detection_rate)
false_discovery_rate = _measure(_false_discovery_rate)
mean_detection_delay = _measure(_mean_detection_delay)
mean_time_between_false_alarms = _measure(_mean_time_between_false_alarms)
mean_time_ratio = _measure(_mean_time_ratio)
detection_measures = _measure(_detection_measures)
