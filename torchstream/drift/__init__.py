"""Drift detection: on explanation streams (PDP), on prediction errors, on parameter
distributions (ERICS, and its label-free autoencoder form), and local change of attributions
(CDLEEDS)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.drift.cdleeds import (
        CDLEEDS,
        LocalChange,
        LocalChangeMonitor,
        corrected_significance,
        fisher_combine,
    )
    from torchstream.drift.erics import ERICS
    from torchstream.drift.error_detector import ErrorDetector
    from torchstream.drift.label_free import LabelFreeERICS
    from torchstream.drift.pdp import PDPDriftDetector

__all__ = [
    "CDLEEDS",
    "ERICS",
    "ErrorDetector",
    "LabelFreeERICS",
    "LocalChange",
    "LocalChangeMonitor",
    "PDPDriftDetector",
    "corrected_significance",
    "fisher_combine",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.drift.cdleeds": (
        "CDLEEDS", "LocalChange", "LocalChangeMonitor",
        "corrected_significance", "fisher_combine",
    ),
    "torchstream.drift.erics": ("ERICS",),
    "torchstream.drift.error_detector": ("ErrorDetector",),
    "torchstream.drift.label_free": ("LabelFreeERICS",),
    "torchstream.drift.pdp": ("PDPDriftDetector",),
})
