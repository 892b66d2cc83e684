"""Drift detection: on explanation streams (PDP), on prediction errors, on parameter
distributions (ERICS, and its label-free autoencoder form), and local change of attributions
(CDLEEDS)."""

from torchstream.drift.cdleeds import (
    CDLEEDS,
    LocalChange,
    LocalChangeMonitor,
    corrected_alpha,
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
    "corrected_alpha",
    "corrected_significance",
    "fisher_combine",
]
