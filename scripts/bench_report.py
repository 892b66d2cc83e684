"""What the drift report costs per batch and per report.

    python scripts/bench_report.py [--features 9] [--batch 25] [--batches 640]

A :class:`~torchstream.report.reporter.DriftReporter` records ``--batches`` batches of
``--batch`` rows (an explainer with ``--features`` features whose importance is read every
batch, a two-class model) with one known drift in the middle, window 2,000 and settle 6,000
rows as in ``scripts/evaluate_drift_report.py``; printed: µs per recorded batch (with and
without the PD rows kept for the curves) and the milliseconds of the batch that opened the report
(the PD curves at the alarm) and of the one that built it (the after curves and the statistics).
Minimum over ``--repeats`` runs, torch on one thread.
"""

from __future__ import annotations

import argparse
import time

import torch

from torchstream.step import Batch, StepRecord
from torchstream.report.reporter import DriftReporter


class _Explainer:
    """An explainer whose importance is a fixed tensor (the reporter only reads it)."""

    def __init__(self, d: int) -> None:
        self.feature_names = [f"x{j}" for j in range(d)]
        self.alpha = 0.01
        self.name = "explainer"
        self._value = torch.rand(d)

    @property
    def importance(self) -> torch.Tensor:
        return self._value


def _model(X: torch.Tensor) -> torch.Tensor:
    s = X.sum(1)
    return torch.softmax(torch.stack([s, -s], 1), 1)


def run(d: int, b: int, batches: int, pd_rows: int) -> tuple[float, float, float]:
    """µs per ordinary batch, ms of the opening batch, ms of the building batch."""
    X = torch.randn(b, d)
    y, y_pred = torch.zeros(b), _model(X)
    drift = (batches // 4) * b
    rep = DriftReporter([_Explainer(d)], window=2_000, settle=6_000, at=[drift],
                        pd_rows=pd_rows)
    times = []
    for step in range(batches):
        t = time.perf_counter()
        rep.on_batch(Batch(step, step * b, X, y, y_pred, _model))
        rep.on_record(StepRecord(step, step * b, (step + 1) * b))
        times.append(time.perf_counter() - t)
    opened = drift // b  # the batch that passes the drift row
    built = next(i for i in range(batches) if (i + 1) * b >= drift + 8_000)
    ordinary = sorted(t for i, t in enumerate(times) if i not in (opened, built))
    return 1e6 * ordinary[len(ordinary) // 2], 1e3 * times[opened], 1e3 * times[built]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=9)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--batches", type=int, default=640)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for pd_rows in (0, 200):
        runs = [run(args.features, args.batch, args.batches, pd_rows)
                for _ in range(args.repeats)]
        per_batch, opened, built = (min(r[i] for r in runs) for i in range(3))
        print(f"pd_rows {pd_rows:>3}: {per_batch:6.1f} us per batch (median batch, min of "
              f"{args.repeats}), opening batch {opened:6.2f} ms, building batch {built:6.2f} ms")


if __name__ == "__main__":
    main()
