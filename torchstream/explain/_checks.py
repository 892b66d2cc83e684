"""Value checks of the explainers' batches: one fused pass per batch, exact locations only on
the failure path.

A scanner (:func:`make_scanner`, built once per batch layout) reduces ``X`` (and ``y``) to a
few scalars with one or two kernels and reads them with one host read: a finite sum proves that
every summand is finite (a NaN or inf value makes the sum NaN or inf). A non-finite sum can also
come from finite values that overflow; only then does :func:`first_nonfinite` look at the values
one by one, so a false alarm costs time, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch

__all__ = ["BatchScan", "Scanner", "first_nonfinite", "make_scanner", "read_scalars",
           "scan_labels"]


class BatchScan(NamedTuple):
    """What one pass over a batch found. ``values_finite``: the sum over ``X`` (and over a
    floating ``y`` in the values mode) is finite; ``x_finite``: that of ``X`` alone (None where
    ``X`` and ``y`` were summed together). In the labels mode ``y_min`` / ``y_max`` are the
    extreme labels and ``y_frac`` the summed distance of the labels to the nearest integers (0
    for integer labels; NaN when a label is NaN or infinite); None in the values mode."""

    values_finite: bool
    x_finite: bool | None
    y_min: float | None
    y_max: float | None
    y_frac: float | None


#: The scan of a batch whose values are all finite (values mode), shared.
FINITE = BatchScan(True, None, None, None, None)
_NOT_FINITE = BatchScan(False, None, None, None, None)

def read_scalars(parts: list[torch.Tensor]) -> list[float]:
    """The 0-d tensors ``parts`` as Python floats with one host read: values on the CPU are read
    directly; on an accelerator they are stacked and copied in one transfer."""
    if len(parts) == 1 or parts[0].device.type == "cpu":
        return [p.item() for p in parts]
    dtype = torch.float32 if parts[0].device.type == "mps" else torch.float64
    return torch.stack([p.to(dtype) for p in parts]).tolist()


class Scanner(NamedTuple):
    """A batch check in two halves: ``parts(X, y)`` queues the reductions (0-d tensors, no
    host read) and ``interpret(values)`` turns their values into a :class:`BatchScan`. On the
    CPU both run at once (:meth:`scan`); on an accelerator the values are read together with
    the model outputs' own check, one host read per batch."""

    parts: Callable[[torch.Tensor, torch.Tensor | None], list[torch.Tensor]]
    interpret: Callable[[list[float]], BatchScan]

    def scan(self, X: torch.Tensor, y: torch.Tensor | None) -> BatchScan:
        return self.interpret(read_scalars(self.parts(X, y)))


def _finite_total(values: list[float]) -> BatchScan:
    return FINITE if math.isfinite(values[0]) else _NOT_FINITE


def _apart(values: list[float]) -> BatchScan:
    x_ok = math.isfinite(values[0])
    return BatchScan(x_ok and math.isfinite(values[1]), x_ok, None, None, None)


def _with_labels(values: list[float]) -> BatchScan:
    x_ok = math.isfinite(values[0])
    return BatchScan(x_ok, x_ok, *_label_values(values[1:]))


def make_scanner(X: torch.Tensor, y: torch.Tensor | None, labels: bool) -> Scanner:
    """The fused check for batches laid out like the floating ``X [B, d]`` and ``y [B]`` (None:
    ``X`` only).

    Values mode (``labels=False``): a floating ``y`` of ``X``'s dtype and device is summed with
    ``X`` in one ``addmv`` (``y + X @ 1``, then a ``sum`` unless ``B = 1``); an integer ``y`` is
    finite, so only ``X`` is summed. Labels mode: the sum of ``X``, ``aminmax(y)`` and, for a
    floating ``y``, the L1 distance of ``y`` to ``round(y)``."""
    floating_y = y is not None and (y.is_floating_point() or y.is_complex())
    if y is None or (not labels and not floating_y):
        return Scanner(lambda X, y: [X.sum()], _finite_total)
    if not labels:
        if y.dtype == X.dtype and y.device == X.device:
            ones = torch.ones(X.shape[1], dtype=X.dtype, device=X.device)
            if X.shape[0] == 1:
                return Scanner(lambda X, y: [torch.addmv(y, X, ones)[0]], _finite_total)
            return Scanner(lambda X, y: [torch.addmv(y, X, ones).sum()], _finite_total)
        return Scanner(lambda X, y: [X.sum(), y.sum().to(X.device)], _apart)
    return Scanner(lambda X, y: [X.sum(), *_label_parts(y.to(X.device))], _with_labels)


def scan_labels(y: torch.Tensor) -> tuple[float, float, float]:
    """``(min, max, distance to the nearest integers)`` of the labels ``y`` (one host read)."""
    return _label_values(read_scalars(_label_parts(y)))


def _label_parts(y: torch.Tensor) -> list[torch.Tensor]:
    if y.dtype == torch.bool:
        y = y.to(torch.uint8)
    low, high = torch.aminmax(y)
    if y.is_floating_point():
        return [low, high, torch.dist(y, y.round(), 1)]
    return [low, high]


def _label_values(values: list[float]) -> tuple[float, float, float]:
    frac = values[2] if len(values) > 2 else 0.0
    return float(values[0]), float(values[1]), frac


def first_nonfinite(t: torch.Tensor) -> tuple[tuple[int, ...], float] | None:
    """The index and value of the first NaN or infinite entry of ``t`` (row-major), or None
    (a non-finite sum of finite values: overflow)."""
    if not (t.is_floating_point() or t.is_complex()):
        return None
    bad = (~torch.isfinite(t)).nonzero()
    if bad.shape[0] == 0:
        return None
    index = tuple(int(i) for i in bad[0].tolist())
    return index, float(t[index].item())
