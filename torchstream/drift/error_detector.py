"""A river change detector on the prediction errors of the evaluated learner, as a plug-in."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Literal

import torch

from torchstream.base import DriftDetectorBase
from torchstream.checkpoint import restore_object
from torchstream.typing import BatchView

__all__ = ["ErrorDetector"]


class ErrorDetector(DriftDetectorBase):
    """Feed a river drift detector, row by row, with the learner's prediction errors.

    Error-rate detectors (DDM, EDDM, HDDM) expect **1 for an error and 0 for a correct
    prediction**; feeding correctness flags instead makes them alarm on improvements and never on
    deteriorations (a defect of float, spec §1.4). ``signal`` says what is fed:

    * ``"error"`` (default): ``1`` if the most probable class is wrong, else ``0``
      (classification); the absolute error (regression);
    * ``"loss"``: the per-row log loss (classification) / squared error (regression), for
      detectors on real values such as ADWIN or Page-Hinkley.

    The predictions are those of the runner's first predictor *before* it learns the batch.
    Alerts are recorded as stream rows (:attr:`alerts`: the index of the row whose update
    fired, pre-training rows included) and as evaluation
    steps (``drift_steps``). Outside a run, :meth:`observe` counts rows from the first it saw.

    Parameters
    ----------
    detector
        Any object with river's ``update(x)`` and ``drift_detected``.
    signal
        ``"error"`` or ``"loss"``.
    name
        Plug-in name (default ``"drift_<detector class>"``).

    >>> from river import drift
    >>> from torchstream.step import Batch
    >>> det = ErrorDetector(drift.binary.DDM())
    >>> p = torch.tensor([[0.9, 0.1]]).expand(600, 2)
    >>> y = torch.cat([torch.zeros(300), torch.ones(300)]).long()
    >>> det.update(Batch(0, 0, torch.zeros(600, 1), y, p, None)); det.drift_detected
    True
    >>> det.new_alerts  # the first wrong prediction
    [300]
    >>> alone = ErrorDetector(drift.binary.DDM())  # outside a run: rows counted from 0
    >>> alone.observe(y, p); alone.alerts, alone.n_rows
    ([300], 600)
    """

    def __init__(
        self, detector: Any, *, signal: Literal["error", "loss"] = "error",
        name: str | None = None,
    ) -> None:
        if not (hasattr(detector, "update") and hasattr(detector, "drift_detected")):
            raise TypeError(
                "detector needs update(x) and drift_detected (river's protocol), got "
                f"{type(detector).__name__}"
            )
        if signal not in ("error", "loss"):
            raise ValueError(f"signal must be 'error' or 'loss', got {signal!r}")
        super().__init__()
        self.detector = detector
        self.signal = signal
        self.name = name or f"drift_{type(detector).__name__.lower()}"
        self.drift_steps: list[int] = []

    def _signal(self, y: torch.Tensor, y_pred: torch.Tensor) -> list[float]:
        if y_pred.dim() == 2:  # class probabilities
            if self.signal == "error":
                values = (y_pred.argmax(1) != y.long()).double()
            else:
                p = y_pred.gather(1, y.long().view(-1, 1)).squeeze(1).double()
                values = -torch.log(p.clamp_min(1e-15))
        else:
            diff = y_pred.reshape(-1).double() - y.double()
            values = diff.abs() if self.signal == "error" else diff**2
        return values.tolist()

    def observe(self, y: torch.Tensor, y_pred: torch.Tensor, start: int | None = None) -> None:
        """Feed the signal of every row (labels ``y``, predictions ``y_pred`` made before
        learning them); ``start``: the stream row of the first (default: the rows seen so far).
        :attr:`new_alerts` holds the rows that alarmed."""
        values = self._signal(y, y_pred)
        first = self._advance(len(values), start)
        rows = []
        for i, v in enumerate(values):
            self.detector.update(v)
            if self.detector.drift_detected:
                rows.append(first + i)
        self._alarm(rows)

    def update(self, batch: BatchView) -> None:
        """Feed every row of the batch (the runner logs the alarms at their rows,
        ``alarms/<name>``: no per-batch scalar, which logging every few batches would
        sample)."""
        self.observe(batch.y, batch.y_pred, start=batch.start)
        if self.drift_detected and (not self.drift_steps or self.drift_steps[-1] != batch.step):
            self.drift_steps.append(int(batch.step))

    def state_dict(self) -> dict[str, object]:
        return {"detector": copy.deepcopy(self.detector), "drift_detected": self.drift_detected,
                "alerts": list(self.alerts),
                "drift_steps": list(self.drift_steps), "n_rows": self.n_rows}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        det = state["detector"]
        self.detector = restore_object(det, "the river detector")
        self.drift_detected = bool(state["drift_detected"])
        self.alerts = [int(r) for r in state["alerts"]]
        self.drift_steps = list(state["drift_steps"])
        self.n_rows = int(state["n_rows"])

    def __repr__(self) -> str:
        return f"ErrorDetector({self.detector!r}, signal={self.signal!r})"
