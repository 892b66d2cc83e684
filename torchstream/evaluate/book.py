"""The metric book of a run: every predictor's metrics, per instance, and the step measures.

A run compares ``predictors`` (names), each with ``k`` instances (``k > 1`` for k-fold). The
book keeps a copy of the metric templates per predictor and instance (the first predictor's
first instance uses the templates themselves when there is one predictor: the caller reads
them back) and the sum and count of each per-step measure ``f(y_true, y_pred)``. Its values:

* :meth:`values` — each metric of a predictor, the mean over the instances that tested;
* :meth:`scalars` — the values by tag (``metrics/<metric>/<cumulative|window>`` for one
  predictor, ``metrics/<metric name>/<predictor>`` for several; a step measure's mean over the
  tested steps as ``mean_over_steps``);
* :meth:`results` — by metric name, ``<predictor>/<metric>`` for several, with ``_std`` over the
  instances for k-fold.

>>> from torchstream.evaluate.metrics import Accuracy
>>> book = MetricBook(["a"], 1, [Accuracy()])
>>> book.update("a", 0, torch.tensor([1, 0]), torch.tensor([[0.2, 0.8], [0.3, 0.7]]))
{}
>>> book.results(), book.scalars()
({'accuracy': 0.5}, {'metrics/accuracy/cumulative': 0.5})
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from torchstream.evaluate.metrics import Metric

__all__ = ["MetricBook", "StepMeasure"]

#: A per-step measure: ``f(y_true, y_pred) -> float`` with a ``name``.
StepMeasure = Callable[[torch.Tensor, torch.Tensor], float]


class MetricBook:
    """The metrics of ``predictors`` × ``n_instances`` (module docstring).

    Parameters
    ----------
    predictors
        The predictors' names; one name: the single-predictor tags.
    n_instances
        Instances per predictor.
    templates
        The metrics (unique names), copied per predictor and instance.
    step_measures
        Per-step measures with distinct string ``name`` attributes, none a metric's name.
    """

    def __init__(self, predictors: Sequence[str], n_instances: int, templates: Sequence[Metric],
                 step_measures: Sequence[Any] = ()) -> None:
        names = [m.name for m in templates]
        if len(set(names)) != len(names):
            raise ValueError(f"metric names must be unique, got {names}")
        snames = [getattr(f, "name", None) for f in step_measures]
        if any(not isinstance(n, str) for n in snames) or len(set(snames)) != len(snames):
            raise ValueError(f"step_measures need distinct string names, got {snames}")
        clash = sorted({n for n in snames if isinstance(n, str)} & set(names))
        if clash:
            raise ValueError(f"step_measures names {clash} clash with metric names")
        self.predictors = list(predictors)
        self.single = len(self.predictors) == 1
        self.n_instances = n_instances
        self.metric_names = names
        self.step_measures = list(step_measures)
        self.measure_names = [str(n) for n in snames]
        #: ``metrics[name][i]``: the metrics of instance ``i`` of predictor ``name``.
        self.metrics: dict[str, list[list[Metric]]] = {
            n: [list(templates) if (self.single and i == 0) else copy.deepcopy(list(templates))
                for i in range(n_instances)]
            for n in self.predictors
        }
        #: ``[sum, count]`` of each step measure per predictor and instance.
        self.sums: dict[str, list[dict[str, list[float]]]] = {
            n: [{m: [0.0, 0] for m in self.measure_names} for _ in range(n_instances)]
            for n in self.predictors
        }

    def update(self, name: str, instance: int, y: torch.Tensor, y_pred: torch.Tensor
               ) -> dict[str, float]:
        """Add one tested step of an instance; returns the step measures' values on it."""
        for m in self.metrics[name][instance]:
            m.update(y, y_pred)
        measured = {}
        for f in self.step_measures:
            measured[f.name] = float(f(y, y_pred))
            acc = self.sums[name][instance][f.name]
            acc[0] += measured[f.name]
            acc[1] += 1
        return measured

    def step_row(self, name: str, instance: int, y: torch.Tensor | None,
                 y_pred: torch.Tensor | None, measured: Mapping[str, float] | None = None
                 ) -> dict[str, float]:
        """The per-step record's values of an instance: each cumulative metric on the step's
        rows (a windowed metric's per-step value is its cumulative one's), each step measure;
        NaN where it did not test."""
        row: dict[str, float] = {}
        for m in self.metrics[name][instance]:
            if m.window is not None:
                continue
            row[m.base_name] = (float("nan") if y is None or y_pred is None
                                else m.batch_value(y, y_pred))
        for f in self.step_measures:
            row[f.name] = (measured or {}).get(f.name, float("nan"))
        return row

    def instance_values(self, name: str) -> list[list[float]]:
        """Per instance: each metric, then each step measure's mean over the tested steps."""
        out = []
        for ms, sums in zip(self.metrics[name], self.sums[name]):
            row = [m.get() for m in ms]
            row += [s / c if c else float("nan") for s, c in sums.values()]
            out.append(row)
        return out

    def values(self, name: str) -> list[float]:
        """Each metric's value for a predictor: the mean over the instances that tested."""
        per = self.instance_values(name)
        if len(per) == 1:
            return per[0]
        return torch.nanmean(torch.tensor(per, dtype=torch.float64), 0).tolist()

    def scalars(self) -> dict[str, float]:
        """The values by tag (module docstring)."""
        out = {}
        for name in self.predictors:
            values = self.values(name)
            for m, value in zip(self.metrics[name][0], values):
                if self.single:
                    kind = "cumulative" if m.window is None else "window"
                    out[f"metrics/{m.base_name}/{kind}"] = value
                else:
                    out[f"metrics/{m.name}/{name}"] = value
            for f, value in zip(self.step_measures, values[len(self.metric_names):]):
                out[f"metrics/{f.name}/{'mean_over_steps' if self.single else name}"] = value
        return out

    def results(self, n_parameters: Mapping[str, int | None] | None = None) -> dict[str, float]:
        """Every metric's value by name (``<predictor>/<name>`` for several), the predictors'
        ``n_parameters`` where known, and ``<name>_std`` over the instances when there are
        several."""
        out: dict[str, float] = {}
        names = self.metric_names + self.measure_names
        for name in self.predictors:
            prefix = "" if self.single else f"{name}/"
            for mname, v in zip(names, self.values(name)):
                out[prefix + mname] = v
            n_params = (n_parameters or {}).get(name)
            if n_params is not None:
                out[prefix + "n_parameters"] = float(n_params)
            if self.n_instances > 1:
                per = torch.tensor(self.instance_values(name), dtype=torch.float64)
                for mname, sd in zip(names, _nanstd(per).tolist()):
                    out[f"{prefix}{mname}_std"] = sd
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "metrics": {m.name: m.state_dict() for m in self.metrics[self.predictors[0]][0]},
            "instance_metrics": {n: [{m.name: m.state_dict() for m in ms} for ms in per]
                                 for n, per in self.metrics.items()},
            "step_sums": copy.deepcopy(self.sums),
        }

    def check_state(self, state: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming what a state lacks for this book."""
        missing = [m for m in self.metric_names if m not in state["metrics"]]
        if missing:
            raise ValueError(f"checkpoint has no state for metrics {missing}")

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.check_state(state)
        for n, per in self.metrics.items():
            for ms, s in zip(per, state["instance_metrics"][n]):
                for m in ms:
                    m.load_state_dict(s[m.name])
        self.sums = copy.deepcopy(state["step_sums"])


def _nanstd(values: torch.Tensor) -> torch.Tensor:
    ok = ~torch.isnan(values)
    n = ok.sum(0)
    mean = torch.nanmean(values, 0)
    sq = torch.where(ok, (values - mean) ** 2, torch.zeros_like(values)).sum(0)
    return torch.where(n > 1, (sq / (n - 1).clamp_min(1)).sqrt(), torch.full_like(mean, math.nan))
