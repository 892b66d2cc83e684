"""What one step of a run sees and what it produced: :class:`Batch` and :class:`StepRecord`.

A run is a loop over batches. Each step the runner hands every plug-in the :class:`Batch` (the
rows as the learner sees them, its prediction before learning them) and, once the learner has
learned them, builds one :class:`StepRecord`: the step's rows, the metrics and loss of a logged
step, each explainer's importance by feature, each detector's new alarms (and the features
and regions it named), the known drifts the batch passed, and the scalars of other plug-ins.
Plug-ins read the record before the learner learns the batch (all of it but the loss), sinks
once the loss is known; nothing is parsed back from tag strings.

>>> record = StepRecord(step=2, start=20, stop=30, logged=True, alerts={"adwin": (27,)},
...                     alarm_counts={"adwin": 1}, known_drifts=(25,), n_known_drifts=1,
...                     importance={"ipfi": {"age": 0.5}})
>>> record.rows, record.last_row, record.new_alarm_counts("adwin")
(range(20, 30), 29, {27: 1})
>>> record.counts()
{'drifts/known': {25: 1.0, 29: 1.0}, 'alarms/adwin': {27: 1.0, 29: 1.0}}
>>> record.scalars_by_tag()
{'ipfi/age': 0.5}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from torchstream.typing import ModelFn

__all__ = ["Batch", "StepRecord"]


@dataclass(frozen=True)
class Batch:
    """What a plug-in sees for one batch.

    Attributes
    ----------
    step
        Index of the batch in the run (0-based).
    start
        Index in the stream of the batch's first row.
    X, y
        The batch as the learner sees it (after the plug-ins' ``transform``): ``[B, d]``, ``[B]``.
    y_pred
        The learner's output *before* it learned from this batch (probabilities ``[B, k]`` or
        values ``[B]``).
    learner
        The learner; a ``ModelFn`` (call it, never train it).
    """

    step: int
    start: int
    X: torch.Tensor
    y: torch.Tensor
    y_pred: torch.Tensor
    learner: ModelFn

    @property
    def size(self) -> int:
        return int(self.X.shape[0])


@dataclass(frozen=True)
class StepRecord:
    """What one step produced (rows numbered from 0 in the stream, pre-training included).

    Attributes
    ----------
    step
        Index of the batch in the run.
    start, stop
        The batch's rows: ``start .. stop - 1``.
    logged
        Whether this is a logged step (every ``log_every`` steps): only then are ``metrics``,
        ``loss``, ``importance`` and ``scalars`` filled.
    metrics
        The metrics by tag (``metrics/<metric>/<cumulative|window>``, or
        ``metrics/<metric>/<predictor>`` when several predictors are compared).
    loss
        The first predictor's training loss on the batch (None: not logged, or several
        predictors).
    importance
        ``{explainer: {feature: importance}}`` of every explainer that has explained rows.
    alerts
        ``{detector: rows}``: the alarms each detector raised at this step (every detector of
        the run has an entry, empty when it did not alarm).
    alarm_counts
        ``{detector: alarms so far}``, this step's included.
    known_drifts, n_known_drifts
        The stream's known drift rows within this batch, and how many lie at or before
        ``stop - 1`` (None: the stream has no known drifts).
    scalars
        Every other plug-in's scalars by tag (``<plug-in>/<name>``).
    partial_alerts
        ``{detector: features}``: the features (column indices or group names) that alarmed
        on their own at this step, for every detector that tests single features (empty when
        none did).
    regions
        ``{detector: centres [r, d]}``: where a detector located the change it alarmed at
        this step (only detectors that located one).
    """

    step: int
    start: int
    stop: int
    logged: bool = False
    metrics: Mapping[str, float] = field(default_factory=dict)
    loss: float | None = None
    importance: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    alerts: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    alarm_counts: Mapping[str, int] = field(default_factory=dict)
    known_drifts: tuple[int, ...] = ()
    n_known_drifts: int | None = None
    scalars: Mapping[str, float] = field(default_factory=dict)
    partial_alerts: Mapping[str, tuple[int | str, ...]] = field(default_factory=dict)
    regions: Mapping[str, torch.Tensor] = field(default_factory=dict)

    @property
    def rows(self) -> range:
        return range(self.start, self.stop)

    @property
    def last_row(self) -> int:
        return self.stop - 1

    def new_alarm_counts(self, detector: str) -> dict[int, int]:
        """``{row: alarms so far}`` at each of ``detector``'s alarms of this step."""
        new = self.alerts.get(detector, ())
        before = self.alarm_counts.get(detector, 0) - len(new)
        return {row: before + i + 1 for i, row in enumerate(new)}

    def new_known_counts(self) -> dict[int, int]:
        """``{row: known drifts so far}`` at each known drift of this batch."""
        before = (self.n_known_drifts or 0) - len(self.known_drifts)
        return {row: before + i + 1 for i, row in enumerate(self.known_drifts)}

    def counts(self) -> dict[str, dict[int, float]]:
        """The counting series of the step by tag, ``{tag: {row: count so far}}``:
        ``drifts/known`` (when the stream has known drifts) and ``alarms/<detector>``, a point
        at each row of this batch that adds one and, at a logged step, one at its last row
        (each row one value)."""
        series = {}
        if self.n_known_drifts is not None:
            series["drifts/known"] = (self.new_known_counts(), self.n_known_drifts)
        for detector, count in self.alarm_counts.items():
            series[f"alarms/{detector}"] = (self.new_alarm_counts(detector), count)
        out = {}
        for tag, (points, now) in series.items():
            if self.logged:
                points.setdefault(self.last_row, now)
            out[tag] = {row: float(points[row]) for row in sorted(points)}
        return out

    def scalars_by_tag(self) -> dict[str, float]:
        """A logged step's values by tag, in the tag convention of
        :mod:`torchstream.sinks.base`: the metrics, ``learner/loss``,
        ``<explainer>/<feature>`` and the other plug-ins' scalars."""
        out = dict(self.metrics)
        if self.loss is not None:
            out["learner/loss"] = self.loss
        for explainer, values in self.importance.items():
            out.update({f"{explainer}/{feature}": v for feature, v in values.items()})
        out.update(self.scalars)
        return out
