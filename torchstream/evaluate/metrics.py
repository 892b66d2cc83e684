"""Streaming metrics, cumulative or over a sliding window of the last ``window`` rows.

Every metric takes whole batches: ``update(y_true [B], y_pred)``, where ``y_pred`` is what a
learner's ``ModelFn`` returns (class probabilities ``[B, k]`` for a classifier, values ``[B]``
for a regressor). ``update`` only queues the batch; the queue is folded into the state (in one
batched pass) when ``flush_rows`` rows are waiting, so per-row updates cost almost nothing, and
``get()`` reads state plus queue. State lives in tensors on the data's device; ``get()`` syncs.

>>> acc = Accuracy(window=2)
>>> acc.update(torch.tensor([0, 1, 1]), torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]))
>>> round(acc.get(), 4)
0.5
>>> Accuracy().name, Accuracy(window=500).name
('accuracy', 'accuracy_window')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = [
    "F1",
    "MAE",
    "METRICS",
    "MSE",
    "Accuracy",
    "LogLoss",
    "Metric",
    "default_metrics",
]


class _Ring:
    """Fixed-size ring buffer of the last ``size`` rows of a ``[n, w]`` tensor stream."""

    def __init__(self, size: int, width: int) -> None:
        self.size, self.width = size, width
        self.buf: torch.Tensor | None = None
        self.pos = 0
        self.filled = 0

    def push(self, v: torch.Tensor) -> None:
        if self.buf is None:
            self.buf = torch.zeros(self.size, self.width, dtype=torch.float64, device=v.device)
        v = v.to(torch.float64).reshape(-1, self.width)[-self.size :]
        n = v.shape[0]
        idx = (torch.arange(n, device=v.device) + self.pos) % self.size
        self.buf[idx] = v
        self.pos = (self.pos + n) % self.size
        self.filled = min(self.filled + n, self.size)

    def values(self) -> torch.Tensor:
        if self.buf is None:
            return torch.zeros(0, self.width, dtype=torch.float64)
        return self.buf if self.filled == self.size else self.buf[: self.filled]

    def state_dict(self) -> dict[str, object]:
        return {"buf": self.buf, "pos": self.pos, "filled": self.filled}

    def load_state_dict(self, s: Mapping[str, Any]) -> None:
        self.buf, self.pos, self.filled = s["buf"], s["pos"], s["filled"]


class Metric:
    """Base class: a per-row quantity, summarised over all rows or the last ``window`` rows."""

    base_name = "metric"
    task = "classification"
    bigger_is_better = True
    _width = 1  # per-row record width kept in the window

    def __init__(self, window: int | None = None) -> None:
        if window is not None and (not isinstance(window, int) or window < 1):
            raise ValueError(f"window must be a positive integer or None, got {window!r}")
        self.window = window
        self._ring = _Ring(window, self._width) if window else None
        self._total: torch.Tensor | None = None
        self.n = 0
        self._pending: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._n_pending = 0

    @property
    def name(self) -> str:
        return self.base_name if self.window is None else f"{self.base_name}_window"

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _summarise(self, records_sum: torch.Tensor, n: int) -> float:
        return float(records_sum[0] / n)

    flush_rows = 512

    def batch_value(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
        """The metric on one batch alone (state unchanged): a step's raw measurement."""
        n = y_true.shape[0]
        if n == 0:
            return float("nan")
        rec = self._records(y_true, y_pred).to(torch.float64).reshape(n, -1)
        return self._summarise(rec.sum(0), n)

    def update(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> None:
        """Queue a batch ``(y_true [B], y_pred [B, k] or [B])``."""
        if y_true.shape[0] != y_pred.shape[0]:
            raise ValueError(f"{y_true.shape[0]} targets but {y_pred.shape[0]} predictions")
        self._pending.append((y_true.detach(), y_pred.detach()))
        self._n_pending += y_true.shape[0]
        if self._n_pending >= self.flush_rows:
            self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        y_true, y_pred = self._concat_pending()
        self._pending.clear()
        self._n_pending = 0
        self._fold(y_true, y_pred)

    def _fold(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> None:
        rec = self._records(y_true, y_pred).to(torch.float64).reshape(y_true.shape[0], -1)
        if self._ring is not None:
            self._ring.push(rec)
        else:
            s = rec.sum(0)
            self._total = s if self._total is None else self._grow_add(self._total, s)
        self.n += y_true.shape[0]

    @staticmethod
    def _grow_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def get(self) -> float:
        if self._ring is not None:  # the window's content does not depend on when it is folded
            self._flush()
            vals = self._ring.values()
            if vals.shape[0] == 0:
                return float("nan")
            return self._summarise(vals.sum(0), vals.shape[0])
        if self.n + self._n_pending == 0:
            return float("nan")
        # Cumulative sums are folded only every `flush_rows` rows (points that depend on the
        # batch sizes alone), never here: a resumed run adds in the same order, bit for bit.
        total = self._total
        if self._pending:
            y_true, y_pred = self._concat_pending()
            rec = self._records(y_true, y_pred).to(torch.float64).reshape(y_true.shape[0], -1)
            total = rec.sum(0) if total is None else self._grow_add(total, rec.sum(0))
        assert total is not None
        return self._summarise(total, self.n + self._n_pending)

    def _concat_pending(self) -> tuple[torch.Tensor, torch.Tensor]:
        if len(self._pending) == 1:
            return self._pending[0]
        return torch.cat([t for t, _ in self._pending]), torch.cat([p for _, p in self._pending])

    def state_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "total": self._total,
            "ring": None if self._ring is None else self._ring.state_dict(),
            # one tensor pair, not one per batch: the same rows, a checkpoint of constant size
            "pending": [self._concat_pending()] if self._pending else [],
        }

    def load_state_dict(self, s: Mapping[str, Any]) -> None:
        self.n, self._total = s["n"], s["total"]
        self._pending = list(s["pending"])
        self._n_pending = sum(int(t.shape[0]) for t, _ in self._pending)
        if self._ring is not None:
            self._ring.load_state_dict(s["ring"])

    def __repr__(self) -> str:
        return f"{self.name}: {self.get():.4f}"


def _labels(y_pred: torch.Tensor) -> torch.Tensor:
    return y_pred.argmax(1) if y_pred.dim() == 2 else (y_pred > 0.5).long()


class Accuracy(Metric):
    """Fraction of rows whose most probable class is the true one."""

    base_name = "accuracy"

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        return (_labels(y_pred) == y_true.long()).double()


class LogLoss(Metric):
    """Mean cross-entropy ``-log p[y]`` (probabilities clipped to ``[1e-15, 1]``)."""

    base_name = "log_loss"
    bigger_is_better = False

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        p = y_pred if y_pred.dim() == 2 else torch.stack([1 - y_pred, y_pred], 1)
        return -p.double().gather(1, y_true.long().view(-1, 1)).clamp_min(1e-15).log()


class F1(Metric):
    """F1 score: of class index 1 for two classes, macro-averaged over classes for more.

    The window keeps ``(true, predicted)`` pairs; the cumulative version keeps confusion
    counts (true positives, predicted and actual counts per class).
    """

    base_name = "f1"
    _width = 2
    max_classes = 1024

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        return torch.stack([y_true.long(), _labels(y_pred)], 1).double()

    def __init__(self, window: int | None = None) -> None:
        super().__init__(window)
        self.n_classes = 2

    def _fold(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> None:
        self.n_classes = max(self.n_classes, y_pred.shape[1] if y_pred.dim() == 2 else 2)
        if self._ring is not None:
            super()._fold(y_true, y_pred)
            return
        counts = self._counts(y_true.long(), _labels(y_pred), self.n_classes)
        self._total = counts if self._total is None else self._grow_add(self._total, counts)
        self.n += y_true.shape[0]

    @staticmethod
    def _counts(t: torch.Tensor, p: torch.Tensor, k: int) -> torch.Tensor:
        k = max(k, int(t.max()) + 1 if t.numel() else 0, int(p.max()) + 1 if p.numel() else 0)
        tp = torch.bincount(t[t == p], minlength=k).double()
        actual = torch.bincount(t, minlength=k).double()
        pred = torch.bincount(p, minlength=k).double()
        return torch.stack([tp, actual, pred])

    @staticmethod
    def _grow_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        k = max(a.shape[1], b.shape[1])
        a = torch.nn.functional.pad(a, (0, k - a.shape[1]))
        b = torch.nn.functional.pad(b, (0, k - b.shape[1]))
        return a + b

    def get(self) -> float:
        self._flush()
        if self._ring is not None:
            pairs = self._ring.values().long()
            if pairs.shape[0] == 0:
                return float("nan")
            counts = self._counts(pairs[:, 0], pairs[:, 1], self.n_classes)
        else:
            if self._total is None:
                return float("nan")
            counts = self._total
        return self._score(counts, self.n_classes)

    @staticmethod
    def _score(counts: torch.Tensor, n_classes: int) -> float:
        tp, actual, pred = counts
        denom = actual + pred
        f1 = torch.where(denom > 0, 2 * tp / denom.clamp_min(1), torch.zeros_like(tp))
        if n_classes <= 2 and counts.shape[1] <= 2:
            return float(f1[1])
        present = (actual + pred) > 0
        return float(f1[present].mean())

    def batch_value(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> float:
        if y_true.shape[0] == 0:
            return float("nan")
        k = max(self.n_classes, y_pred.shape[1] if y_pred.dim() == 2 else 2)
        return self._score(self._counts(y_true.long(), _labels(y_pred), k), k)

    def state_dict(self) -> dict[str, object]:
        return {**super().state_dict(), "n_classes": self.n_classes}

    def load_state_dict(self, s: Mapping[str, Any]) -> None:
        super().load_state_dict(s)
        self.n_classes = s["n_classes"]


class MSE(Metric):
    """Mean squared error."""

    base_name = "mse"
    task = "regression"
    bigger_is_better = False

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        return (y_pred.reshape(-1).double() - y_true.double()) ** 2


class MAE(Metric):
    """Mean absolute error."""

    base_name = "mae"
    task = "regression"
    bigger_is_better = False

    def _records(self, y_true: torch.Tensor, y_pred: torch.Tensor) -> torch.Tensor:
        return (y_pred.reshape(-1).double() - y_true.double()).abs()


METRICS: dict[str, type[Metric]] = {
    "accuracy": Accuracy,
    "f1": F1,
    "log_loss": LogLoss,
    "mse": MSE,
    "mae": MAE,
}


def default_metrics(task: str, window: int | None = 1000) -> list[Metric]:
    """Cumulative and (when ``window``) windowed versions of the task's standard metrics."""
    kinds = [Accuracy, F1, LogLoss] if task == "classification" else [MSE, MAE]
    out: list[Metric] = [k() for k in kinds]
    if window:
        out += [k(window=window) for k in kinds]
    return out
