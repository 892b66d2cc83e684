"""The drift report: what changed at a drift alarm, in the data and in the model's reliance.

:class:`DriftReporter` is a plug-in of the runner: it keeps bounded windows of rows before and
after each alarm of the run's detectors (read from the step records) and builds a
:class:`Report` per alarm (the kind of change, per-feature distribution tests, reliance and PD
changes).
:mod:`torchstream.report.windows` holds the verdicts of the windows around an alarm,
:mod:`torchstream.report.stats` the tests, :mod:`torchstream.report.pd` the PD curves,
:mod:`torchstream.report.format` the JSON and Markdown forms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.report.reporter import (
        Change,
        Curve,
        DriftReporter,
        PairChange,
        Region,
        Report,
        json_safe,
    )

__all__ = ["Change", "Curve", "DriftReporter", "PairChange", "Region", "Report", "json_safe"]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.report.reporter": (
        "Change", "Curve", "DriftReporter", "PairChange", "Region", "Report", "json_safe",
    ),
})
