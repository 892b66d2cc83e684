"""One step of a drift report as the runner drives it: :meth:`DriftReporter.on_batch` with the
batch, then :meth:`DriftReporter.on_record` with the step's record (its alarms, known drifts,
partial alerts and regions, as given)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from torchstream.base import DriftDetectorBase
from torchstream.report.reporter import DriftReporter
from torchstream.step import Batch, StepRecord


def step(reporter: DriftReporter, batch: Batch, *,
         alerts: Mapping[str, Sequence[int]] | None = None, known: Sequence[int] = (),
         partial: Mapping[str, Sequence[int | str]] | None = None,
         regions: Mapping[str, torch.Tensor] | None = None) -> None:
    reporter.on_batch(batch)
    reporter.on_record(StepRecord(
        batch.step, batch.start, batch.start + batch.size,
        alerts={k: tuple(v) for k, v in (alerts or {}).items()}, known_drifts=tuple(known),
        partial_alerts={k: tuple(v) for k, v in (partial or {}).items()},
        regions=dict(regions or {})))


def read(*detectors: DriftDetectorBase) -> dict[str, dict]:
    """The keyword arguments of :func:`step` for the outcome of ``detectors``' last update,
    by their names: alarms, partial alerts (a detector that tests features) and regions."""
    return {"alerts": {d.name: d.new_alerts for d in detectors},
            "partial": {d.name: d.new_partial_alerts for d in detectors if d.partial},
            "regions": {d.name: d.new_regions for d in detectors if d.new_regions is not None}}
