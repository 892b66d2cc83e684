"""The summary of a run: :class:`RunResult` (final metrics, per-step records, tables)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from torchstream.evaluate.records import RecordFile

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """Summary of a (possibly resumed) run.

    ``metrics`` holds the final value of every metric (``"<predictor>/<metric>"`` when several
    predictors are compared; the mean over instances for k-fold, with ``"..._std"`` beside it);
    ``steps`` the per-step records (one dict per step, predictor and instance: the metrics on
    that step's test rows, NaN where it did not test, and the test / train seconds): a list of
    the records kept in memory, or a :class:`~torchstream.evaluate.records.RecordFile` that
    reads ``records_path`` when used. ``records_dropped`` counts the older records the
    in-memory window dropped (``Evaluator(max_records=...)``). ``stopped``: the run's
    ``should_stop`` callback ended it before its last step.
    """

    n_rows: int
    n_steps: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    checkpoint: str | None = None
    steps: Sequence[dict[str, Any]] = field(default_factory=list)
    predictors: list[str] = field(default_factory=list)
    records_path: str | None = None
    records_dropped: int = 0
    stopped: bool = False
    _warned: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def rows_per_second(self) -> float:
        return self.n_rows / self.seconds if self.seconds > 0 else float("nan")

    def to_frame(self) -> Any:
        """The per-step records as a pandas DataFrame (one row per step, predictor, instance);
        read from ``records_path`` when the records went to a file. Warns (once) when the
        in-memory window dropped older records."""
        if self.records_dropped and not self._warned:
            self._warned = True
            warnings.warn(
                f"the per-step records hold the last {len(self.steps):,} of "
                f"{len(self.steps) + self.records_dropped:,} records ({self.records_dropped:,} "
                "older ones were dropped); pass records_path= or a larger max_records to "
                "keep them all", stacklevel=2)
        if isinstance(self.steps, RecordFile):
            return self.steps.frame()
        return pd.DataFrame(list(self.steps))

    def summary(self) -> Any:
        """Final metrics as a DataFrame: one row per predictor, one column per metric."""
        if len(self.predictors) <= 1:
            name = self.predictors[0] if self.predictors else "learner"
            return pd.DataFrame([self.metrics], index=[name])
        rows: dict[str, dict[str, float]] = {}
        for key, value in self.metrics.items():
            pred, metric = key.split("/", 1)
            rows.setdefault(pred, {})[metric] = value
        return pd.DataFrame.from_dict(rows, orient="index")

    def table(self) -> str:
        """The summary as an aligned text table (one column per predictor when several)."""
        head = [("rows", f"{self.n_rows:,}"), ("batches", f"{self.n_steps:,}"),
                ("seconds", f"{self.seconds:.2f}"), ("rows / s", f"{self.rows_per_second:,.0f}")]
        if len(self.predictors) <= 1:
            rows = head + [(k, _fmt(k, v)) for k, v in self.metrics.items()]
            return _text_table(rows)
        frame = self.summary()
        cols = [str(c) for c in frame.index]
        body = [(str(m), *(_fmt(str(m), frame.loc[p, m]) for p in frame.index))
                for m in frame.columns]
        return _text_table(head) + "\n" + _text_table([("", *cols), *body], header=True)


def _fmt(name: str, value: float) -> str:
    """Counts (``n_parameters``) as integers, everything else with 4 decimals."""
    if name.endswith("n_parameters") and math.isfinite(value):
        return f"{int(value):,}"
    return f"{value:.4f}"


def _text_table(rows: Sequence[tuple[str, ...]], header: bool = False) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [line]
    for j, r in enumerate(rows):
        cells = [f" {r[0]:<{widths[0]}} "] + [f" {c:>{w}} " for c, w in zip(r[1:], widths[1:])]
        out.append("|" + "|".join(cells) + "|")
        if header and j == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)
